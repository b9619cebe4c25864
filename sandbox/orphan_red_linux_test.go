package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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
	require.Empty(t, got["corral-0000000000cc-1"][0].exe, "the test binary is no shim binary")
	require.Empty(t, got["corral-0000000000dd-1"][0].bundle, "another mount namespace's working directory")
	require.Empty(t, got["corral-0000000000dd-1"][0].exe)
	require.True(t, inNodeMountNS("/proc/self"))
	require.False(t, inNodeMountNS(fmt.Sprintf("/proc/%d", got["corral-0000000000dd-1"][0].pid)))
}

// startNamedShim starts a process with a shim daemon's command line
// (argv0 containerd-shim-redgc, -namespace ns -id id -address, then
// extra) in dir, with attr (its credentials, its namespaces): this test
// binary, which sleeps when shimSleepEnv is set (TestMain), so it runs
// no shim binary. Killed with its children at the test's end; it
// returns the process's pid and a channel closed once it exited.
func startNamedShim(t *testing.T, ns, id, dir string, attr *syscall.SysProcAttr, extra ...string) (int, <-chan struct{}) {
	t.Helper()
	return startShimFrom(t, testBinaryCopy(t, "containerd-shim-redgc"), ns, id, dir, attr, extra...)
}

// testBinaryCopy copies this test binary to name in a directory of its
// own that every user may read and search (the build's is root's only),
// removed at the test's end, and returns its path.
func testBinaryCopy(t *testing.T, name string) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	src, err := os.ReadFile(self)
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "redgc-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(bin, src, 0o755))
	return bin
}

// startShimFrom is startNamedShim running bin, a copy of this test
// binary or the binary itself.
func startShimFrom(t *testing.T, bin, ns, id, dir string, attr *syscall.SysProcAttr, extra ...string) (int, <-chan struct{}) {
	t.Helper()
	return startShimFor(t, time.Minute, bin, ns, id, dir, attr, extra...)
}

// startShimFor is startShimFrom with a process that sleeps d, then exits.
func startShimFor(t *testing.T, d time.Duration, bin, ns, id, dir string, attr *syscall.SysProcAttr, extra ...string) (int, <-chan struct{}) {
	t.Helper()
	attr.Setpgid = true
	args := append([]string{"containerd-shim-redgc", "-namespace", ns, "-id", id, "-address", "/run/redgc.sock"}, extra...)
	cmd := &exec.Cmd{Path: bin, Args: args, Dir: dir, SysProcAttr: attr, Env: []string{shimSleepEnv + "=" + d.String()}}
	require.NoError(t, cmd.Start())
	return cmd.Process.Pid, waitInBackground(t, cmd)
}

// shimSleepEnv makes this test binary sleep for its value (a Go
// duration) instead of running tests (TestMain): the fake shims' program.
const shimSleepEnv = "CORRAL_TEST_SHIM_SLEEP"

func TestMain(m *testing.M) {
	if v := os.Getenv(shimSleepEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			os.Exit(2)
		}
		time.Sleep(d)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeShimBinary makes shimDirs a temporary directory holding a copy of
// this test binary named containerd-shim-redtest, so that a process
// started from it passes shimBinaryOf as a system shim binary does.
func fakeShimBinary(t *testing.T) string {
	t.Helper()
	bin := testBinaryCopy(t, "containerd-shim-redtest")
	old := shimDirs
	shimDirs = []string{filepath.Dir(bin)}
	t.Cleanup(func() { shimDirs = old })
	return bin
}

// TestShimActionsAreNoShims (red team of the pidfd kill): the shim
// daemon's command line is `<shim> -namespace NS -id ID -address ADDR`
// with no action; containerd's `start` and `delete` actions, and gc's
// own delete (removeOrphan), run the same binary as root with the same
// flags and an action. shimAt took such an action for the shim: a
// concurrent sweep found it, and openShim's check passed for it even
// when it got the pid of the orphan shim that exited (same id, same
// exe, root), so gc killed a delete half way (runc delete --force under
// it). A flag the shim's set lacks is no shim either (fail closed).
func TestShimActionsAreNoShims(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, as gc")
	}
	bin := fakeShimBinary(t)
	ns := "redgc-" + strconv.Itoa(os.Getpid())
	daemon, action, unknown := "corral-0000000000a0-1", "corral-0000000000a1-1", "corral-0000000000a3-1"
	startShimFrom(t, bin, ns, daemon, "/", &syscall.SysProcAttr{}, "-publish-binary", "/usr/bin/containerd", "-debug")
	_, actionDone := startShimFrom(t, bin, ns, action, "/", &syscall.SysProcAttr{}, "delete")
	startShimFrom(t, bin, ns, unknown, "/", &syscall.SysProcAttr{}, "-c", "sleep 60")
	var got map[string][]shimProc
	require.Eventually(t, func() bool {
		got = findShims(ns)
		return len(got[daemon]) == 1
	}, 5*time.Second, 20*time.Millisecond, "a shim daemon's command line")
	require.Equal(t, bin, got[daemon][0].exe, "the fake shim binary is trusted, as a system one would be")
	require.Empty(t, got[daemon][0].action)
	require.Len(t, got[action], 1)
	require.Equal(t, "delete", got[action][0].action, "a shim action's process (trailing \"delete\") is no shim daemon")
	require.NotContains(t, got, unknown, "a flag no shim has")

	// Even given the action's process as the shim found (its pid went
	// to it), removeOrphan leaves it running, and says that it runs.
	e := &Executor{cfg: Config{Namespace: ns, StateDir: t.TempDir()}, oci: &ociRuntime{}}
	shortShimSettle(t)
	var pid int
	for _, p := range procsNamed(t, action) {
		pid = p
	}
	require.NotZero(t, pid)
	err := e.removeOrphan(t.Context(), action, []shimProc{{pid: pid, id: action, exe: bin}}, nil)
	require.EqualError(t, err, fmt.Sprintf("shim processes of %s still run after gc waited %s for them: %d (delete)", action, shimSettle, pid))
	select {
	case <-actionDone:
		t.Fatal("gc killed a running shim action as an orphan shim")
	case <-time.After(200 * time.Millisecond):
	}
}

// procsNamed returns the pids of this machine's processes whose command
// line contains s.
func procsNamed(t *testing.T, s string) []int {
	t.Helper()
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(data), s) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestOrphanKillFailureIsNoRemoval (red team of the pidfd kill):
// openShim's errors were all dropped. When pidfd_open fails for a live
// shim (EMFILE here; ENOSYS or EPERM under a seccomp filter or an old
// kernel), the shim was not killed, removeOrphan removed its bundle and
// returned nil, and the sweep reported the task removed; the next sweep
// found the same shim. Now such an error is removeOrphan's, and the
// shim and its bundle stay for the next sweep.
func TestOrphanKillFailureIsNoRemoval(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, as gc")
	}
	ns := "redgc-" + strconv.Itoa(os.Getpid())
	id := "corral-0000000000a2-1"
	_, shimDone := startNamedShim(t, ns, id, "/", &syscall.SysProcAttr{})
	var found []shimProc
	require.Eventually(t, func() bool { found = findShims(ns)[id]; return len(found) == 1 }, 5*time.Second, 20*time.Millisecond)
	e := &Executor{cfg: Config{Namespace: ns, StateDir: t.TempDir()}, oci: &ociRuntime{}}

	// Use up the descriptors: the next pidfd_open fails with EMFILE.
	var held []int
	for len(held) < 1<<20 {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			break
		}
		held = append(held, fd)
	}
	err := e.removeOrphan(t.Context(), id, found, nil)
	for _, fd := range held {
		unix.Close(fd)
	}
	require.ErrorIs(t, err, unix.EMFILE)
	require.ErrorContains(t, err, "killing the orphan's shim: opening a pidfd of shim")
	select {
	case <-shimDone:
		t.Fatal("the shim was killed after all: the test's premise failed")
	case <-time.After(200 * time.Millisecond):
	}
}

func TestParseShimArgs(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		ns, id, action string
		wantErr        string
	}{
		{[]string{"-namespace", "n", "-id", "corral-x", "-address", "/run/c.sock"}, "n", "corral-x", "", ""},
		{[]string{"-namespace=n", "--id", "i", "-debug", "-publish-binary", "/usr/bin/containerd", "-socket", "s", "-bundle", "b"}, "n", "i", "", ""},
		{[]string{"-namespace", "n", "-id", "i", "delete"}, "n", "i", "delete", ""},
		{[]string{"-namespace", "n", "-id", "i", "-publish-binary", "/usr/bin/containerd", "-bundle", "b", "delete"}, "n", "i", "delete", ""},
		{[]string{"-namespace", "n", "-id", "i", "start"}, "n", "i", "start", ""},
		{[]string{"-namespace", "n", "-id", "i", "delete", "now"}, "", "", "", "more than one positional argument"},
		{[]string{"-c", "script", "-namespace", "n", "-id", "i"}, "", "", "", "flag provided but not defined: -c"},
		{[]string{"-namespace"}, "", "", "", "flag needs an argument"},
		{[]string{"-h"}, "", "", "", "help requested"},
	} {
		ns, id, action, err := parseShimArgs(tc.args)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, "%q", tc.args)
			continue
		}
		require.NoError(t, err, "%q", tc.args)
		require.Equal(t, []string{tc.ns, tc.id, tc.action}, []string{ns, id, action})
	}
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

// shortShimSettle makes awaitShimsGone's bound 300 ms for the test.
func shortShimSettle(t *testing.T) {
	old := shimSettle
	shimSettle = 300 * time.Millisecond
	t.Cleanup(func() { shimSettle = old })
}

// TestRemoveOrphanAwaitsShimActions: containerd runs the shim's delete
// action (the runtime's `delete --force`) whenever a shim it held exits,
// one gc killed and one whose create its dead client aborted included.
// gc returned while that ran, reporting the container removed with
// runsc's state of it still there (TestGCAfterSupervisorKill under runsc
// failed on it). removeOrphan (and reap, on the same wait) now returns
// once no shim process works on the container any more; the bundle the
// action works in stays until then.
func TestRemoveOrphanAwaitsShimActions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, as gc")
	}
	bin := fakeShimBinary(t)
	ns := "redgc-" + strconv.Itoa(os.Getpid())
	id := "corral-0000000000b0-1"
	bundle := t.TempDir()
	daemonPid, daemonDone := startShimFrom(t, bin, ns, id, bundle, &syscall.SysProcAttr{})
	_, actionDone := startShimFor(t, 1500*time.Millisecond, bin, ns, id, bundle, &syscall.SysProcAttr{}, "-publish-binary", "/usr/bin/containerd", "delete")
	var daemon []shimProc
	require.Eventually(t, func() bool {
		daemon = slices.DeleteFunc(findShims(ns)[id], func(sp shimProc) bool { return sp.action != "" })
		return len(findShims(ns)[id]) == 2
	}, 5*time.Second, 20*time.Millisecond)
	require.Len(t, daemon, 1)
	require.Equal(t, daemonPid, daemon[0].pid)

	e := &Executor{cfg: Config{Namespace: ns, StateDir: t.TempDir()}, oci: &ociRuntime{}}
	require.NoError(t, e.removeOrphan(t.Context(), id, daemon, nil))
	select {
	case <-actionDone:
	default:
		t.Fatal("removeOrphan returned while the shim's delete action still ran")
	}
	select {
	case <-daemonDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the orphan's shim daemon still runs")
	}
	require.Empty(t, findShims(ns)[id])

	// An action that does not end within shimSettle: an error naming
	// it, the bundle kept.
	shortShimSettle(t)
	id = "corral-0000000000b1-1"
	pid, _ := startShimFor(t, time.Minute, bin, ns, id, bundle, &syscall.SysProcAttr{}, "delete")
	require.Eventually(t, func() bool { return len(findShims(ns)[id]) == 1 }, 5*time.Second, 20*time.Millisecond)
	err := e.removeOrphan(t.Context(), id, nil, nil)
	require.EqualError(t, err, fmt.Sprintf("shim processes of %s still run after gc waited 300ms for them: %d (delete)", id, pid))
	require.DirExists(t, bundle)
}

// TestRemoveOrphanAwaitsALateShimAction (red team of the wait above):
// containerd starts its delete action only once it saw the connection of
// the shim gc killed close, a fork and exec later; one scan of /proc
// right after the kill found nothing, and removeOrphan returned while
// the action ran (15 runs of 15). It now returns once no shim process
// worked on the container for shimQuiet.
func TestRemoveOrphanAwaitsALateShimAction(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, as gc")
	}
	bin := fakeShimBinary(t)
	ns := "redgc-" + strconv.Itoa(os.Getpid())
	for i, delay := range []time.Duration{0, 3 * time.Millisecond, 100 * time.Millisecond} {
		id := fmt.Sprintf("corral-0000000000c%d-1", i)
		bundle := t.TempDir()
		_, daemonDone := startShimFrom(t, bin, ns, id, bundle, &syscall.SysProcAttr{})
		var daemon []shimProc
		require.Eventually(t, func() bool { daemon = findShims(ns)[id]; return len(daemon) == 1 }, 5*time.Second, 10*time.Millisecond)
		actionDone := make(chan (<-chan struct{}), 1)
		go func() { // containerd: its cleanup once the shim's connection closed
			<-daemonDone
			time.Sleep(delay)
			_, done := startShimFor(t, 500*time.Millisecond, bin, ns, id, bundle, &syscall.SysProcAttr{}, "-publish-binary", "/usr/bin/containerd", "delete")
			actionDone <- done
		}()
		e := &Executor{cfg: Config{Namespace: ns, StateDir: t.TempDir()}, oci: &ociRuntime{}}
		require.NoError(t, e.removeOrphan(t.Context(), id, daemon, nil))
		done := <-actionDone // started once the kill ended the daemon
		select {
		case <-done:
		default:
			t.Fatalf("removeOrphan returned while the delete action containerd started %s after the kill ran", delay)
		}
	}
}
