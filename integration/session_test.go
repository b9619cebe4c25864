package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
)

// createSession creates a persistent session, removed (and checked to
// leave no mount) in t.Cleanup.
func createSession(t *testing.T, e *sandbox.Executor, cfg sandbox.SessionConfig, source string) *sandbox.Session {
	t.Helper()
	s, err := e.CreateSession(context.Background(), cfg, source)
	require.NoError(t, err)
	t.Cleanup(func() { removeSession(t, e, s.ID) })
	return s
}

func removeSession(t *testing.T, e *sandbox.Executor, id string) {
	t.Helper()
	dir := filepath.Join(testutil.StateDir(t), "sessions", id)
	if _, err := os.Stat(dir); err == nil {
		require.NoError(t, e.RemoveSession(context.Background(), id))
	}
	left, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	require.NoError(t, err)
	require.Empty(t, left, "mounts left by session %s", id)
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "session directory %s left", dir)
}

// TestSessionPersistsAndKeepsItsCapability: writes add up across
// invocations and re-opens; the profile, the hidden set and the scope are
// the ones fixed at creation, whatever happens to the profile file or the
// ignore files afterwards; gc leaves the session alone.
func TestSessionPersistsAndKeepsItsCapability(t *testing.T) {
	e := testutil.Executor(t)
	ctx := context.Background()
	repo := ftRepo(t)
	profFile := filepath.Join(t.TempDir(), "narrow.yaml")
	require.NoError(t, os.WriteFile(profFile, []byte("name: narrow\ncommands: [ls, cat, cp]\n"), 0o644))
	prof, err := profiles.Load(profFile)
	require.NoError(t, err)

	s := createSession(t, e, sandbox.SessionConfig{Repo: repo, Profile: prof}, profFile)
	rec := s.Record()
	require.Equal(t, s.ID, rec.ID)
	require.Equal(t, profFile, rec.Profile)
	require.Equal(t, "openwiki/", rec.Scope)
	_, err = s.Write(ctx, "openwiki/one.md", []byte("one\n"), "")
	require.NoError(t, err)
	require.Equal(t, 0, run(t, s, "cp", "README.md", "openwiki/readme.md").ExitCode)
	require.NoError(t, s.Close())

	// The launcher's files change after creation: a wider profile, an
	// ignore file that hides nothing.
	require.NoError(t, os.WriteFile(profFile, []byte("name: narrow\ncommands: [ls, cat, cp, grep, find]\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".openwikiignore"), []byte("!*\n"), 0o644))

	rep, err := e.GC(ctx, false)
	require.NoError(t, err)
	require.NotContains(t, rep.Sessions, s.ID, "gc leaves persistent sessions alone")

	s2, err := e.OpenSession(ctx, s.ID)
	require.NoError(t, err)
	defer s2.Close()
	r, err := s2.Read(ctx, "openwiki/one.md", sandbox.ReadOptions{})
	require.NoError(t, err)
	require.Equal(t, "one\n", r.Content)
	_, err = s2.Read(ctx, "secrets/key.txt", sandbox.ReadOptions{})
	requireRefused(t, err, ".openwikiignore:1 hides secrets/")
	_, err = s2.Read(ctx, "AGENTS.md", sandbox.ReadOptions{})
	requireRefused(t, err, "profile hides agent config")
	_, err = s2.Exec(ctx, []string{"grep", "-r", "SECRET", "."}, nil, nil)
	var ref *allowlist.Refusal
	require.True(t, errors.As(err, &ref), "the recorded profile has no grep: %v", err)
	require.Equal(t, allowlist.KindCmd, ref.Kind)
	res := inBox(t, s2, "cat", "secrets/key.txt")
	require.NotEqual(t, 0, res.ExitCode, "the view still hides what it hid at creation")
	requireNoLeak(t, res, ftSecrets...)

	// Two openers of one session see each other's writes.
	s3, err := e.OpenSession(ctx, s.ID)
	require.NoError(t, err)
	defer s3.Close()
	_, err = s3.Write(ctx, "openwiki/two.md", []byte("two\n"), "")
	require.NoError(t, err)
	require.Equal(t, "two\n", out(run(t, s2, "cat", "openwiki/two.md")))

	cs, err := s2.Changes()
	require.NoError(t, err)
	require.NoError(t, cs.Err())
	var got []string
	for _, c := range cs.Changes {
		got = append(got, c.Path)
	}
	require.Equal(t, []string{"openwiki/one.md", "openwiki/readme.md", "openwiki/two.md"}, got)

	list, err := e.Sessions()
	require.NoError(t, err)
	found := false
	for _, i := range list {
		if i.ID == s.ID {
			found = true
			require.True(t, i.Mounted)
			require.Equal(t, "narrow", i.ProfileName)
		}
	}
	require.True(t, found)

	_, err = e.OpenSession(ctx, "../../etc")
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	_, err = e.OpenSession(ctx, "000000000000")
	require.ErrorIs(t, err, errdefs.ErrNotFound)
}

// TestSessionMountsLost simulates a reboot (the host mounts vanish): a
// read-only session is prepared again, a writable one refuses to go on
// (its tmpfs write area is gone) until it is removed.
func TestSessionMountsLost(t *testing.T) {
	e := testutil.Executor(t)
	ctx := context.Background()
	repo := ftRepo(t)
	w := createSession(t, e, sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t)}, "docs")
	ro := createSession(t, e, sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t), ReadOnly: true}, "docs")
	_, err := w.Write(ctx, "openwiki/x.md", []byte("x\n"), "")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, ro.Close())
	for _, id := range []string{w.ID, ro.ID} {
		_, err := mounts.Sweep(filepath.Join(testutil.StateDir(t), "sessions", id))
		require.NoError(t, err)
	}

	_, err = e.OpenSession(ctx, w.ID)
	require.ErrorIs(t, err, errdefs.ErrDataLoss)
	require.Contains(t, err.Error(), "corral session rm "+w.ID)

	ro2, err := e.OpenSession(ctx, ro.ID)
	require.NoError(t, err)
	r, err := ro2.Read(ctx, "README.md", sandbox.ReadOptions{})
	require.NoError(t, err)
	require.Equal(t, "# demo\nhello\nworld\n", r.Content)
	_, err = ro2.Read(ctx, "secrets/key.txt", sandbox.ReadOptions{})
	requireRefused(t, err, "hides secrets/")
	require.NoError(t, ro2.Close())

	require.NoError(t, e.RemoveSession(ctx, w.ID))
	_, err = e.OpenSession(ctx, w.ID)
	require.ErrorIs(t, err, errdefs.ErrNotFound)
	require.ErrorIs(t, e.RemoveSession(ctx, w.ID), errdefs.ErrNotFound)
}

// corralCmd runs the corral binary against the test containerd, state
// directory and image, and returns stdout, stderr and the exit code.
func corralCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	require.NoError(t, testutil.BuildCorral())
	full := append([]string{"--namespace", testutil.Namespace, "--state-dir", testutil.StateDir(t), "--image", testutil.TestImageRef}, args...)
	cmd := exec.Command(testutil.CorralPath(), full...)
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), stderr.String(), code
}

func TestSessionCLI(t *testing.T) {
	e := testutil.Executor(t)
	repo := ftRepo(t)
	before := testutil.Snapshot(t, repo)

	_, stderr, code := corralCmd(t, "session", "create", "--repo", repo, "--agent-id", "../bob")
	require.Equal(t, 125, code, stderr)
	require.Contains(t, stderr, "agent id")
	_, stderr, code = corralCmd(t, "session", "create", "--repo", repo, "--agent-id", "alice", "--page", "openwiki/x.md")
	require.Equal(t, 125, code, stderr)

	stdout, stderr, code := corralCmd(t, "session", "create", "--repo", repo, "--agent-id", "alice", "--json")
	require.Equal(t, 0, code, stderr)
	var rec sandbox.SessionRecord
	require.NoError(t, json.Unmarshal([]byte(stdout), &rec), stdout)
	t.Cleanup(func() { removeSession(t, e, rec.ID) })
	require.Equal(t, "openwiki/agents/alice/", rec.Scope)
	require.Equal(t, "alice", rec.AgentID)
	require.Equal(t, "docs", rec.Profile)

	_, stderr, code = corralCmd(t, "session", "exec", rec.ID, "--", "cp", "README.md", "openwiki/agents/alice/readme.md")
	require.Equal(t, 0, code, stderr)
	_, stderr, code = corralCmd(t, "session", "exec", rec.ID, "--", "cp", "README.md", "openwiki/agents/bob/readme.md")
	require.Equal(t, 126, code, stderr)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %s", stderr)
	require.Contains(t, stderr, "corral: refused (PATH)")
	require.Contains(t, stderr, "outside the write scope openwiki/agents/alice/")
	_, stderr, code = corralCmd(t, "session", "exec", rec.ID, "--", "cat", "secrets/key.txt")
	require.Equal(t, 126, code)
	require.Contains(t, stderr, ".openwikiignore:1 hides secrets/")

	stdout, stderr, code = corralCmd(t, "session", "exec", "--json", rec.ID, "--", "cat", "openwiki/agents/alice/readme.md")
	require.Equal(t, 0, code, stderr)
	var res struct {
		Stdout  string             `json:"stdout"`
		Session string             `json:"session"`
		Changes []changeset.Change `json:"changes"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), stdout)
	require.Equal(t, "# demo\nhello\nworld\n", res.Stdout)
	require.Equal(t, rec.ID, res.Session)
	require.Len(t, res.Changes, 1)

	stdout, _, code = corralCmd(t, "session", "ls", "--json")
	require.Equal(t, 0, code)
	var list []sandbox.SessionInfo
	require.NoError(t, json.Unmarshal([]byte(stdout), &list))
	var listed *sandbox.SessionInfo
	for i := range list {
		if list[i].ID == rec.ID {
			listed = &list[i]
		}
	}
	require.NotNil(t, listed)
	require.True(t, listed.Mounted)
	stdout, _, code = corralCmd(t, "session", "ls")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, rec.ID)

	stdout, _, code = corralCmd(t, "session", "diff", rec.ID, "--format", "stat")
	require.Equal(t, 0, code)
	require.Equal(t, "create openwiki/agents/alice/readme.md (+3 -0)\n1 file changed, 3 insertions(+), 0 deletions(-)\n", stdout)
	stdout, _, code = corralCmd(t, "session", "diff", rec.ID)
	require.Equal(t, 0, code)
	gitApplyCheck(t, repo, []byte(stdout))
	stdout, _, code = corralCmd(t, "session", "diff", rec.ID, "--format", "json")
	require.Equal(t, 0, code)
	var cs changeset.Set
	require.NoError(t, json.Unmarshal([]byte(stdout), &cs))
	require.Len(t, cs.Changes, 1)
	require.Equal(t, "openwiki/agents/alice/readme.md", cs.Changes[0].Path)
	_, _, code = corralCmd(t, "session", "diff", rec.ID, "--format", "xml")
	require.Equal(t, 125, code)

	_, stderr, code = corralCmd(t, "gc")
	require.Equal(t, 0, code, stderr)
	stdout, _, code = corralCmd(t, "session", "diff", rec.ID, "--format", "stat")
	require.Equal(t, 0, code, "gc leaves the session and its writes alone")
	require.Contains(t, stdout, "openwiki/agents/alice/readme.md")

	stdout, stderr, code = corralCmd(t, "session", "rm", rec.ID)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "removed "+rec.ID+"\n", stdout)
	_, stderr, code = corralCmd(t, "session", "exec", rec.ID, "--", "ls")
	require.Equal(t, 125, code)
	require.Contains(t, stderr, "not found")
	require.Equal(t, before, testutil.Snapshot(t, repo), "the repository is never written")
}
