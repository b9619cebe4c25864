package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// TestAheadShimsYieldTheCPU: the shim of every container a session's
// pool made ahead is in the ahead cgroup, at 1/16 of the default CPU
// share, and the container's own processes are not; a container made on
// the call's critical path keeps its shim where containerd starts it
// (every runtime: runsc too runs under the runc v2 shim). And on a
// runtime that starts ahead (runc, crun) a limit does not wait for a
// shim at that share: with every shim of the session stopped (SIGSTOP,
// the extreme of a shim starved of CPU), a call whose client went away
// and a call over its timeout have their processes killed at once; their
// results come when the shim runs again. Before the start killed the
// container's cgroups itself, a canceled call's tool lived on until the
// shim ran (corral-init enforces the deadline on its own).
func TestAheadShimsYieldTheCPU(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		cg := fmt.Sprintf("/corral-it-ahead-%d-%s", os.Getpid(), rt.name)
		dir, file, share := filepath.Join("/sys/fs/cgroup/cpu", cg), "cpu.shares", "64"
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			dir, file, share = filepath.Join("/sys/fs/cgroup", cg), "cpu.weight", "6"
		}
		t.Cleanup(func() { removeCgroupDir(t, dir) })
		e := rt.executor(t, func(c *sandbox.Config) { c.AheadCgroup = cg })
		ctx := e.Context(context.Background())
		s := newSessionOn(t, e, hiddenRepo(t), withResources(t, profiles.Resources{Timeout: "3s"}))
		run(t, s, "ls")
		s.Idle()

		cs, err := e.Client().Containers(ctx, fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, s.ID))
		require.NoError(t, err)
		var ahead []string
		for _, c := range cs {
			task, err := c.Task(ctx, nil)
			if err != nil {
				continue
			}
			if st, err := task.Status(ctx); err == nil && st.Status == aheadStatus(t, rt) {
				ahead = append(ahead, c.ID())
			}
		}
		require.GreaterOrEqual(t, len(ahead), 2, "the pool made fewer than two containers ahead")
		shims := shimsIn(t, dir)
		got, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		require.Equal(t, share, strings.TrimSpace(string(got)))
		for _, id := range ahead {
			require.Contains(t, shims, id, "the shim of container %s, made ahead, is not in %s (shims there: %v)", id, dir, shims)
			for _, pid := range containerPids(t, testutil.Namespace, id) {
				require.NotContains(t, procCgroups(t, pid), cg, "process %d of container %s is in the ahead cgroup", pid, id)
			}
		}

		// A container made on its call's critical path (a cold
		// executor makes every one so) keeps its shim where containerd
		// starts it.
		ec := rt.executor(t, func(c *sandbox.Config) { c.AheadCgroup, c.Cold = cg, true })
		cold := newSessionOn(t, ec, hiddenRepo(t))
		coldDone := make(chan *sandbox.Result, 1)
		go func() {
			r, _ := testutil.ExecWithoutPolicy(context.Background(), cold, []string{"probe", "sleep", "2s"}, nil, nil)
			coldDone <- r
		}()
		require.Eventually(t, func() bool {
			cs, err := ec.Client().Containers(ctx, fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, cold.ID))
			if err != nil || len(cs) != 1 {
				return false
			}
			task, err := cs[0].Task(ctx, nil)
			if err != nil {
				return false
			}
			st, err := task.Status(ctx)
			return err == nil && st.Status == containerd.Running
		}, 10*time.Second, 20*time.Millisecond, "the cold call's container never ran")
		for id := range shimsIn(t, dir) {
			require.False(t, strings.HasPrefix(id, "corral-"+cold.ID+"-"), "the shim of %s, made on its call, is in the ahead cgroup", id)
		}
		require.Equal(t, "woke\n", out(<-coldDone))
		if info, err := sandbox.LookupRuntime(rt.name); err != nil || !info.StartAhead {
			// runsc's containers are created ahead, not started: the
			// call's start goes through the shim, which a stopped shim
			// would hold before any deadline runs.
			return
		}

		// Every shim of the session stopped: a canceled call and a call
		// over its deadline are still killed.
		stopped := shimsIn(t, dir)
		require.NotEmpty(t, stopped)
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
		sleepers := func() []int { return processesNamed(t, testutil.Namespace, ahead, "probe") }

		// The client goes away (its context ends): the supervisor kills
		// the container's processes itself; the runtime's kill waits for
		// the shim. Before, the tool ran on until the shim did.
		cctx, cancel := context.WithCancel(context.Background())
		canceled := call(cctx)
		require.Eventually(t, func() bool { return len(sleepers()) == 1 }, 3*time.Second, 20*time.Millisecond,
			"the canceled call's tool never ran (shims stopped: %v)", stopped)
		cancel()
		require.Eventually(t, func() bool { return len(sleepers()) == 0 }, 2*time.Second, 20*time.Millisecond,
			"the tool of a canceled call outlived the cancel by 2s while its shim was stopped")

		// Over the deadline (3s): killed at it.
		start := time.Now()
		timedOut := call(context.Background())
		require.Eventually(t, func() bool { return len(sleepers()) == 1 }, 3*time.Second, 20*time.Millisecond,
			"the second call's tool never ran")
		require.Eventually(t, func() bool { return len(sleepers()) == 0 }, 6*time.Second, 50*time.Millisecond,
			"the tool outlived its 3s deadline by 3s while its shim was stopped")
		require.Less(t, time.Since(start), 7*time.Second)
		resume()
		<-canceled
		o := <-timedOut
		require.NoError(t, o.err)
		require.Equal(t, []string{sandbox.LimitTimeout}, o.res.LimitsHit)
		require.Equal(t, 137, o.res.ExitCode)
	})
}

// shimsIn maps the container id of each runc v2 shim in the cgroup dir
// (its command line's -id) to its pid.
func shimsIn(t *testing.T, dir string) map[string]int {
	t.Helper()
	shims := map[string]int{}
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if os.IsNotExist(err) {
		return shims
	}
	require.NoError(t, err)
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		for i, a := range args {
			if a == "-id" && i+1 < len(args) {
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

// removeCgroupDir removes the test's ahead cgroup once its shims are
// gone.
func removeCgroupDir(t *testing.T, dir string) {
	require.Eventually(t, func() bool {
		err := unix.Rmdir(dir)
		return err == nil || os.IsNotExist(err)
	}, 10*time.Second, 50*time.Millisecond, "the ahead cgroup %s never emptied", dir)
}
