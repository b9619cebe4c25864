package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFindShimsSkipsUnprivilegedProcesses (red team): any local user can
// name a process containerd-shim-* with -namespace NS -id corral-*; a
// shim runs as root. findShims is what settleCreate waits on, what
// sweepCgroups spares and what sweepOrphanShims runs the "delete" action
// of (the process's own executable and flags, as root).
func TestFindShimsSkipsUnprivilegedProcesses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a process as another user")
	}
	ns := "redgc-" + strconv.Itoa(os.Getpid())
	startNamedShim(t, ns, "corral-0000000000aa-1", "/", &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}})
	startNamedShim(t, ns, "corral-0000000000bb-1", "/", &syscall.SysProcAttr{})
	var got map[string][]shimProc
	require.Eventually(t, func() bool {
		got = findShims(ns)
		return len(got["corral-0000000000bb-1"]) == 1
	}, 5*time.Second, 20*time.Millisecond, "the root process is a shim candidate")
	require.NotContains(t, got, "corral-0000000000aa-1", "an unprivileged process passes for a shim")
}

// TestShimPathsOnlyInTheNodesMountNamespace (red team): a root process
// of another mount namespace (a container's root, no user namespace)
// shows exe and cwd links naming paths of its own filesystem, which gc
// would read, run and remove as host paths. findShims trusts neither for
// such a process: no binary, no bundle.
func TestShimPathsOnlyInTheNodesMountNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a mount namespace")
	}
	ns := "redgc-" + strconv.Itoa(os.Getpid())
	dir := t.TempDir()
	startNamedShim(t, ns, "corral-0000000000cc-1", dir, &syscall.SysProcAttr{})
	startNamedShim(t, ns, "corral-0000000000dd-1", dir, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS})
	var got map[string][]shimProc
	require.Eventually(t, func() bool {
		got = findShims(ns)
		return len(got["corral-0000000000cc-1"]) == 1 && len(got["corral-0000000000dd-1"]) == 1
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, dir, got["corral-0000000000cc-1"][0].bundle, "this mount namespace's process: its working directory")
	require.Empty(t, got["corral-0000000000cc-1"][0].exe, "/bin/sh is no shim binary")
	require.Empty(t, got["corral-0000000000dd-1"][0].bundle, "another mount namespace's working directory")
	require.Empty(t, got["corral-0000000000dd-1"][0].exe)
	require.True(t, inNodeMountNS("/proc/self"))
	require.False(t, inNodeMountNS(fmt.Sprintf("/proc/%d", got["corral-0000000000dd-1"][0].pid)))
}

// startNamedShim starts /bin/sh under a shim's name and flags (argv0
// containerd-shim-redgc, -namespace ns -id id) in dir, with attr (its
// credentials, its namespaces), killed with its children at the test's
// end; it returns the process's pid and a channel closed once it exited.
func startNamedShim(t *testing.T, ns, id, dir string, attr *syscall.SysProcAttr) (int, <-chan struct{}) {
	t.Helper()
	attr.Setpgid = true
	cmd := &exec.Cmd{Path: "/bin/sh", Args: []string{"containerd-shim-redgc", "-c", "sleep 60 & wait", "-namespace", ns, "-id", id},
		Dir: dir, SysProcAttr: attr}
	require.NoError(t, cmd.Start())
	return cmd.Process.Pid, waitInBackground(t, cmd)
}

// waitInBackground waits for cmd (started, in a process group of its
// own) in the background: the channel is closed when it exited. The
// test's end kills its process group and waits.
func waitInBackground(t *testing.T, cmd *exec.Cmd) <-chan struct{} {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-done })
	return done
}

// TestOrphanKillSparesAReusedPid: removeOrphan killed the pid findShims
// had found seconds earlier (syscall.Kill by number); a shim that exited
// meanwhile (its own delete action ends it) leaves its pid to whatever
// process the kernel starts next, and gc, as root, killed that process.
// The kill now goes through a pidfd of a process checked again to be the
// shim found. Here the pid names another process (a sleep): it lives; a
// process that is still the shim found is killed.
func TestOrphanKillSparesAReusedPid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, as gc")
	}
	ns := "redgc-" + strconv.Itoa(os.Getpid())
	e := &Executor{cfg: Config{Namespace: ns, StateDir: t.TempDir()}, oci: &ociRuntime{}}

	other := exec.Command("sleep", "60")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, other.Start())
	otherDone := waitInBackground(t, other)
	reused := shimProc{pid: other.Process.Pid, id: "corral-0000000000ee-1"}
	require.NoError(t, e.removeOrphan(t.Context(), reused.id, []shimProc{reused}, nil))
	select {
	case <-otherDone:
		t.Fatal("gc killed the process that now holds the shim's pid")
	case <-time.After(200 * time.Millisecond):
	}

	pid, shimDone := startNamedShim(t, ns, "corral-0000000000ff-1", "/", &syscall.SysProcAttr{})
	var found []shimProc
	require.Eventually(t, func() bool {
		found = findShims(ns)["corral-0000000000ff-1"]
		return len(found) == 1
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, pid, found[0].pid)
	require.NoError(t, e.removeOrphan(t.Context(), found[0].id, found, nil))
	select {
	case <-shimDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the shim found is still running after removeOrphan")
	}
}
