package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestKillCgroupProcsCountsWhatItCannotSignal: a reader in another
// cgroup namespace (a daemon Pod given one) sees the container's process
// listed in cgroup.procs, but its /proc/PID/cgroup path relative to its
// own namespace, so it cannot match the process to the container and
// signals nothing. The process still counts as alive: a timeout at which
// it runs must not read as "the container had ended" (wait's late-exit
// rule). Before, killCgroupProcs counted only what it signalled: found
// and 0, and the live tool's timeout was dropped. Needs cgroup v1's
// pids hierarchy (this project's CI hosts have it), where one thread can
// be moved alone (tasks).
func TestKillCgroupProcsCountsWhatItCannotSignal(t *testing.T) {
	hier := "/sys/fs/cgroup/pids"
	if _, err := os.Stat(filepath.Join(hier, "tasks")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no cgroup v1 pids hierarchy: %v", err)
		}
		t.Skipf("no cgroup v1 pids hierarchy: %v", err)
	}
	id := strconv.Itoa(os.Getpid())
	ns := "corral-nstest-" + id
	d := filepath.Join(hier, ns, "c1")
	reader := filepath.Join(hier, "corral-nsreader-"+id)
	require.NoError(t, os.MkdirAll(d, 0o755))
	require.NoError(t, os.MkdirAll(reader, 0o755))
	sl := exec.Command("sleep", "30")
	require.NoError(t, sl.Start())
	t.Cleanup(func() {
		_ = sl.Process.Kill()
		_ = sl.Wait()
		for _, p := range []string{d, filepath.Dir(d), reader} {
			for i := 0; i < 250 && unix.Rmdir(p) == unix.EBUSY; i++ {
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	require.NoError(t, os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(sl.Process.Pid)), 0o644))

	type result struct {
		found bool
		alive int
		err   error
	}
	ch := make(chan result)
	go func() {
		// This thread alone moves to the reader's cgroup and into a new
		// cgroup namespace rooted there; it is never unlocked, so it
		// ends with the goroutine.
		runtime.LockOSThread()
		tid := []byte(strconv.Itoa(unix.Gettid()))
		orig, err := threadCgroup("pids")
		if err != nil {
			ch <- result{err: err}
			return
		}
		if err := os.WriteFile(filepath.Join(reader, "tasks"), tid, 0o644); err != nil {
			ch <- result{err: err}
			return
		}
		// Back where it was before the goroutine ends (cgroup v1 lets
		// root move a task by the hierarchy's full path from any cgroup
		// namespace), so the reader's cgroup can go.
		defer func() { _ = os.WriteFile(filepath.Join(hier, orig, "tasks"), tid, 0o644) }()
		if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
			ch <- result{err: err}
			return
		}
		f, a := killCgroupProcs(d, "/"+ns+"/c1")
		ch <- result{f, a, nil}
	}()
	r := <-ch
	time.Sleep(50 * time.Millisecond) // the thread moves back
	require.NoError(t, r.err)
	require.NoError(t, sl.Process.Signal(unix.Signal(0)), "the process was signalled from another cgroup namespace")
	require.True(t, r.found)
	require.Equal(t, 1, r.alive, "a live, listed process read as an empty cgroup")
}

// threadCgroup is the calling thread's cgroup path in the v1 hierarchy
// that has controller (/proc/thread-self/cgroup).
func threadCgroup(controller string) (string, error) {
	data, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), controller) {
			return f[2], nil
		}
	}
	return "", fmt.Errorf("no %s hierarchy in /proc/thread-self/cgroup", controller)
}
