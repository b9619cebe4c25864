package integration

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// TestDaemonIdleTTLIsTheRecords pins the one idle-expiry rule: a
// session's idle TTL is its own record's (sandbox.SessionRecord.IdleTTL),
// counted from its latest use, and whichever process owns the session
// enforces it: the daemon while it runs, prune otherwise. A session the
// daemon made with idle_ttl 2s is expired by a standalone prune once the
// daemon is gone, and a restarted daemon's adoption is no use that would
// extend a session's life.
func TestDaemonIdleTTLIsTheRecords(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	state, sock := dir+"/state", dir+"/corral.sock"
	repo := t.TempDir()
	require.NoError(t, os.Chmod(repo, 0o755))
	testutil.Tree(t, repo, map[string]string{"README.md": "# r\n", "openwiki/index.md": "# i\n"})

	d := startDaemon(t, state, sock)
	c := d.client()
	short, err := c.CreateSession(ctx, api.CreateSession{Repo: repo, IdleTTL: "2s"})
	require.NoError(t, err)
	require.Equal(t, int64(2*time.Second), short.IdleTTLNS)
	long, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
	require.NoError(t, err)
	require.Equal(t, int64(24*time.Hour), long.IdleTTLNS, "the profile's idle_ttl (the daemon's --idle-ttl is not shorter)")
	_, err = c.Write(ctx, short.ID, api.Write{Path: "openwiki/a.md", Content: "kept\n"})
	require.NoError(t, err)

	// The daemon enforces the record's TTL (prune with no idle_for is
	// what its timer runs).
	third, err := c.CreateSession(ctx, api.CreateSession{Repo: repo, IdleTTL: "1s"})
	require.NoError(t, err)
	time.Sleep(2500 * time.Millisecond)
	pr, err := c.Prune(ctx, "")
	require.NoError(t, err)
	var pruned []string
	for _, p := range pr.Pruned {
		pruned = append(pruned, p.Removed)
	}
	require.ElementsMatch(t, []string{short.ID, third.ID}, pruned)

	// A restarted daemon adopts its sessions without using them.
	again, err := c.CreateSession(ctx, api.CreateSession{Repo: repo, IdleTTL: "15s"})
	require.NoError(t, err)
	d.stop(true)
	stopped := time.Now()
	d = startDaemon(t, state, sock)
	c = d.client()
	got, err := c.Session(ctx, again.ID)
	require.NoError(t, err)
	require.False(t, got.LastUsed.After(stopped), "adoption is not a use: last used %s, the daemon stopped at %s", got.LastUsed, stopped)
	d.stop(true)

	// With no daemon, prune reads the same record.
	time.Sleep(time.Until(again.Created.Add(16 * time.Second)))
	e, err := sandbox.New(ctx, sandbox.Config{Namespace: testutil.Namespace, StateDir: state, Image: testutil.TestImageRef})
	require.NoError(t, err)
	defer e.Close()
	ended, err := e.Prune(ctx)
	require.NoError(t, err)
	var ids []string
	for _, x := range ended {
		ids = append(ids, x.ID)
	}
	require.Equal(t, []string{again.ID}, ids, "the 15s session expired by its record; the 24h one stays")
	list, err := e.Sessions()
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, long.ID, list[0].ID)
	require.NoError(t, e.RemoveSession(ctx, long.ID))
}

// TestCLIThroughDaemonWithoutContainerd runs `corral session exec`
// through a real daemon with CONTAINERD_ADDRESS pointing at nothing and a
// state directory that does not exist: a client of the daemon needs
// neither (the daemon has both).
func TestCLIThroughDaemonWithoutContainerd(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	repo := t.TempDir()
	require.NoError(t, os.Chmod(repo, 0o755))
	testutil.Tree(t, repo, map[string]string{"README.md": "# r\n", "openwiki/index.md": "# i\n"})
	d := startDaemon(t, dir+"/state", dir+"/corral.sock")
	defer d.stop(true)
	c := d.client()
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
	require.NoError(t, err)
	defer c.DiscardSession(ctx, s.ID)

	cmd := exec.Command(testutil.CorralPath(), "--daemon", d.sock, "session", "exec", s.ID, "--", "ls")
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+dir+"/no-containerd.sock", "CORRAL_STATE_DIR="+dir+"/no-state")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "README.md\nopenwiki\n", string(out))
	require.NoDirExists(t, dir+"/no-state")
}
