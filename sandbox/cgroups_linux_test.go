package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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

// TestCheckReapCgroup: only an absolute, clean path other than the root
// is an reap cgroup; "" is none.
func TestCheckReapCgroup(t *testing.T) {
	for _, ok := range []string{"", DefaultReapCgroup, "/corral/ahead"} {
		require.NoError(t, checkReapCgroup(ok), ok)
	}
	for _, bad := range []string{"/", "corral-ahead", "/a/../b", "/a/", "/a//b", "/a:b", "/a,b", "/a\nb"} {
		err := checkReapCgroup(bad)
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument, bad)
		require.ErrorContains(t, err, "want an absolute, clean cgroup path", bad)
	}
}

// TestEnsureReapCgroup: on the host's cgroupfs the reap cgroup is made
// in the cpu controller's hierarchy with 1/16 of the default CPU share,
// again after it was removed; on a cgroup v2 tree without the cpu
// controller for it (a directory standing for one) it is an error.
func TestEnsureReapCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (cgroupfs)")
	}
	p := "/corral-unit-reap-" + strconv.Itoa(os.Getpid())
	dir, file, want := filepath.Join(cgroupRoot, "cpu", p), "cpu.shares", reapCPUShares
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		dir, file, want = filepath.Join(cgroupRoot, p), "cpu.weight", reapCPUWeight
	}
	t.Cleanup(func() { _ = unix.Rmdir(dir) })
	for range 2 {
		require.NoError(t, ensureReapCgroup(p))
		got, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		require.Equal(t, want, strings.TrimSpace(string(got)))
		require.NoError(t, unix.Rmdir(dir))
	}

	// A cgroup v2 hierarchy without the cpu controller (a hybrid host's:
	// its controllers are v1's): an error.
	root := t.TempDir()
	require.NoError(t, unix.Mount("none", root, "cgroup2", 0, ""))
	t.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) })
	if ctl, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil && !strings.Contains(string(ctl), "cpu") {
		t.Cleanup(func() { _ = unix.Rmdir(filepath.Join(root, p)) })
		old := cgroupRoot
		cgroupRoot = root
		err := ensureReapCgroup(p)
		cgroupRoot = old
		require.ErrorContains(t, err, "the reap cgroup")
		require.ErrorIs(t, err, os.ErrNotExist)
	}
}

// TestReapCgroupRefusesAContainersView: where the cgroup hierarchy is a
// bind of one cgroup (a container's /sys/fs/cgroup on cgroup v1, a
// daemon Pod's included; modelled by binding a cgroup of the host's cpu
// hierarchy, or v2's), or no cgroup mount at all, no reap cgroup is made
// and the shims stay where they are: made there it would be a child of
// the daemon's own cgroup.
func TestReapCgroupRefusesAContainersView(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (cgroupfs)")
	}
	p := "/corral-unit-reapview-" + strconv.Itoa(os.Getpid())
	pod := reapHierarchy() + p + "-pod"
	require.NoError(t, os.MkdirAll(pod, 0o755))
	t.Cleanup(func() { _ = unix.Rmdir(filepath.Join(pod, p)); _ = unix.Rmdir(pod) })
	view := t.TempDir()
	bound := view
	if reapHierarchy() != cgroupRoot {
		bound = filepath.Join(view, "cpu")
		require.NoError(t, os.Mkdir(bound, 0o755))
	}
	require.NoError(t, unix.Mount(pod, bound, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(bound, unix.MNT_DETACH) })
	old := cgroupRoot
	cgroupRoot = view
	t.Cleanup(func() { cgroupRoot = old })
	err := ensureReapCgroup(p)
	require.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	require.ErrorContains(t, err, "not the host's cgroup root")
	require.NoDirExists(t, filepath.Join(pod, p))
	// The host's hierarchy mounted over the view (a hostPath of the
	// node's /sys/fs/cgroup): the one on top counts.
	require.NoError(t, unix.Mount(reapHierarchy0(old), bound, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(bound, unix.MNT_DETACH) })
	t.Cleanup(func() { _ = unix.Rmdir(filepath.Join(reapHierarchy0(old), p)) })
	require.NoError(t, ensureReapCgroup(p))
	require.DirExists(t, filepath.Join(reapHierarchy0(old), p))
	require.NoDirExists(t, filepath.Join(pod, p))
	require.NoError(t, unix.Rmdir(filepath.Join(reapHierarchy0(old), p)))

	// No cgroup mount (a v1 host without the cpu hierarchy): an error,
	// no directory made.
	cgroupRoot = t.TempDir()
	require.Error(t, ensureReapCgroup(p))
	dir, _, _ := reapCgroupDir(p)
	require.NoDirExists(t, dir)
	require.NoError(t, os.Mkdir(filepath.Join(cgroupRoot, "cpu"), 0o755))
	require.ErrorContains(t, ensureReapCgroup(p), "not a cgroup mount")
	require.NoDirExists(t, dir)
}

// reapHierarchy0 is reapHierarchy for the cgroup root root.
func reapHierarchy0(root string) string {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return root
	}
	return filepath.Join(root, "cpu")
}

// TestCgroupIDs: gc's cgroup sweep lists only the cgroups directly under
// its namespace (in any v1 hierarchy, or v2's) whose name is a corral
// container's id, corral-<12 hex>-<decimal>: never another namespace's,
// a nested one, or a name of another form.
func TestCgroupIDs(t *testing.T) {
	for name, want := range map[string]bool{
		"corral-0123456789ab-1":                    true,
		"corral-0123456789ab-18446744073709551615": true,
		"corral-x":                                  false,
		"corral-0123456789ab":                       false,
		"corral-0123456789ab-":                      false,
		"corral-0123456789ab-1a":                    false,
		"corral-0123456789AB-1":                     false,
		"corral-0123456789abc-1":                    false,
		"corral-0123456789ab-1-2":                   false,
		"corral-ahead":                              false,
		"TestGC-corral-0123456789ab-1":              false,
		"corral-0123456789ab-1/..":                  false,
		"corral-0123456789ab-123456789012345678901": false,
	} {
		require.Equal(t, want, isContainerID(name), name)
	}

	root := t.TempDir()
	old := cgroupRoot
	cgroupRoot = root
	t.Cleanup(func() { cgroupRoot = old })
	for _, d := range []string{
		"pids/ns/corral-0123456789ab-1",          // v1
		"memory/ns/corral-0123456789ab-1",        // the same, another hierarchy
		"memory/ns/corral-0123456789ab-2/nested", // with a sub-cgroup
		"ns/corral-0123456789ab-3",               // v2
		"pids/ns/corral-x",
		"pids/ns/other",
		"pids/ns/corral-0123456789ab-2x",
		"pids/other-ns/corral-0123456789ab-4", // another namespace
		"pids/ns/sub/corral-0123456789ab-5",   // not directly under ns
		"pids/corral-0123456789ab-6",          // not under ns
	} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "pids", "ns", "corral-0123456789ab-7"), nil, 0o644)) // a file
	require.Equal(t, map[string]bool{"corral-0123456789ab-1": true, "corral-0123456789ab-2": true, "corral-0123456789ab-3": true}, cgroupIDs("ns"))
	for _, ns := range []string{"", ".", "..", "../pids/ns", "pids/ns"} {
		require.Empty(t, cgroupIDs(ns), "namespace %q", ns)
	}
}
