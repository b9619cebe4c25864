package main

import (
	"path/filepath"
	"testing"

	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// --volume names a Pod volume, which only the daemon in Pod mode
// resolves: without a daemon, or with --repo, it is a usage error.
func TestVolumeFlag(t *testing.T) {
	repo := t.TempDir()
	state := filepath.Join(t.TempDir(), "state")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"session create without a daemon", []string{"--no-daemon", "--state-dir", state, "session", "create", "--volume", "work/repo"},
			"corral: --volume names a Pod volume, which only corral's daemon in Pod mode resolves: pass --daemon SOCKET (or set CORRAL_DAEMON_SOCKET)\n"},
		{"run without a daemon", []string{"--no-daemon", "--state-dir", state, "run", "--volume", "work", "--", "ls"},
			"corral: --volume names a Pod volume, which only corral's daemon in Pod mode resolves: pass --daemon SOCKET (or set CORRAL_DAEMON_SOCKET)\n"},
		{"with --repo", []string{"--no-daemon", "--state-dir", state, "session", "create", "--volume", "work", "--repo", repo},
			"corral: --repo and --volume exclude each other\n"},
		{"neither", []string{"--no-daemon", "--state-dir", state, "run", "--", "ls"},
			"corral: --repo is required (or --volume NAME[/SUBPATH] in a Pod)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tc.args...)
			require.Equal(t, exitFailed, code)
			require.Equal(t, tc.want, stderr)
		})
	}
	v, err := parseVolume("work/a/b/")
	require.NoError(t, err)
	require.Equal(t, &api.Volume{Name: "work", SubPath: "a/b"}, v)
	_, err = parseVolume("/etc")
	require.Error(t, err)
}
