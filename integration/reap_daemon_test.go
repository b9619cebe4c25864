package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// daemonPidfds counts the pidfds the process pid holds open.
func daemonPidfds(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == "anon_inode:[pidfd]" {
			n++
		}
	}
	return n
}

// TestDaemonKilledMidDestroy: a daemon holds one shim pidfd per
// container it has; killed while removing a session, its first destroy
// having moved a (stopped) shim into the reap cgroup and waiting for the
// delete the shim runs, it leaves containers that `corral gc` removes
// with their cgroups and runtime state (the reap cgroup stays, empty);
// the session, whose removal never finished, stays for gc --force.
func TestDaemonKilledMidDestroy(t *testing.T) {
	state, sock := daemonDirs(t)
	cg := fmt.Sprintf("/corral-it-reapkill-%d", os.Getpid())
	dir := filepath.Join("/sys/fs/cgroup/cpu", cg)
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dir = filepath.Join("/sys/fs/cgroup", cg)
	}
	t.Cleanup(func() { removeCgroupDir(t, dir) })
	d := startDaemon(t, state, sock, "--reap-cgroup", cg)
	c := d.client()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"README.md": "# r\n", "openwiki/index.md": "# i\n"})
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
	require.NoError(t, err)
	for range 3 {
		_, err = c.Exec(ctx, s.ID, []string{"cat", "README.md"}, nil, nil)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return len(madeAhead(t, state)) >= 2 }, 60*time.Second, 100*time.Millisecond, "the pool made fewer than two containers ahead")
	ahead := madeAhead(t, state)
	n := daemonPidfds(t, d.cmd.Process.Pid)
	require.GreaterOrEqual(t, n, len(ahead), "a container made ahead without its shim's pidfd")
	require.LessOrEqual(t, n, len(daemonContainers(t, state)), "more shim pidfds than containers")

	shims := shimsOf(t, "corral-"+s.ID+"-")
	var stopped []int
	for id := range ahead {
		pid, ok := shims[id]
		require.True(t, ok, "no shim for %s", id)
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		stopped = append(stopped, pid)
	}
	t.Cleanup(func() {
		for _, pid := range stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	})
	go func() { _, _ = c.RemoveSession(context.Background(), s.ID) }()
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(stopped, func(pid int) bool { return slices.Contains(procCgroups(t, pid), cg) })
	}, 20*time.Second, 20*time.Millisecond, "no shim moved to the reap cgroup")
	d.kill()
	for _, pid := range stopped {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	ids := daemonContainers(t, state)
	require.NotEmpty(t, ids, "the killed daemon left no container")

	gc := func(args ...string) {
		cmd := exec.Command(testutil.CorralPath(), append([]string{"--namespace", testutil.Namespace, "--state-dir", state, "gc"}, args...)...)
		cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	gc()
	require.Empty(t, daemonContainers(t, state), "containers left after gc")
	for id := range ids {
		require.Empty(t, runtimeLeftovers(t, testRuntime{name: "runc"}, state, id), "left after gc")
	}
	cgroups, err := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", testutil.Namespace, "corral-"+s.ID+"-*"))
	require.NoError(t, err)
	require.Empty(t, cgroups, "cgroups of the session left after gc")
	// The session stays (persistent: its removal never finished); gc
	// --force removes it with its mounts.
	gc("--force")
	requireDaemonLeftNothing(t, state)
}
