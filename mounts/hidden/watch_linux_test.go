package hidden

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
)

func TestWatcherRefusesUncoveredHiddenPaths(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".openwikiignore"), []byte("*.key\nsecrets/\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "src", "deep"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "secrets"), 0o755))
	h, err := Compute(repo, Options{})
	require.NoError(t, err)
	w, err := NewWatcher(repo, h)
	require.NoError(t, err)
	defer w.Close()

	// Visible files, and files inside an already hidden directory, are fine.
	require.NoError(t, os.WriteFile(filepath.Join(repo, "src", "a.go"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "secrets", "new.pem"), nil, 0o644))
	require.NoError(t, w.Check())
	require.NoError(t, Rescan(repo, h))

	// A new directory is watched too; a hidden name inside it is refused.
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "src", "deep", "new"), 0o755))
	require.NoError(t, w.Check())
	require.NoError(t, os.WriteFile(filepath.Join(repo, "src", "deep", "new", "x.key"), nil, 0o644))
	err = w.Check()
	require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
	require.Contains(t, err.Error(), "src/deep/new/x.key appeared after it started")
	require.ErrorIs(t, w.Check(), err, "stays refused")
	require.Error(t, Rescan(repo, h))
}
