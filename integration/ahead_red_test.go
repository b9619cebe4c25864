package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// TestAheadDeadlineCountsFromRequest: a container started ahead that
// waited longer than the session's timeout before its call still gives
// the call its whole timeout (corral-init's deadline and the supervisor's
// count from the request, not from the container's start).
func TestAheadDeadlineCountsFromRequest(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		s := rt.session(t, hiddenRepo(t), withResources(t, profiles.Resources{Timeout: "3s"}))
		require.NoError(t, s.Warm())
		s.Idle()
		// Idle longer than the timeout and its grace.
		time.Sleep(3*time.Second + sandbox.InitGrace + time.Second)
		res := inBox(t, s, "probe", "sleep", "1500ms")
		require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
		require.Equal(t, "woke\n", out(res))
		require.Empty(t, res.LimitsHit)
	})
}

// TestAheadToolReachesNoWaitingContainer: a tool of a session whose pool
// holds containers started ahead sees, in its own container, no process
// but its init and its own (no waiting init to signal or trace), its own
// request directory holding its control file alone, and a kill of every
// process it may signal leaves the session's next call (on a container
// started ahead) running normally.
func TestAheadToolReachesNoWaitingContainer(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		s := rt.session(t, hiddenRepo(t))
		require.NoError(t, s.Warm())
		s.Idle()
		res := sh(t, s, `cd /proc && for p in [0-9]*; do echo "$p $(cat $p/comm 2>/dev/null)"; done; echo ---; ls -a /.corral/req 2>&1; echo ---; ls -a /.corral/ctl 2>&1; true`)
		require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
		t.Logf("%s", out(res))
		parts := strings.Split(out(res), "---\n")
		require.Len(t, parts, 3, out(res))
		for _, line := range strings.Split(strings.TrimSpace(parts[0]), "\n") {
			f := strings.Fields(line)
			require.NotEmpty(t, f)
			// PID 1 is this container's corral-init; every other process is
			// the tool's shell or its children (busybox applets).
			if f[0] == "1" || f[0] == "[0-9]*" { // "[0-9]*": Landlock keeps it out of /proc
				continue
			}
			require.Len(t, f, 2, "process %q", line)
			require.Contains(t, []string{"busybox", "sh", "cat", "ls"}, f[1], "a process the tool did not start: %q", line)
		}
		// Landlock keeps the tool out of /.corral where the kernel has it;
		// else the directory holds its own control file alone.
		if !strings.Contains(parts[1], "Permission denied") {
			require.Equal(t, []string{".", "..", "request"}, strings.Fields(parts[1]))
		}

		// Every signal the tool can send: kill(-1, SIGKILL) reaches its own
		// container's processes only.
		sh(t, s, `kill -9 -1; sleep 1`)
		for i := 0; i < 3; i++ {
			res := run(t, s, "ls")
			require.Equal(t, 0, res.ExitCode, "call %d after a kill(-1): %s", i, res.Stderr)
		}
	})
}

// TestAheadCloseLeavesNothing: closing a session whose pool holds
// containers started ahead leaves none of them (containers, tasks,
// cgroups) and no request directory.
func TestAheadCloseLeavesNothing(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		e := rt.executor(t)
		ctx := e.Context(context.Background())
		s, err := e.CreateSession(context.Background(), sandbox.SessionConfig{Repo: hiddenRepo(t), Profile: docsProfile(t)}, "docs")
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.RemoveSession(context.Background(), s.ID) })
		run(t, s, "ls")
		s.Idle()
		filter := fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, s.ID)
		cs, err := e.Client().Containers(ctx, filter)
		require.NoError(t, err)
		require.NotEmpty(t, cs, "the pool made nothing ahead")
		var ids []string
		for _, c := range cs {
			ids = append(ids, c.ID())
		}
		req := filepath.Join(e.Config().StateDir, "sessions", s.ID, "req")
		require.NoError(t, s.Close())
		cs, err = e.Client().Containers(ctx, filter)
		require.NoError(t, err)
		require.Empty(t, cs, "containers of the closed session left")
		entries, err := os.ReadDir(req)
		if err == nil {
			require.Empty(t, entries, "request directories left in %s", req)
		}
		for _, id := range ids {
			cg, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", "*", id))
			require.Empty(t, cg, "cgroup of %s left", id)
		}
	})
}

// TestAheadHugeRequest: a request larger than a pipe's buffer reaches a
// container started ahead whole (corral-init reads it as it comes), and
// one larger than initctl.MaxBytes ends in a refusal, not a hang; the
// session's next call runs.
func TestAheadHugeRequest(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		s := rt.session(t, hiddenRepo(t))
		require.NoError(t, s.Warm())
		s.Idle()
		// 100 KiB: above a pipe's 64 KiB, below execve's 128 KiB per string.
		big := strings.Repeat("a", 100<<10)
		res := inBox(t, s, "busybox", "sh", "-c", `echo ${#1}`, "sh", big)
		require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
		require.Equal(t, fmt.Sprintf("%d\n", len(big)), out(res))

		s.Idle()
		start := time.Now()
		huge := make([]string, 0, 48)
		for i := 0; i < 48; i++ {
			huge = append(huge, strings.Repeat("b", 100<<10))
		}
		// Refused before any container gets it (it used to cost the
		// container started ahead, which read 4 MiB of it and exited, and a
		// second one created for the retry, both to answer exit 125).
		r, err := testutil.ExecWithoutPolicy(context.Background(), s, append([]string{"true"}, huge...), nil, nil)
		require.Nil(t, r)
		require.True(t, errdefs.IsInvalidArgument(err), "a 4.8 MiB request: %v", err)
		require.Less(t, time.Since(start), 60*time.Second)
		res = run(t, s, "ls")
		require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	})
}

// TestAheadContainerdRestartWhileWaiting: containerd is killed and
// started again while a session's containers started ahead wait (their
// shims and inits outlive it, the streams of their tasks' status do not).
// The session's next calls run, each once and reported, and closing the
// session leaves nothing in containerd.
func TestAheadContainerdRestartWhileWaiting(t *testing.T) {
	testutil.Executor(t) // the test image and corral-init are built
	for _, name := range runtimeNames(t) {
		info, err := sandbox.LookupRuntime(name)
		require.NoError(t, err)
		if !info.StartAhead {
			continue
		}
		t.Run(name, func(t *testing.T) {
			p := startPrivateContainerd(t)
			e, err := sandbox.New(context.Background(), sandbox.Config{Address: p.address(), Namespace: testutil.Namespace,
				StateDir: testutil.StateDir(t), Image: testutil.TestImageRef, Runtime: name})
			require.NoError(t, err)
			defer e.Close()
			require.NoError(t, testutil.BuildTestImageOn(e))
			s, err := e.NewSession(context.Background(), sandbox.SessionConfig{Repo: hiddenRepo(t), Profile: timeoutProfile(t, 10*time.Second)})
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.Warm())
			s.Idle()

			p.stop(syscall.SIGKILL)
			p.start()
			// Each call runs once and reports it: before the fix the first
			// reported "containerd stopped answering while waiting" (its
			// task's status stream, made before the restart, had broken)
			// while its tool ran and wrote, under runc; repeated, as the
			// error advised, it wrote twice.
			for i := 1; i <= 3; i++ {
				res, err := testutil.ExecWithoutPolicy(context.Background(), s,
					[]string{"busybox", "sh", "-c", "echo ran >> /workspace/openwiki/count; wc -l < /workspace/openwiki/count"}, nil, nil)
				require.NoError(t, err, "call %d after the restart", i)
				require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
				require.Equal(t, fmt.Sprintf("%d", i), strings.TrimSpace(out(res)), "call %d", i)
			}
			require.NoError(t, s.Close())
			left, err := e.Client().Containers(e.Context(context.Background()))
			require.NoError(t, err)
			require.Empty(t, left, "containers left in containerd")
		})
	}
}

// TestAheadToolLeavesNoProcess: a tool that leaves a process behind
// (backgrounded, its own session) ends with its call: the call returns
// when the tool exits, and the container, its cgroup and the process are
// gone once the call's clean-up ran; the containers started ahead still
// run corral-init alone.
func TestAheadToolLeavesNoProcess(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		e := rt.executor(t)
		ctx := e.Context(context.Background())
		s := newSessionOn(t, e, hiddenRepo(t))
		require.NoError(t, s.Warm())
		s.Idle()
		start := time.Now()
		res := sh(t, s, `setsid probe sleep 120s >/dev/null 2>&1 & echo left`)
		require.Equal(t, "left\n", out(res))
		require.Less(t, time.Since(start), 30*time.Second)
		s.Idle()
		cs, err := e.Client().Containers(ctx, fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, s.ID))
		require.NoError(t, err)
		for _, c := range cs {
			task, err := c.Task(ctx, nil)
			if err != nil {
				continue
			}
			if st, err := task.Status(ctx); err != nil || st.Status != containerd.Running {
				continue // created ahead (runsc): nothing runs in it
			}
			pids, err := task.Pids(ctx)
			require.NoError(t, err)
			require.LessOrEqual(t, len(pids), 1, "container %s runs more than its init: %v", c.ID(), pids)
		}
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, _ := os.ReadFile(p)
			require.NotContains(t, string(b), "probe\x00sleep\x00120s", "the tool's process %s outlived its call", p)
		}
	})
}

// TestAheadDaemonIdleExpiry: a daemon session whose pool holds
// containers started ahead expires (its idle TTL, the daemon's prune):
// its containers and request directories go with it.
func TestAheadDaemonIdleExpiry(t *testing.T) {
	ctx := context.Background()
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock)
	c := d.client()
	repo := newRepo(t, map[string]string{"README.md": "# r\n", "openwiki/index.md": "# i\n"})
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo, IdleTTL: "2s"})
	require.NoError(t, err)
	_, err = c.Exec(ctx, s.ID, []string{"ls"}, nil, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(madeAhead(t, state)) > 0 }, 60*time.Second, 100*time.Millisecond, "the pool made no container ahead")
	time.Sleep(2500 * time.Millisecond)
	pr, err := c.Prune(ctx, "")
	require.NoError(t, err)
	require.Len(t, pr.Pruned, 1)
	require.Eventually(t, func() bool { return len(daemonContainers(t, state)) == 0 }, 30*time.Second, 200*time.Millisecond,
		"containers of the expired session left: %v", daemonContainers(t, state))
	_, err = os.Lstat(filepath.Join(state, "sessions", s.ID))
	require.ErrorIs(t, err, os.ErrNotExist, "the expired session's directory")
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}

// TestAheadMCPStdinClosed: an MCP client that goes away (stdin closes)
// after a call ends the server, and with it the containers its session's
// pool started ahead.
func TestAheadMCPStdinClosed(t *testing.T) {
	e := testutil.Executor(t)
	s := createSession(t, e, sandbox.SessionConfig{Repo: hiddenRepo(t), Profile: docsProfile(t)}, "docs")
	require.NoError(t, s.Close())
	c := startMCP(t, "--session", s.ID)
	c.ok("exec", map[string]any{"argv": []string{"ls"}}, "")
	ctx := e.Context(context.Background())
	filter := fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, s.ID)
	require.Eventually(t, func() bool {
		cs, err := e.Client().Containers(ctx, filter)
		return err == nil && len(cs) > 0
	}, 60*time.Second, 100*time.Millisecond, "the server's pool made nothing ahead")
	c.close()
	requireNoContainers(t, e, s.ID)
}
