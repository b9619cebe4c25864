package hidden

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
)

func TestRescanRefusesUncoveredHiddenPaths(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".openwikiignore"), []byte("*.key\nsecrets/\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "src", "deep"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "secrets"), 0o755))
	h, err := Compute(repo, Options{})
	require.NoError(t, err)

	// Visible files, and files inside an already hidden directory, are fine.
	require.NoError(t, os.WriteFile(filepath.Join(repo, "src", "a.go"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "secrets", "new.pem"), nil, 0o644))
	require.NoError(t, Rescan(repo, h))

	require.NoError(t, os.MkdirAll(filepath.Join(repo, "src", "deep", "new"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "src", "deep", "new", "x.key"), nil, 0o644))
	err = Rescan(repo, h)
	require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
	require.Contains(t, err.Error(), "src/deep/new/x.key appeared after it started")
}
