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
	var cg cgroups
	var dirs []string
	if _, err := os.Stat(filepath.Join(hostCgroupRoot, "cgroup.controllers")); err == nil {
		dirs = []string{filepath.Join(hostCgroupRoot, ns, id)}
	} else {
		dirs = []string{filepath.Join(hostCgroupRoot, "pids", ns, id), filepath.Join(hostCgroupRoot, "memory", ns, id)}
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

	require.NoError(t, cg.remove(ns, id, cgroupSettle))
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
	require.NoError(t, cg.remove(ns, id, time.Second), "nothing left is no error")
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
	var cg cgroups
	dir, file, want := filepath.Join(hostCgroupRoot, "cpu", p), "cpu.shares", reapCPUShares
	if _, err := os.Stat(filepath.Join(hostCgroupRoot, "cgroup.controllers")); err == nil {
		dir, file, want = filepath.Join(hostCgroupRoot, p), "cpu.weight", reapCPUWeight
	}
	t.Cleanup(func() { _ = unix.Rmdir(dir) })
	for range 2 {
		require.NoError(t, cg.ensureReap(p))
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
		err := cgroups{root: root}.ensureReap(p)
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
	var host cgroups
	pod := host.reapHierarchy() + p + "-pod"
	require.NoError(t, os.MkdirAll(pod, 0o755))
	t.Cleanup(func() { _ = unix.Rmdir(filepath.Join(pod, p)); _ = unix.Rmdir(pod) })
	view := t.TempDir()
	bound := view
	if host.reapHierarchy() != hostCgroupRoot {
		bound = filepath.Join(view, "cpu")
		require.NoError(t, os.Mkdir(bound, 0o755))
	}
	require.NoError(t, unix.Mount(pod, bound, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(bound, unix.MNT_DETACH) })
	err := cgroups{root: view}.ensureReap(p)
	require.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	require.ErrorContains(t, err, "not the host's cgroup root")
	require.NoDirExists(t, filepath.Join(pod, p))
	// The host's hierarchy mounted over the view (a hostPath of the
	// node's /sys/fs/cgroup): the one on top counts.
	require.NoError(t, unix.Mount(host.reapHierarchy(), bound, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(bound, unix.MNT_DETACH) })
	t.Cleanup(func() { _ = unix.Rmdir(filepath.Join(host.reapHierarchy(), p)) })
	require.NoError(t, cgroups{root: view}.ensureReap(p))
	require.DirExists(t, filepath.Join(host.reapHierarchy(), p))
	require.NoDirExists(t, filepath.Join(pod, p))
	require.NoError(t, unix.Rmdir(filepath.Join(host.reapHierarchy(), p)))

	// No cgroup mount (a v1 host without the cpu hierarchy): an error,
	// no directory made.
	none := cgroups{root: t.TempDir()}
	require.Error(t, none.ensureReap(p))
	dir, _, _ := none.reapDir(p)
	require.NoDirExists(t, dir)
	require.NoError(t, os.Mkdir(filepath.Join(none.root, "cpu"), 0o755))
	require.ErrorContains(t, none.ensureReap(p), "not a cgroup mount")
	require.NoDirExists(t, dir)
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
	cg := cgroups{root: root}
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
	require.Equal(t, map[string]bool{"corral-0123456789ab-1": true, "corral-0123456789ab-2": true, "corral-0123456789ab-3": true}, cg.ids("ns"))
	for _, ns := range []string{"", ".", "..", "../pids/ns", "pids/ns"} {
		require.Empty(t, cg.ids(ns), "namespace %q", ns)
	}
}

// fakeProc makes a procfs stand-in for podCgroups: self/ns/mnt and, for
// pid 1, ns/mnt (the same file when shared) and root, a link to
// initRoot ("" for none).
func fakeProc(t *testing.T, shared bool, initRoot string) string {
	t.Helper()
	proc := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "self", "ns"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "1", "ns"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "self", "ns", "mnt"), nil, 0o644))
	if shared {
		require.NoError(t, os.Symlink(filepath.Join(proc, "self", "ns", "mnt"), filepath.Join(proc, "1", "ns", "mnt")))
	} else {
		require.NoError(t, os.WriteFile(filepath.Join(proc, "1", "ns", "mnt"), nil, 0o644))
	}
	if initRoot != "" {
		require.NoError(t, os.Symlink(initRoot, filepath.Join(proc, "1", "root")))
	}
	return proc
}

// emptyCgroupRoot returns a root directory whose sys/fs/cgroup is empty.
func emptyCgroupRoot(t *testing.T) string {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sys", "fs", "cgroup"), 0o755))
	return root
}

// TestResolveCgroups: outside a Pod the node's cgroups are the host's
// /sys/fs/cgroup; in a Pod they are the node's init's
// (/proc/1/root/sys/fs/cgroup), and only when pid 1 is in another mount
// namespace (hostPID), its root can be reached (a privileged Pod) and
// every hierarchy there is a cgroup root; otherwise an error, never the
// Pod's own view.
func TestResolveCgroups(t *testing.T) {
	c, err := resolveCgroups(false)
	require.NoError(t, err)
	require.Equal(t, hostCgroupRoot, c.dir())
	require.Equal(t, hostCgroupRoot, cgroups{}.dir(), "the zero value is the host's")

	// The node's init, whose root is the host's "/": its hierarchies.
	proc := fakeProc(t, false, "/")
	c, err = podCgroups(proc)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(proc, "1", "root", "sys", "fs", "cgroup"), c.dir())

	for _, tc := range []struct {
		name string
		proc string
		want string
	}{
		{"pid 1 shares the mount namespace (no hostPID)", fakeProc(t, true, "/"), "not the node's init (run the Pod with hostPID)"},
		{"pid 1's root unreachable (not privileged)", fakeProc(t, false, ""), "no such file"},
		{"no cgroup hierarchy under pid 1's root", fakeProc(t, false, emptyCgroupRoot(t)), "no cgroup hierarchy"},
	} {
		_, err := podCgroups(tc.proc)
		require.Error(t, err, tc.name)
		require.ErrorContains(t, err, "the node's cgroups", tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
	_, err = podCgroups(filepath.Join(t.TempDir(), "none"))
	require.ErrorContains(t, err, "the node's cgroups", "no procfs")

	// The real procfs of a process outside any Pod: pid 1 shares its
	// mount namespace, or (a host where root lacks ptrace access to it)
	// cannot be looked at; refused either way. New then reads this
	// process's own /sys/fs/cgroup, which here (the node itself) is the
	// hierarchies' root: no warning.
	_, err = resolveCgroups(true)
	require.ErrorContains(t, err, "the node's cgroups")
	var log strings.Builder
	e, err := New(t.Context(), Config{InPod: true, StateDir: t.TempDir(), Log: &log})
	require.NoError(t, err)
	defer e.Close()
	require.Equal(t, hostCgroupRoot, e.cgroups.root)
	require.NotContains(t, log.String(), "the node's cgroups")
}

// TestResolveCgroupsRefusesAContainersView: pid 1's root whose
// /sys/fs/cgroup holds a bind of one cgroup (what runc mounts in a
// container on cgroup v1; a v2 cgroup namespace's root is alike) is
// refused: its hierarchies are not the node's.
func TestResolveCgroupsRefusesAContainersView(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (cgroupfs, mounts)")
	}
	var host cgroups
	h := host.reapHierarchy()
	sub := filepath.Join(h, "corral-unit-view-"+strconv.Itoa(os.Getpid()))
	require.NoError(t, os.MkdirAll(sub, 0o755))
	t.Cleanup(func() { _ = unix.Rmdir(sub) })
	root := t.TempDir()
	view := filepath.Join(root, "sys", "fs", "cgroup")
	bound := view
	if h != hostCgroupRoot {
		bound = filepath.Join(view, "cpu")
	}
	require.NoError(t, os.MkdirAll(bound, 0o755))
	require.NoError(t, unix.Mount(sub, bound, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(bound, unix.MNT_DETACH) })
	_, err := podCgroups(fakeProc(t, false, root))
	require.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	require.ErrorContains(t, err, "not the host's cgroup root")
}

// TestCgroupsReadThroughTheirRoot: the counters that name a limit hit,
// the cgroups of a container and gc's sweep all read the root the
// executor resolved (in a Pod, the node's through /proc/1/root), not
// /sys/fs/cgroup.
func TestCgroupsReadThroughTheirRoot(t *testing.T) {
	v1 := cgroups{root: t.TempDir()}
	id := "corral-0123456789ab-1"
	for _, f := range []struct{ rel, text string }{
		{"memory/ns/" + id + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"},
		{"pids/ns/" + id + "/pids.events", "max 5\n"},
	} {
		p := filepath.Join(v1.root, f.rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(f.text), 0o644))
	}
	require.EqualValues(t, 2, v1.counter("ns", id, "memory", "memory.oom_control", "memory.events", "oom_kill"))
	require.EqualValues(t, 5, v1.counter("ns", id, "pids", "pids.events", "pids.events", "max"))
	require.Zero(t, v1.counter("ns", "corral-0123456789ab-2", "memory", "memory.oom_control", "memory.events", "oom_kill"))
	require.ElementsMatch(t, []string{
		filepath.Join(v1.root, "memory", "ns", id), filepath.Join(v1.root, "pids", "ns", id), filepath.Join(v1.root, "ns", id),
	}, v1.dirs("ns", id))
	require.Equal(t, map[string]bool{id: true}, v1.ids("ns"))

	v2 := cgroups{root: t.TempDir()}
	require.NoError(t, os.WriteFile(filepath.Join(v2.root, "cgroup.controllers"), []byte("memory pids\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(v2.root, "ns", id), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(v2.root, "ns", id, "memory.events"), []byte("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n"), 0o644))
	require.EqualValues(t, 1, v2.counter("ns", id, "memory", "memory.oom_control", "memory.events", "oom_kill"))
}
