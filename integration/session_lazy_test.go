package integration

// Sessions that leave no more than they must: an ephemeral session is made
// on disk at its first call, a session opened only for its change set
// neither watches the repository nor needs its mounts, and the session of
// a killed `serve --mcp --repo` ends by its idle TTL.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestEphemeralSessionRefusedLeavesNoTrace: an ephemeral session whose
// calls are all refused never makes its directory or mounts; its first
// permitted call does, and Close removes them.
func TestEphemeralSessionRefusedLeavesNoTrace(t *testing.T) {
	e := testutil.Executor(t)
	repo := lateRepo(t)
	s, err := e.NewSession(context.Background(), sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t)})
	require.NoError(t, err)
	dir := sessionDirOf(t, s.ID)
	_, err = s.Exec(context.Background(), []string{"rm", "-rf", "."}, nil, nil)
	require.Error(t, err)
	_, err = s.Write(context.Background(), "src/a.go", []byte("x"), "")
	require.Error(t, err, "outside the write scope")
	_, err = os.Lstat(dir)
	require.True(t, errors.Is(err, os.ErrNotExist), "a session with only refused calls made %s", dir)
	cs, err := s.Changes()
	require.NoError(t, err)
	require.Empty(t, cs.Changes)

	_, err = s.Exec(context.Background(), []string{"cp", "README.md", "openwiki/readme.md"}, nil, nil)
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "session.json"))
	require.NoError(t, err, "the first call makes the store")
	cs, err = s.Changes()
	require.NoError(t, err)
	require.Len(t, cs.Changes, 1)
	require.NoError(t, s.Close())
	requireDirGone(t, dir)
	requireNoContainers(t, e, s.ID)
}

// TestOpenForChanges: a long-lived owner (not Cold) that opens a session
// only to read its change set starts no repository watch, so a repository
// that moved is no warning; a read-only session whose mounts are gone
// (the machine rebooted) has an empty change set, not an error.
func TestOpenForChanges(t *testing.T) {
	var log bytes.Buffer
	e := testutil.ExecutorWith(t, func(c *sandbox.Config) { c.Log = &log })
	ctx := context.Background()

	repo := lateRepo(t)
	s, err := e.CreateSession(ctx, sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t)}, "docs")
	require.NoError(t, err)
	id := s.ID
	defer removeSession(t, e, id)
	_, err = s.Exec(ctx, []string{"cp", "README.md", "openwiki/readme.md"}, nil, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	moved := repo + "-moved"
	require.NoError(t, os.Rename(repo, moved))
	defer os.Rename(moved, repo)
	log.Reset()
	s, err = e.OpenSession(ctx, id, sandbox.ForChanges())
	require.NoError(t, err)
	cs, err := s.Changes()
	require.NoError(t, err)
	require.Len(t, cs.Changes, 1)
	require.NoError(t, s.Close())
	require.Empty(t, log.String(), "a change-set-only open watches nothing")
	require.NoError(t, os.Rename(moved, repo))

	ro, err := e.CreateSession(ctx, sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t), ReadOnly: true}, "docs")
	require.NoError(t, err)
	roID := ro.ID
	defer removeSession(t, e, roID)
	require.NoError(t, ro.Close())
	_, err = mounts.Sweep(filepath.Join(sessionDirOf(t, roID), "layout"))
	require.NoError(t, err)
	ro, err = e.OpenSession(ctx, roID, sandbox.ForChanges())
	require.NoError(t, err, "a read-only session wrote nothing: its mounts are not needed")
	cs, err = ro.Changes()
	require.NoError(t, err)
	require.Empty(t, cs.Changes)
	_, err = testutil.ExecWithoutPolicy(ctx, ro, []string{"ls"}, nil, nil)
	require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
	require.NoError(t, ro.Close())
}

// TestKilledServerSessionExpires: `serve --mcp --repo` killed (no chance
// to end its session) leaves a persistent session nobody holds; it
// expires after its idle TTL, and the prune keeps its change set as a
// patch.
func TestKilledServerSessionExpires(t *testing.T) {
	testutil.Executor(t)
	require.NoError(t, testutil.BuildCorral())
	repo := lateRepo(t)
	prof := *docsProfile(t)
	prof.TTL = "2s"
	data, err := yaml.Marshal(&prof)
	require.NoError(t, err)
	profFile := filepath.Join(t.TempDir(), "short.yaml")
	require.NoError(t, os.WriteFile(profFile, data, 0o600))

	srv := exec.Command(testutil.CorralPath(), serverArgs(t, "--repo", repo, "--profile", profFile)...)
	srv.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
	stdin, err := srv.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	stdout := &lockedBuffer{}
	stderr := &lockedBuffer{}
	srv.Stdout, srv.Stderr = stdout, stderr
	require.NoError(t, srv.Start())
	defer srv.Process.Kill()
	// One JSON-RPC exchange: initialize, then a write through exec.
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec","arguments":{"argv":["cp","README.md","openwiki/readme.md"]}}}`,
	} {
		_, err := stdin.Write([]byte(msg + "\n"))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), `"id":2`) }, 90*time.Second, 50*time.Millisecond,
		"no answer to the exec call: %s %s", stdout.String(), stderr.String())
	require.NotContains(t, stdout.String(), `"isError":true`)
	m := regexp.MustCompile(`serving session ([0-9a-f]{12})`).FindStringSubmatch(stderr.String())
	require.NotNil(t, m, stderr.String())
	id := m[1]

	require.NoError(t, srv.Process.Signal(syscall.SIGKILL))
	_ = srv.Wait()
	_, err = os.Stat(filepath.Join(sessionDirOf(t, id), "session.json"))
	require.NoError(t, err, "a killed server cannot end its session")

	time.Sleep(2100 * time.Millisecond)
	out, errOut, code := corralCmd(t, "session", "prune")
	require.Equal(t, 0, code, errOut)
	// This start, or an earlier one, pruned it; the patch is kept.
	patch, err := os.ReadFile(filepath.Join(testutil.StateDir(t), "patches", id+".patch"))
	require.NoError(t, err, "%s%s", out, errOut)
	require.Contains(t, string(patch), "+++ b/openwiki/readme.md")
	requireDirGone(t, sessionDirOf(t, id))
}

// TestEphemeralSessionClosedFirst: an ephemeral session closed before its
// first call makes nothing afterwards (a file tool or Warm after Close is
// refused, not the start of a store nobody will remove).
func TestEphemeralSessionClosedFirst(t *testing.T) {
	e := testutil.Executor(t)
	repo := lateRepo(t)
	s, err := e.NewSession(context.Background(), sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t)})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = s.Write(context.Background(), "openwiki/new.md", []byte("x\n"), "")
	require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
	require.True(t, errdefs.IsFailedPrecondition(s.Warm()))
	_, err = s.Exec(context.Background(), []string{"ls"}, nil, nil)
	require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
	requireDirGone(t, sessionDirOf(t, s.ID))
}
