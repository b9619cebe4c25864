package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fakeShim starts a bash, its command line argv0 and args, with one
// child (sleep); it returns the bash and the child's pid.
func fakeShim(t *testing.T, argv0 string, args ...string) (*exec.Cmd, int) {
	t.Helper()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	script := fmt.Sprintf("sleep 60 & echo $! > %s; wait", pidFile)
	cmd := exec.Command("bash", "-c", "exec -a "+argv0+" bash -c '"+script+"' "+strings.Join(args, " "))
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var child int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	return cmd, child
}

// TestShimOfRefusesWhatIsNotTheShim: shimOf takes the parent of a
// container's init for its shim only when that parent is a containerd
// shim whose -id is exactly the container's: not a shim of another
// container whose id merely starts with it (corral-S-1 vs corral-S-12),
// nor one whose id starts with another's, nor a process that names the
// id without being a shim, nor pid 1 (an init whose shim died and was
// reparented), nor a pid that is gone.
func TestShimOfRefusesWhatIsNotTheShim(t *testing.T) {
	id := "corral-0123456789ab-1"
	for _, tc := range []struct {
		name  string
		argv0 string
		args  []string
		ok    bool
	}{
		{"the shim", "containerd-shim-runc-v2", []string{"-namespace", "corral", "-id", id, "-address", "/x"}, true},
		{"the shim, path", "/usr/bin/containerd-shim-runc-v2", []string{"-namespace", "corral", "-id", id}, true},
		{"longer id", "containerd-shim-runc-v2", []string{"-namespace", "corral", "-id", id + "2", "-address", "/x"}, false},
		{"shorter id", "containerd-shim-runc-v2", []string{"-namespace", "corral", "-id", id[:len(id)-1], "-address", "/x"}, false},
		{"id as another flag's value", "containerd-shim-runc-v2", []string{"-namespace", id, "-address", "/x"}, false},
		{"not a shim", "sleeper", []string{"-id", id}, false},
		{"shim in a later arg", "sleeper", []string{"containerd-shim-runc-v2", "-id", id}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, child := fakeShim(t, tc.argv0, tc.args...)
			fd, pid := shimOf(child, id)
			if fd >= 0 {
				unix.Close(fd)
			}
			if tc.ok {
				require.Equal(t, parent.Process.Pid, pid)
				require.GreaterOrEqual(t, fd, 0)
			} else {
				require.Equal(t, -1, fd)
				require.Zero(t, pid)
			}
		})
	}
	t.Run("gone", func(t *testing.T) {
		c := exec.Command("true")
		require.NoError(t, c.Run())
		fd, pid := shimOf(c.Process.Pid, id)
		require.Equal(t, -1, fd)
		require.Zero(t, pid)
	})
}

// TestMoveToReapCgroupSkipsADeadShim: a shim that died after create (its
// pid free for reuse: pid_max can be 32768) is never written to the reap
// cgroup; a live one is.
func TestMoveToReapCgroupSkipsADeadShim(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (cgroupfs)")
	}
	p := "/corral-unit-reapdead-" + strconv.Itoa(os.Getpid())
	dir, _, _ := cgroups{}.reapDir(p)
	t.Cleanup(func() { _ = unix.Rmdir(dir) })
	e := &Executor{cfg: Config{ReapCgroup: p, Log: os.Stderr}}

	dead := exec.Command("sleep", "60")
	require.NoError(t, dead.Start())
	fd, err := unix.PidfdOpen(dead.Process.Pid, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, dead.Process.Kill())
	_ = dead.Wait()
	e.moveToReapCgroup(fd, dead.Process.Pid)
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	require.NoError(t, err)
	require.Empty(t, strings.TrimSpace(string(procs)))

	live := exec.Command("sleep", "60")
	require.NoError(t, live.Start())
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
	lfd, err := unix.PidfdOpen(live.Process.Pid, 0)
	require.NoError(t, err)
	defer unix.Close(lfd)
	e.moveToReapCgroup(lfd, live.Process.Pid)
	procs, err = os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(live.Process.Pid), strings.TrimSpace(string(procs)))
	require.NoError(t, live.Process.Kill())
	_ = live.Wait()
}

// TestKillCgroupProcsStaysInItsContainer: killing the processes of
// container c1's cgroups spares a process of container c12 (an id that
// c1 is a prefix of) and one in a cgroup named c1 of another namespace.
func TestKillCgroupProcsStaysInItsContainer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (cgroupfs)")
	}
	ns := "corral-unit-kill-" + strconv.Itoa(os.Getpid())
	hier := filepath.Join(hostCgroupRoot, "pids")
	if _, err := os.Stat(filepath.Join(hostCgroupRoot, "cgroup.controllers")); err == nil {
		hier = hostCgroupRoot
	}
	mk := func(rel string) (string, *exec.Cmd) {
		d := filepath.Join(hier, rel)
		require.NoError(t, os.MkdirAll(d, 0o755))
		c := exec.Command("sleep", "60")
		require.NoError(t, c.Start())
		require.NoError(t, os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(c.Process.Pid)), 0o644))
		t.Cleanup(func() {
			_ = c.Process.Kill()
			_ = c.Wait()
			for p := d; p != hier; p = filepath.Dir(p) {
				_ = unix.Rmdir(p)
			}
		})
		return d, c
	}
	_, mine := mk(filepath.Join(ns, "c1", "nested"))
	_, longer := mk(filepath.Join(ns, "c12"))
	_, other := mk(filepath.Join(ns+"x", "c1"))
	leaf := "/" + ns + "/c1"
	require.True(t, inCgroup(mine.Process.Pid, leaf), "a process nested below c1 is c1's")
	require.False(t, inCgroup(longer.Process.Pid, leaf), "c12's process is c1's")
	require.False(t, inCgroup(other.Process.Pid, leaf), "another namespace's c1 process is c1's")
	done := make(chan error, 1)
	go func() { done <- mine.Wait() }()
	found, killed := false, 0
	for _, d := range (cgroups{}).dirs(ns, "c1") {
		f, k := killCgroupProcs(d, leaf)
		found, killed = found || f, killed+k
	}
	require.True(t, found, "c1's cgroup")
	require.Equal(t, 1, killed, "the processes alive when listed")
	select {
	case err := <-done:
		require.ErrorContains(t, err, "killed")
	case <-time.After(5 * time.Second):
		t.Fatal("the process of c1 lives on")
	}
	// Once its process is gone (reaped or a zombie) c1 is found empty; a
	// cgroup that does not exist is not found.
	found, killed = false, 0
	for _, d := range (cgroups{}).dirs(ns, "c1") {
		f, k := killCgroupProcs(d, leaf)
		found, killed = found || f, killed+k
	}
	require.True(t, found)
	require.Zero(t, killed)
	for _, d := range (cgroups{}).dirs(ns, "c2") {
		f, k := killCgroupProcs(d, "/"+ns+"/c2")
		require.False(t, f, d)
		require.Zero(t, k)
	}
	require.NoError(t, longer.Process.Signal(syscall.Signal(0)), "c12's process was killed")
	require.NoError(t, other.Process.Signal(syscall.Signal(0)), "another namespace's c1 process was killed")
}

// TestReapCgroupReadOnly: on a read-only cgroupfs the reap cgroup is
// not made; moveToReapCgroup leaves the shim where it is and says so
// once on the log.
func TestReapCgroupReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (cgroupfs)")
	}
	h := cgroups{}.reapHierarchy()
	view := t.TempDir()
	bound := view
	if h != hostCgroupRoot {
		bound = filepath.Join(view, "cpu")
		require.NoError(t, os.Mkdir(bound, 0o755))
	}
	require.NoError(t, unix.Mount(h, bound, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(bound, unix.MNT_DETACH) })
	require.NoError(t, unix.Mount("", bound, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""))
	ro := cgroups{root: view}

	p := "/corral-unit-reapro-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { _ = unix.Rmdir(filepath.Join(h, p)) })
	require.ErrorIs(t, ro.ensureReap(p), unix.EROFS)
	require.NoDirExists(t, filepath.Join(h, p))

	var log strings.Builder
	e := &Executor{cfg: Config{ReapCgroup: p, Log: &log}, cgroups: ro}
	proc := exec.Command("sleep", "60")
	require.NoError(t, proc.Start())
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })
	fd, err := unix.PidfdOpen(proc.Process.Pid, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	before, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", proc.Process.Pid))
	require.NoError(t, err)
	e.moveToReapCgroup(fd, proc.Process.Pid)
	e.moveToReapCgroup(fd, proc.Process.Pid)
	after, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", proc.Process.Pid))
	require.NoError(t, err)
	require.Equal(t, string(before), string(after))
	require.Equal(t, 1, strings.Count(log.String(), "shims stay in containerd's cgroup"), log.String())
}
