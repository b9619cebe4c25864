package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

// TestAuditLog: session creation, an allowed and a refused invocation, a
// refused file read and a change set each leave one JSON line in
// StateDir/audit.log, and the secret a refusal was about never appears.
func TestAuditLog(t *testing.T) {
	repo := hiddenRepo(t)
	s := newSession(t, repo)
	ctx := context.Background()

	require.Equal(t, 0, run(t, s, "ls").ExitCode)
	_, err := s.Exec(ctx, []string{"cat", "secrets/key"}, nil, nil)
	require.Error(t, err)
	_, err = s.Read(ctx, ".env", sandbox.ReadOptions{})
	require.Error(t, err)
	require.Equal(t, "ok\n", out(inBox(t, s, "probe", "write", "openwiki/new.md", "# new\n")))
	cs, err := s.Changes()
	require.NoError(t, err)
	require.Len(t, cs.Changes, 1)

	recs, err := audit.Read(filepath.Join(testutil.StateDir(t), audit.FileName))
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, r := range recs {
		if r.Session != s.ID {
			continue
		}
		key := r.Type + "/"
		switch e := r.Event.(type) {
		case *audit.Invocation:
			key += e.Decision
			require.NotContains(t, e.Rule, secret)
			switch {
			case e.Decision == audit.Allowed:
				require.Equal(t, []string{"ls"}, e.Argv)
				require.NotNil(t, e.ExitCode)
				require.Equal(t, 0, *e.ExitCode)
			case e.Argv[0] == "cat":
				require.Equal(t, ".openwikiignore:1 hides secrets/", e.Rule)
			}
		case *audit.Refusal:
			require.NotContains(t, e.Error+e.Rule, secret)
		case *audit.ChangeSet:
			require.Equal(t, 1, e.Changes)
			require.NotEmpty(t, e.SHA256)
		case *audit.SessionCreated:
			require.Equal(t, "dir", e.Capability.Mode)
		}
		require.Equal(t, os.Getpid(), r.Peer.PID, "the CLI records itself as the peer")
		kinds[key]++
	}
	require.Equal(t, 1, kinds[audit.TypeSessionCreated+"/"])
	require.Equal(t, 1, kinds[audit.TypeInvocation+"/"+audit.Allowed], "%v", kinds)
	require.Equal(t, 2, kinds[audit.TypeInvocation+"/"+audit.Refused], "%v", kinds)
	require.Equal(t, 2, kinds[audit.TypeRefusal+"/"], "%v", kinds)
	require.Equal(t, 1, kinds[audit.TypeChangeSet+"/"], "%v", kinds)
}

// TestFailedCallsAreAudited (red team of the bounded start): an allowed
// call that failed instead of reaching an exit (its caller gone,
// containerd or the container's shim silent) left no audit record, though
// its tool may have run in part. Now it is an allowed invocation with
// the call's error: a command's and a file tool's.
func TestFailedCallsAreAudited(t *testing.T) {
	s := newSession(t, hiddenRepo(t))
	run(t, s, "ls")
	s.Idle()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Exec(ctx, []string{"ls", "-la"}, nil, nil)
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Read(ctx, "README.md", sandbox.ReadOptions{})
	require.ErrorIs(t, err, context.Canceled)

	recs, err := audit.Read(filepath.Join(testutil.StateDir(t), audit.FileName))
	require.NoError(t, err)
	var failed []*audit.Invocation
	for _, r := range recs {
		if e, ok := r.Event.(*audit.Invocation); ok && r.Session == s.ID && e.Error != "" {
			failed = append(failed, e)
		}
	}
	require.Len(t, failed, 2, "a record of each failed call")
	require.Equal(t, []string{"ls", "-l", "--all"}, failed[0].Argv, "the argv the policy passed, as for a call that ran")
	require.Equal(t, []string{"read", "README.md"}, failed[1].Argv)
	for _, e := range failed {
		require.Equal(t, audit.Allowed, e.Decision)
		require.Nil(t, e.ExitCode, "no exit was seen")
		require.Contains(t, e.Error, "context canceled")
	}
}
