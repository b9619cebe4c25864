package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRemoveCgroups: the cgroups of a container its runtime left (one
// holding a process, with a sub-cgroup, in every v1 hierarchy the test
// makes it in or in v2's) are removed, the process in them killed; a
// process outside them lives on; a container with no cgroup left is no
// error.
func TestRemoveCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (cgroupfs)")
	}
	ns, id := "corral-unit-"+strconv.Itoa(os.Getpid()), "c1"
	var dirs []string
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		dirs = []string{filepath.Join(cgroupRoot, ns, id)}
	} else {
		dirs = []string{filepath.Join(cgroupRoot, "pids", ns, id), filepath.Join(cgroupRoot, "memory", ns, id)}
	}
	t.Cleanup(func() {
		for _, d := range dirs {
			_ = os.Remove(filepath.Join(d, "sub"))
			_ = os.Remove(d)
			_ = os.Remove(filepath.Dir(d))
		}
	})
	for _, d := range dirs {
		require.NoError(t, os.MkdirAll(filepath.Join(d, "sub"), 0o755))
	}
	inside := exec.Command("sleep", "60")
	require.NoError(t, inside.Start())
	outside := exec.Command("sleep", "60")
	require.NoError(t, outside.Start())
	t.Cleanup(func() { _ = outside.Process.Kill(); _ = outside.Wait() })
	for _, d := range dirs {
		require.NoError(t, os.WriteFile(filepath.Join(d, "sub", "cgroup.procs"), []byte(strconv.Itoa(inside.Process.Pid)), 0o644))
	}
	done := make(chan error, 1)
	go func() { done <- inside.Wait() }()

	require.NoError(t, removeCgroups(ns, id, cgroupSettle))
	for _, d := range dirs {
		require.NoDirExists(t, d)
	}
	select {
	case err := <-done:
		require.ErrorContains(t, err, "killed")
	case <-time.After(5 * time.Second):
		t.Fatal("the process in the container's cgroup lives on")
	}
	require.NoError(t, outside.Process.Signal(syscall.Signal(0)), "the process outside lives")
	require.NoError(t, removeCgroups(ns, id, time.Second), "nothing left is no error")
}
