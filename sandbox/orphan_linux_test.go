package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
)

func TestOwnedBy(t *testing.T) {
	spec := func(sources ...string) *specs.Spec {
		s := &specs.Spec{}
		for _, src := range sources {
			s.Mounts = append(s.Mounts, specs.Mount{Source: src})
		}
		return s
	}
	state := "/var/lib/corral"
	require.True(t, ownedBy(spec("proc", "/var/lib/corral/sessions/a/ctl"), state))
	require.True(t, ownedBy(spec("/var/lib/corral/init/sha"), state+"/"))
	require.False(t, ownedBy(spec("/var/lib/corral2/sessions/a/ctl"), state), "a sibling with the same prefix")
	require.False(t, ownedBy(spec("/var/lib", "/var/lib/corral/../other/x"), state))
	require.False(t, ownedBy(spec("sessions/a", "proc"), state), "relative sources")
	require.False(t, ownedBy(spec("/var/lib/corral/x"), ""), "no state directory")
	require.False(t, ownedBy(spec(), state))
}

func TestBundleGone(t *testing.T) {
	dir := t.TempDir()
	require.False(t, bundleGone(dir))
	require.True(t, bundleGone(dir+" (deleted)"), "/proc/PID/cwd of a removed directory")
	require.True(t, bundleGone(filepath.Join(dir, "missing")))
	require.True(t, bundleGone(""))
}

func TestRuntimeState(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ns")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "corral-a-1"), 0o700))
	for _, f := range []string{"corral-b-2_sandbox:corral-b-2.state", "corral-b-2_sandbox:corral-b-2.lock", "corral-b-2_sandbox:corral-b-22.state"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o600))
	}
	require.Equal(t, []string{filepath.Join(dir, "corral-a-1")}, runtimeState(root, "ns", "corral-a-1"))
	require.ElementsMatch(t, []string{filepath.Join(dir, "corral-b-2_sandbox:corral-b-2.state"), filepath.Join(dir, "corral-b-2_sandbox:corral-b-2.lock")}, runtimeState(root, "ns", "corral-b-2"))
	require.Empty(t, runtimeState(root, "ns", "corral-c-3"))
	require.Empty(t, runtimeState("", "ns", "corral-a-1"))
}

func TestRuntimeStateIDs(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"corral-0000000000a1-1", "not-corral", "corral-0000000000a2-1_sandbox:corral-0000000000a2-1.state"} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, d), 0o700))
	}
	for _, f := range []string{
		"corral-0000000000a3-1_sandbox:corral-0000000000a3-1.state", "corral-0000000000a3-1_sandbox:corral-0000000000a3-1.lock",
		"corral-0000000000a4-1_sandbox:corral-0000000000a4-1.lock", // a lock alone: a delete cut short
		"corral-0000000000a5-1", // a file, not runc's directory
		"x_sandbox:..etc.state",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o600))
	}
	require.Equal(t, map[string]bool{"corral-0000000000a1-1": true, "corral-0000000000a3-1": true, "corral-0000000000a4-1": true}, runtimeStateIDs(dir))
	require.Empty(t, runtimeStateIDs(filepath.Join(dir, "missing")))
}

func TestProcessesNaming(t *testing.T) {
	id := "corral-0000000000e1-1"
	cmd := exec.Command("sh", "-c", "sleep 60", id)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	other := "corral-0000000000e2-1"
	require.Equal(t, map[string]bool{id: true}, processesNaming(map[string]bool{id: true, other: true}))
}
