package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestShimsYieldTheCPUWhenDestroyed: a container's shim stays where
// containerd starts it while the container waits and runs its call, and
// moves into the reap cgroup, at 1/16 of the default CPU share, when the
// container is destroyed (the runtime's delete, which the shim runs, is
// nobody's call); the container's own processes never join it. Seen by
// stopping (SIGSTOP) the shims of a session's waiting containers and
// closing the session: the first destroy moves its shim, then waits for
// it. And on a runtime whose container cgroup holds the container's own
// processes (runc, crun) a canceled call and a call over its timeout are
// killed without the shim: with every shim of the session stopped, the
// tools die at once; their results come when the shims run again. Before
// the supervisor killed the container's cgroups itself, a canceled
// call's tool ran on until the shim did (corral-init enforces the
// deadline on its own).
func TestShimsYieldTheCPUWhenDestroyed(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		cg := fmt.Sprintf("/corral-it-reap-%d-%s", os.Getpid(), rt.name)
		dir, file, share := filepath.Join("/sys/fs/cgroup/cpu", cg), "cpu.shares", "64"
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			dir, file, share = filepath.Join("/sys/fs/cgroup", cg), "cpu.weight", "6"
		}
		t.Cleanup(func() { removeCgroupDir(t, dir) })
		e := rt.executor(t, func(c *sandbox.Config) { c.ReapCgroup = cg })
		// The shims' pidfds (runner.create holds one per container until
		// its destroy): none left once the session is closed.
		fds := pidfds(t)
		ctx := e.Context(context.Background())
		s := newSessionOn(t, e, hiddenRepo(t), withResources(t, profiles.Resources{Timeout: "3s"}))
		run(t, s, "ls")
		s.Idle()

		var ahead []string
		for _, c := range sessionContainers(t, e, s.ID) {
			task, err := c.Task(ctx, nil)
			if err != nil {
				continue
			}
			if st, err := task.Status(ctx); err == nil && st.Status == aheadStatus(t, rt) {
				ahead = append(ahead, c.ID())
			}
		}
		require.GreaterOrEqual(t, len(ahead), 2, "the pool made fewer than two containers ahead")
		require.GreaterOrEqual(t, pidfds(t)-fds, len(ahead), "no shim pidfd held for a container made ahead")
		shims := shimsOf(t, "corral-"+s.ID+"-")
		var stopped []int
		for _, id := range ahead {
			pid, ok := shims[id]
			require.True(t, ok, "no shim found for container %s (shims: %v)", id, shims)
			require.NotContains(t, procCgroups(t, pid), cg, "the shim of %s, waiting, is in the reap cgroup", id)
			for _, p := range containerPids(t, testutil.Namespace, id) {
				require.NotContains(t, procCgroups(t, p), cg, "process %d of container %s is in the reap cgroup", p, id)
			}
			stopped = append(stopped, pid)
		}

		// Every shim of the session stopped.
		for _, pid := range stopped {
			require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		}
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				for _, pid := range stopped {
					_ = syscall.Kill(pid, syscall.SIGCONT)
				}
			}
		}
		t.Cleanup(resume)
		if info, err := sandbox.LookupRuntime(rt.name); err == nil && info.StartAhead {
			killedWithoutShim(t, s, ahead, stopped)
			resumed = false
			for _, pid := range stopped {
				require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
			}
		}

		// Closing the session destroys the waiting containers: the first
		// destroy moves its (stopped) shim, then waits for its delete.
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		require.Eventually(t, func() bool {
			for _, pid := range stopped {
				if slices.Contains(procCgroups(t, pid), cg) {
					return true
				}
			}
			return false
		}, 10*time.Second, 20*time.Millisecond, "no shim of a destroyed container moved to the reap cgroup %s", cg)
		got, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		require.Equal(t, share, strings.TrimSpace(string(got)))
		resume()
		require.NoError(t, <-closed)
		require.Equal(t, fds, pidfds(t), "shim pidfds left open after the session closed")
	})
}

// killedWithoutShim runs two calls in s while the shims stopped are
// stopped and checks their tools die at once: one canceled by its
// client, one over its 3s deadline. It resumes the shims to collect the
// results.
func killedWithoutShim(t *testing.T, s *sandbox.Session, ids []string, stopped []int) {
	t.Helper()
	type outcome struct {
		res *sandbox.Result
		err error
	}
	call := func(ctx context.Context) chan outcome {
		done := make(chan outcome, 1)
		go func() {
			r, err := testutil.ExecWithoutPolicy(ctx, s, []string{"probe", "sleep", "60s"}, nil, nil)
			done <- outcome{r, err}
		}()
		return done
	}
	sleepers := func() []int { return processesNamed(t, testutil.Namespace, ids, "probe") }

	// The client goes away (its context ends).
	cctx, cancel := context.WithCancel(context.Background())
	canceled := call(cctx)
	require.Eventually(t, func() bool { return len(sleepers()) == 1 }, 10*time.Second, 20*time.Millisecond,
		"the canceled call's tool never ran (shims stopped: %v)", stopped)
	cancel()
	require.Eventually(t, func() bool { return len(sleepers()) == 0 }, 5*time.Second, 20*time.Millisecond,
		"the tool of a canceled call outlived the cancel by 5s while its shim was stopped")

	// Over the deadline (3s): killed at it.
	start := time.Now()
	timedOut := call(context.Background())
	require.Eventually(t, func() bool { return len(sleepers()) == 1 }, 10*time.Second, 20*time.Millisecond,
		"the second call's tool never ran")
	require.Eventually(t, func() bool { return len(sleepers()) == 0 }, 6*time.Second, 50*time.Millisecond,
		"the tool outlived its 3s deadline by 3s while its shim was stopped")
	require.Less(t, time.Since(start), 7*time.Second)
	for _, pid := range stopped {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	<-canceled
	o := <-timedOut
	require.NoError(t, o.err)
	require.Equal(t, []string{sandbox.LimitTimeout}, o.res.LimitsHit)
	require.Equal(t, 137, o.res.ExitCode)

}

// TestCallDoesNotWaitForASilentShim: a call over its timeout whose
// container's shim stays stopped (SIGSTOP: a hung or CPU-starved shim)
// never hears of the exit; it fails with sandbox.ErrShimSilent within the
// kill's bound (15 s) instead of holding its slot, and its container
// past its deadline label, for as long as the shim is stopped. Its tool
// is dead (the supervisor killed the container's cgroups). Once the shims
// run again the session closes and gc finds nothing. On runsc, whose
// containers made ahead are started at the call, the start is what the
// shim never answers: silentShimAtStart.
func TestCallDoesNotWaitForASilentShim(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		info, err := sandbox.LookupRuntime(rt.name)
		require.NoError(t, err)
		if !info.StartAhead {
			silentShimAtStart(t, rt)
			return
		}
		// No reap cgroup: the destroys after the resume are not starved
		// by other jobs' deletes at 1/16 share on a loaded host (the
		// reap cgroup is TestShimsYieldTheCPUWhenDestroyed's).
		st := stoppedShims(t, rt)
		s, ids, shims := st.s, st.ids, st.shims

		start := time.Now()
		type outcome struct {
			res *sandbox.Result
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			r, err := testutil.ExecWithoutPolicy(context.Background(), s, []string{"probe", "sleep", "60s"}, nil, nil)
			done <- outcome{r, err}
		}()
		sleepers := func() []int { return processesNamed(t, testutil.Namespace, ids, "probe") }
		require.Eventually(t, func() bool { return len(sleepers()) == 1 }, 10*time.Second, 20*time.Millisecond,
			"the call's tool never ran (shims stopped: %v)", shims)
		var o outcome
		select {
		case o = <-done:
		case <-time.After(40 * time.Second):
			t.Fatalf("a call whose shim stays stopped still waits %s after its start", time.Since(start))
		}
		took := time.Since(start)
		t.Logf("the call returned %s after its start (timeout 3s)", took)
		require.ErrorIs(t, o.err, sandbox.ErrShimSilent)
		require.Nil(t, o.res)
		require.Empty(t, sleepers(), "the tool outlived its call")
		require.Greater(t, took, 3*time.Second+10*time.Second, "the call gave the shim less than the kill's bound")
		st.resume()
		st.closedLeavesNothing(t, rt)
	})
}

// shimsStopped is a session (3 s timeout, no reap cgroup) whose
// containers made ahead (ids) have their shims (pids by container id) stopped with
// SIGSTOP: a hung or CPU-starved shim. They run again at the test's end
// at the latest.
type shimsStopped struct {
	e      *sandbox.Executor
	s      *sandbox.Session
	ids    []string
	shims  map[string]int // pid by container id
	resume func()
}

func stoppedShims(t *testing.T, rt testRuntime) shimsStopped {
	t.Helper()
	// No reap cgroup: the destroys after the resume are not starved by
	// other jobs' deletes at 1/16 share on a loaded host (the reap
	// cgroup is TestShimsYieldTheCPUWhenDestroyed's).
	e := rt.executor(t, func(c *sandbox.Config) { c.ReapCgroup = "" })
	s := newSessionOn(t, e, hiddenRepo(t), withResources(t, profiles.Resources{Timeout: "3s"}))
	run(t, s, "ls")
	s.Idle()
	var ids []string
	for _, c := range sessionContainers(t, e, s.ID) {
		ids = append(ids, c.ID())
	}
	shims := shimsOf(t, "corral-"+s.ID+"-")
	require.NotEmpty(t, shims)
	for _, pid := range shims {
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	}
	resume := func() {
		for _, pid := range shims {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	return shimsStopped{e: e, s: s, ids: ids, shims: shims, resume: resume}
}

// closedLeavesNothing closes the session (its shims running again) and
// requires that no container of it, nor anything the runtime held of
// one, is left.
func (st shimsStopped) closedLeavesNothing(t *testing.T, rt testRuntime) {
	t.Helper()
	require.NoError(t, st.s.Close())
	require.Empty(t, sessionContainers(t, st.e, st.s.ID), "containers of the closed session")
	for _, id := range st.ids {
		require.Empty(t, runtimeLeftovers(t, rt, st.e.Config().StateDir, id), "what the runtime holds of %s", id)
	}
}

// sessionContainers lists the containers containerd holds for session
// id (the session label every container of it carries).
func sessionContainers(t *testing.T, e *sandbox.Executor, id string) []containerd.Container {
	t.Helper()
	cs, err := e.Client().Containers(e.Context(context.Background()), fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, id))
	require.NoError(t, err)
	return cs
}

// pidfds counts this process's open pidfds.
func pidfds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == "anon_inode:[pidfd]" {
			n++
		}
	}
	return n
}

// shimsOf maps the container id of each runc v2 shim whose -id starts
// with prefix to its pid.
func shimsOf(t *testing.T, prefix string) map[string]int {
	t.Helper()
	shims := map[string]int{}
	procs, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.HasPrefix(filepath.Base(strings.SplitN(string(cmd), "\x00", 2)[0]), "containerd-shim") {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		for i, a := range args {
			if a == "-id" && i+1 < len(args) && strings.HasPrefix(args[i+1], prefix) {
				shims[args[i+1]] = pid
			}
		}
	}
	return shims
}

// containerPids lists the processes of container id's cgroup in the pids
// hierarchy (cgroup v1) or cgroup v2's.
func containerPids(t *testing.T, ns, id string) []int {
	t.Helper()
	var pids []int
	for _, d := range []string{filepath.Join("/sys/fs/cgroup/pids", ns, id), filepath.Join("/sys/fs/cgroup", ns, id)} {
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			pid, _ := strconv.Atoi(f)
			pids = append(pids, pid)
		}
	}
	return pids
}

// processesNamed lists the processes named comm in the cgroups of the
// containers ids.
func processesNamed(t *testing.T, ns string, ids []string, comm string) []int {
	t.Helper()
	var found []int
	for _, id := range ids {
		for _, pid := range containerPids(t, ns, id) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			if err == nil && strings.TrimSpace(string(b)) == comm {
				found = append(found, pid)
			}
		}
	}
	return found
}

var cgroupLine = regexp.MustCompile(`(?m)^\d+:[^:]*:(.*)$`)

// procCgroups is the cgroup paths of process pid, one per hierarchy.
func procCgroups(t *testing.T, pid int) []string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil
	}
	var paths []string
	for _, m := range cgroupLine.FindAllStringSubmatch(string(data), -1) {
		paths = append(paths, m[1])
	}
	return paths
}

// removeCgroupDir removes the test's reap cgroup once its shims are
// gone.
func removeCgroupDir(t *testing.T, dir string) {
	require.Eventually(t, func() bool {
		err := unix.Rmdir(dir)
		return err == nil || os.IsNotExist(err)
	}, 10*time.Second, 50*time.Millisecond, "the reap cgroup %s never emptied", dir)
}

// silentShimAtStart: a call on a runtime that starts its container at
// the call (runsc), whose shim is stopped (SIGSTOP), fails with
// sandbox.ErrShimSilent within the start's bound (20 s) instead of
// waiting on the shim for as long as it is stopped. The tool never runs,
// not even once the shims run again and carry out the start they were
// sent (the container's processes were killed before the call
// returned): the write it would make is not in the session's change set.
func silentShimAtStart(t *testing.T, rt testRuntime) {
	st := stoppedShims(t, rt)
	s := st.s

	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := testutil.ExecWithoutPolicy(context.Background(), s, []string{"probe", "write", "openwiki/ran.md", "ran\n"}, nil, nil)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("a call whose shim stays stopped still waits %s after its start", time.Since(start))
	}
	took := time.Since(start)
	t.Logf("the call returned %s after its start: %v", took, err)
	require.ErrorIs(t, err, sandbox.ErrShimSilent)
	require.Contains(t, err.Error(), "did not answer the start within 20s (its request was withdrawn, the container killed where this process sees its cgroups; the shim reported no exit within 15s of the kill either")
	require.Greater(t, took, 15*time.Second, "the call gave the shim less than the start's bound")

	st.resume()
	time.Sleep(3 * time.Second) // the shims carry out what they were sent
	cs, err := s.Changes()
	require.NoError(t, err)
	for _, c := range cs.Changes {
		require.NotEqual(t, "openwiki/ran.md", c.Path, "the tool ran after its call failed")
	}
	st.closedLeavesNothing(t, rt)
}
