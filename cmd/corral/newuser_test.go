package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGCJSONListsAreArrays: `gc --json` prints an empty list as [], never
// null, also when containerd does not answer (the report is then empty).
func TestGCJSONListsAreArrays(t *testing.T) {
	stdout, _, code := runCLI(t, "--address", "/nonexistent/containerd.sock", "--state-dir", t.TempDir(), "gc", "--json")
	require.Equal(t, exitFailed, code)
	v := jsonOut(t, stdout)
	for _, k := range []string{"containers", "leases", "fifo_dirs", "mounts", "sessions", "pruned", "applies"} {
		require.Equal(t, []any{}, v[k], "%s in %s", k, stdout)
	}
}

// TestNoCommandNamesTheAlternatives: check without a command names both
// of its forms; run names its one.
func TestNoCommandNamesTheAlternatives(t *testing.T) {
	repo := t.TempDir()
	_, stderr, code := runCLI(t, "check", "--repo", repo)
	require.Equal(t, exitFailed, code)
	require.Equal(t, "corral: no command given: corral check [flags] -- CMD ARG..., or --explain PATH\n", stderr)
	_, stderr, code = runCLI(t, "run", "--repo", repo)
	require.Equal(t, exitFailed, code)
	require.Equal(t, "corral: no command given: corral run [flags] -- CMD ARG...\n", stderr)
}
