package integration

import (
	"context"
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

	events, err := audit.Read(filepath.Join(testutil.StateDir(t), audit.FileName))
	require.NoError(t, err)
	var mine []audit.Event
	for _, e := range events {
		if e.Session == s.ID {
			mine = append(mine, e)
		}
	}
	kinds := map[string]int{}
	for _, e := range mine {
		kinds[e.Event+"/"+e.Decision]++
		require.NotContains(t, e.Error+e.Rule, secret)
	}
	require.Equal(t, 1, kinds[audit.EventSessionCreated+"/"])
	require.Equal(t, 1, kinds[audit.EventInvocation+"/"+audit.Allowed], "%v", kinds)
	require.Equal(t, 2, kinds[audit.EventInvocation+"/"+audit.Refused], "%v", kinds)
	require.Equal(t, 2, kinds[audit.EventRefusal+"/"], "%v", kinds)
	require.Equal(t, 1, kinds[audit.EventChangeSet+"/"], "%v", kinds)
	for _, e := range mine {
		switch {
		case e.Event == audit.EventInvocation && e.Decision == audit.Allowed:
			require.Equal(t, []string{"ls"}, e.Argv)
			require.NotNil(t, e.ExitCode)
			require.Equal(t, 0, *e.ExitCode)
		case e.Event == audit.EventInvocation && e.Decision == audit.Refused && e.Argv[0] == "cat":
			require.Equal(t, ".openwikiignore:1 hides secrets/", e.Rule)
		case e.Event == audit.EventChangeSet:
			require.Equal(t, 1, *e.Changes)
			require.NotEmpty(t, e.ChangeSetSHA256)
		}
	}
}
