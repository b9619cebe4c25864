package sandbox

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/mounts/hidden"
	"github.com/stretchr/testify/require"
)

// TestWatcherIsExact: a Check right after a creation sees it (the
// barrier), with no sleep in between; the background rescan fails the
// session too, without a call.
func TestWatcherIsExact(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".openwikiignore"), []byte("*.key\nsecrets/\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "src", "deep"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "secrets"), 0o755))
	hs, err := hidden.Compute(repo, hidden.Options{})
	require.NoError(t, err)
	var failed atomic.Value
	w, err := newWatcher(repo, hs, t.TempDir(), func(err error) { failed.Store(err) })
	require.NoError(t, err)
	defer w.close()

	// Visible files, and files inside an already hidden directory, are fine.
	require.NoError(t, os.WriteFile(filepath.Join(repo, "src", "a.go"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "secrets", "new.pem"), nil, 0o644))
	require.NoError(t, w.Check())

	// A new directory is watched before Check returns: a hidden name made
	// in it right after is seen by the next Check.
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "src", "deep", "new"), 0o755))
	require.NoError(t, w.Check())
	require.NoError(t, os.WriteFile(filepath.Join(repo, "src", "deep", "new", "x.key"), nil, 0o644))
	err = w.Check()
	require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
	require.Contains(t, err.Error(), "src/deep/new/x.key appeared after it started")
	require.ErrorIs(t, w.Check(), err, "stays refused")
}

func TestWatcherFailsWithoutACall(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".openwikiignore"), []byte(".env\n"), 0o644))
	hs, err := hidden.Compute(repo, hidden.Options{})
	require.NoError(t, err)
	failed := make(chan error, 1)
	w, err := newWatcher(repo, hs, t.TempDir(), func(err error) { failed <- err })
	require.NoError(t, err)
	defer w.close()
	require.NoError(t, w.Check())
	require.NoError(t, os.Mkdir(filepath.Join(repo, "vendor"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(repo, "vendor", ".git"), 0o755))
	select {
	case err := <-failed:
		require.Contains(t, err.Error(), "vendor/.git appeared after it started")
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not fail the session")
	}
}

// BenchmarkWatcherCheck is the watch's share of every call of a
// long-lived owner: the barrier, with nothing created since.
func BenchmarkWatcherCheck(b *testing.B) {
	repo := b.TempDir()
	require.NoError(b, os.MkdirAll(filepath.Join(repo, "src", "deep"), 0o755))
	hs, err := hidden.Compute(repo, hidden.Options{})
	require.NoError(b, err)
	w, err := newWatcher(repo, hs, b.TempDir(), nil)
	require.NoError(b, err)
	defer w.close()
	require.NoError(b, w.Check())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		require.NoError(b, w.Check())
	}
}

// TestWatcherLinksCreatedLater: a hard link to a hidden file, and a
// symlink leaving the repository, made after the session started, fail
// the next call's check.
func TestWatcherLinksCreatedLater(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(repo string) error
		want string
	}{
		{"hard link", func(repo string) error {
			return os.Link(filepath.Join(repo, "secrets", "key.pem"), filepath.Join(repo, "src", "notes.txt"))
		}, "src/notes.txt appeared after it started (hard link of hidden secrets/key.pem)"},
		{"escaping symlink", func(repo string) error {
			return os.Symlink("../..", filepath.Join(repo, "src", "up"))
		}, "src/up appeared after it started (symlink leaves the repository)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			repo := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(repo, ".openwikiignore"), []byte("secrets/\n"), 0o644))
			require.NoError(t, os.MkdirAll(filepath.Join(repo, "src"), 0o755))
			require.NoError(t, os.MkdirAll(filepath.Join(repo, "secrets"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(repo, "secrets", "key.pem"), []byte("KEY"), 0o644))
			hs, err := hidden.Compute(repo, hidden.Options{})
			require.NoError(t, err)
			w, err := newWatcher(repo, hs, t.TempDir(), nil)
			require.NoError(t, err)
			defer w.close()
			require.NoError(t, w.Check())
			require.NoError(t, c.make(repo))
			err = w.Check()
			require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
			require.Contains(t, err.Error(), c.want)
		})
	}
}
