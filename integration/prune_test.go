package integration

// Issue 9 items 13 (sessions end) and 8 (gc removes half-made sessions).

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/mounts/hidden"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// cliSession creates a session with the CLI and returns its id.
func cliSession(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, code := corralCmd(t, append([]string{"session", "create"}, args...)...)
	require.Equal(t, 0, code, stderr)
	return strings.TrimSpace(stdout)
}

func sessionDirOf(t *testing.T, id string) string {
	return filepath.Join(testutil.StateDir(t), "sessions", id)
}

func requireDirGone(t *testing.T, dir string) {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	require.NoError(t, err)
	require.Empty(t, ms, "mounts under %s", dir)
	_, err = os.Lstat(dir)
	require.True(t, errors.Is(err, os.ErrNotExist), "%s is left", dir)
}

func TestSessionPrune(t *testing.T) {
	e := testutil.Executor(t)
	repo := lateRepo(t)

	// The TTL: zero refused, never longer than the profile's.
	_, stderr, code := corralCmd(t, "session", "create", "--repo", repo, "--idle-ttl", "0s")
	require.Equal(t, 125, code)
	require.Contains(t, stderr, "a session always ends")
	_, stderr, code = corralCmd(t, "session", "create", "--repo", repo, "--idle-ttl", "48h")
	require.Equal(t, 125, code)
	require.Contains(t, stderr, `the profile "docs" allows at most 24h0m0s (idle_ttl)`)

	// Each session is held open by this process as soon as it exists:
	// every corral start prunes, and the machine may be slow.
	hold := func(id string) *sandbox.Session {
		s, err := e.OpenSession(context.Background(), id)
		require.NoError(t, err)
		return s
	}
	wrote := cliSession(t, "--repo", repo, "--idle-ttl", "2s")
	hw := hold(wrote)
	_, err := hw.Exec(context.Background(), []string{"cp", "README.md", "openwiki/readme.md"}, nil, nil)
	require.NoError(t, err)
	empty := cliSession(t, "--repo", repo, "--idle-ttl", "2s")
	he := hold(empty)
	fresh := cliSession(t, "--repo", repo)
	held := cliSession(t, "--repo", repo, "--idle-ttl", "2s")
	h := hold(held)
	defer removeSession(t, e, fresh)
	defer removeSession(t, e, held)

	stdout, stderr, code := corralCmd(t, "session", "ls", "--json")
	require.Equal(t, 0, code, stderr)
	var list []sandbox.SessionInfo
	require.NoError(t, json.Unmarshal([]byte(stdout), &list))
	for _, s := range list {
		switch s.ID {
		case wrote, empty, held:
			require.True(t, s.InUse, s.ID)
			require.Equal(t, s.LastUsed.Add(2*time.Second), s.Expires)
		}
	}
	require.NoError(t, hw.Close())
	require.NoError(t, he.Close())

	time.Sleep(2100 * time.Millisecond)
	stdout, stderr, code = corralCmd(t, "session", "prune", "--json")
	require.Equal(t, 0, code, stderr)
	var out struct {
		Pruned []sandbox.Ended `json:"pruned"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &out))
	byID := map[string]sandbox.Ended{}
	for _, p := range out.Pruned {
		byID[p.ID] = p
	}
	require.Contains(t, byID, wrote)
	require.Contains(t, byID, empty)
	require.NotContains(t, byID, fresh, "not expired")
	require.NotContains(t, byID, held, "a process has it open")
	require.Equal(t, filepath.Join(testutil.StateDir(t), "patches", wrote+".patch"), byID[wrote].Patch)
	require.Equal(t, 1, byID[wrote].Changes)
	patch, err := os.ReadFile(byID[wrote].Patch)
	require.NoError(t, err)
	require.Contains(t, string(patch), "+++ b/openwiki/readme.md")
	gitApplyCheck(t, repo, patch)
	require.Empty(t, byID[empty].Patch, "an empty change set makes no patch")
	requireDirGone(t, sessionDirOf(t, wrote))
	requireDirGone(t, sessionDirOf(t, empty))

	// Once let go, the held one expires too; every corral start prunes.
	require.NoError(t, h.Close())
	time.Sleep(2100 * time.Millisecond)
	_, stderr, code = corralCmd(t, "session", "ls")
	require.Equal(t, 0, code, stderr)
	requireDirGone(t, sessionDirOf(t, held))
	_, err = os.Stat(sessionDirOf(t, fresh))
	require.NoError(t, err)
}

// TestGCHalfMadeSessions: gc removes session directories a crash left
// half made (no complete record, nobody holding them), never a live one
// (a process holds it, or its owner pid is alive) nor a persistent one.
func TestGCHalfMadeSessions(t *testing.T) {
	e := testutil.Executor(t)
	repo := lateRepo(t)
	// A persistent session nobody holds (made first: every corral start
	// sweeps, so the half-made ones below are made after it).
	persistent := cliSession(t, "--repo", repo)
	defer removeSession(t, e, persistent)
	sessions := filepath.Join(testutil.StateDir(t), "sessions")
	require.NoError(t, os.MkdirAll(sessions, 0o700))
	mk := func(name string, files ...string) string {
		dir := filepath.Join(sessions, name)
		require.NoError(t, os.MkdirAll(dir, 0o700))
		for _, f := range files {
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o600))
		}
		return dir
	}
	old := time.Now().Add(-time.Hour)

	// A crash between mkdir and the record: the staging name, old.
	staging := mk(".new-aaaaaaaaaaa1", "inuse")
	require.NoError(t, os.Chtimes(staging, old, old))
	// A directory without a record.
	bare := mk("aaaaaaaaaaa2", "inuse", "profile.yaml")
	// Mounts prepared without a record, by a process that died (an older
	// corral's one-call session).
	mounted := filepath.Join(sessions, "aaaaaaaaaaa3")
	hs, err := hidden.Compute(repo, hidden.Options{})
	require.NoError(t, err)
	l, err := mounts.Prepare(mounted, mounts.Plan{Repo: repo, WriteDir: "openwiki", AreaBytes: 1 << 20, AreaInodes: 64,
		UID: sandbox.ContainerUID, GID: sandbox.ContainerGID}, hs)
	require.NoError(t, err)
	require.NotNil(t, l)
	require.NoError(t, os.WriteFile(filepath.Join(mounted, "owner.pid"), []byte("999999999"), 0o600))

	// Live ones: held by a process (this one), or whose owner is alive.
	held := mk(".new-aaaaaaaaaaa4", "inuse")
	require.NoError(t, os.Chtimes(held, old, old))
	f, err := os.Open(filepath.Join(held, "inuse"))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_SH))
	owned := mk("aaaaaaaaaaa5")
	require.NoError(t, os.WriteFile(filepath.Join(owned, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600))
	defer os.RemoveAll(held)
	defer os.RemoveAll(owned)

	rep, err := e.GC(context.Background(), false)
	require.NoError(t, err)
	for _, d := range []string{staging, bare, mounted} {
		require.Contains(t, rep.Sessions, filepath.Base(d))
		requireDirGone(t, d)
	}
	require.NotEmpty(t, rep.Mounts)
	for _, d := range []string{held, owned, sessionDirOf(t, persistent)} {
		_, err := os.Stat(d)
		require.NoError(t, err, "%s is live", d)
	}
}
