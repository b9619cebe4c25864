package integration

// Issue 9 items 9, 11, 12, 13 and 8: nothing depends on the supervisor,
// or containerd, staying alive; sessions end.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
)

// crashTimeout is the profile timeout of the crash children.
const crashTimeout = 3 * time.Second

// TestDeadlineChild is the corral process TestToolDiesWithItsSupervisor
// kills with SIGKILL mid-call. It only runs as that child.
func TestDeadlineChild(t *testing.T) {
	repo := os.Getenv("CORRAL_IT_DEADLINE_REPO")
	if repo == "" {
		t.Skip("runs only as the child of TestToolDiesWithItsSupervisor")
	}
	e := testutil.Executor(t)
	s, err := e.NewSession(context.Background(), sandbox.SessionConfig{Repo: repo, Profile: timeoutProfile(t, crashTimeout)})
	require.NoError(t, err)
	_, _ = testutil.ExecWithoutPolicy(context.Background(), s, []string{"probe", "sleep", "120s"}, os.Stdout, os.Stderr)
	t.Fatal("the parent should have killed this process")
}

// timeoutProfile is the docs profile with the given timeout.
func timeoutProfile(t *testing.T, d time.Duration) *profiles.Profile {
	p := *docsProfile(t)
	p.Resources.Timeout = d.String()
	require.NoError(t, p.Validate())
	return &p
}

// childContainers returns the containers labelled with pid.
func childContainers(t *testing.T, e *sandbox.Executor, pid int) []containerd.Container {
	t.Helper()
	cs, err := e.Client().Containers(e.Context(context.Background()), fmt.Sprintf("labels.%q==%d", sandbox.LabelPID, pid))
	require.NoError(t, err)
	return cs
}

// TestToolDiesWithItsSupervisor: SIGKILL of the corral process mid-call.
// corral-init, PID 1 of the container, holds the deadline: the tool is
// dead within timeout + grace with no corral process alive, and the next
// corral start leaves nothing of the dead one behind.
func TestToolDiesWithItsSupervisor(t *testing.T) {
	e := testutil.Executor(t)
	ctx := e.Context(context.Background())
	repo := lateRepo(t)
	child := exec.Command(os.Args[0], "-test.run", "^TestDeadlineChild$", "-test.count=1")
	child.Env = append(os.Environ(), "CORRAL_IT_DEADLINE_REPO="+repo, "CORRAL_IT_STATE_DIR="+testutil.StateDir(t))
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	require.NoError(t, child.Start())
	defer child.Process.Kill()
	pid := child.Process.Pid

	var running containerd.Container
	var session string
	require.Eventually(t, func() bool {
		for _, c := range childContainers(t, e, pid) {
			if runsACall(ctx, c) {
				running = c
				labels, _ := c.Labels(ctx)
				session = labels[sandbox.LabelSession]
				return true
			}
		}
		return false
	}, 60*time.Second, 50*time.Millisecond, "the child never started its container")
	seen := time.Now()
	ids := []string{}
	for _, c := range childContainers(t, e, pid) {
		ids = append(ids, c.ID())
	}
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	_ = child.Wait()

	// No corral process is left to kill the tool: corral-init does.
	task, err := running.Task(ctx, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := task.Status(ctx)
		return err == nil && st.Status == "stopped"
	}, crashTimeout+sandbox.InitGrace+5*time.Second, 100*time.Millisecond, "the tool outlived its deadline")
	require.Less(t, time.Since(seen), crashTimeout+sandbox.InitGrace+5*time.Second)
	st, err := task.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, uint32(137), st.ExitStatus, "corral-init exits 137 at its deadline")

	// The next corral start (any command that reaches containerd) sweeps.
	_, stderr, code := corralCmd(t, "run", "--repo", repo, "--", "ls")
	require.Equal(t, 0, code, stderr)
	requireNothingOf(t, e, pid, session, ids)
}

// requireNothingOf fails when anything of the dead supervisor pid (its
// session, its containers ids) is left: containers, tasks, leases,
// snapshots, FIFO directories, host mounts, the session directory.
func requireNothingOf(t *testing.T, e *sandbox.Executor, pid int, session string, ids []string) {
	t.Helper()
	ctx := e.Context(context.Background())
	require.Empty(t, childContainers(t, e, pid), "containers")
	ls, err := e.Client().LeasesService().List(ctx, fmt.Sprintf("labels.%q==%d", sandbox.LabelPID, pid))
	require.NoError(t, err)
	require.Empty(t, ls, "leases")
	for _, id := range ids {
		// A container is only deleted once its task is: no task is left.
		_, err := e.Client().SnapshotService("overlayfs").Stat(ctx, id)
		require.True(t, errdefs.IsNotFound(err), "snapshot %s: %v", id, err)
		fifos, _ := filepath.Glob(filepath.Join(e.Config().StateDir, "fifo", "*", id+"-*"))
		require.Empty(t, fifos, "FIFOs of %s", id)
	}
	dir := filepath.Join(e.Config().StateDir, "sessions", session)
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	require.NoError(t, err)
	require.Empty(t, ms, "mounts")
	_, err = os.Lstat(dir)
	require.True(t, errors.Is(err, os.ErrNotExist), "session directory %s", dir)
}

// TestRunClosedPipe: `corral run -- cat big | head -c 10`. corral does
// not die of SIGPIPE: it kills the tool, cleans up, exits 141.
func TestRunClosedPipe(t *testing.T) {
	e := testutil.Executor(t)
	repo := lateRepo(t)
	big := bytes.Repeat([]byte("0123456789abcdef\n"), 900<<10/17)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "big.txt"), big, 0o644))
	state := t.TempDir()
	// corral's stdout is a pipe whose reader goes away after 10 bytes, as
	// `| head -c 10` does.
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command(testutil.CorralPath(), "--namespace", testutil.Namespace, "--state-dir", state, "--image", testutil.TestImageRef,
		"run", "--repo", repo, "--", "cat", "big.txt")
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	require.NoError(t, cmd.Start())
	w.Close()
	head := make([]byte, 10)
	_, err = io.ReadFull(r, head)
	require.NoError(t, err)
	r.Close()
	err = cmd.Wait()
	require.Equal(t, "0123456789", string(head))
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.False(t, ws.Signaled(), "corral died of %v", ws.Signal())
	require.Equal(t, 141, cmd.ProcessState.ExitCode(), "%v: %s", err, stderr.String())
	require.Empty(t, stderr.String(), "a closed pipe is no error to print")

	ctx := e.Context(context.Background())
	filter := fmt.Sprintf("labels.%q==%q", sandbox.LabelStateDir, state)
	cs, err := e.Client().Containers(ctx, filter)
	require.NoError(t, err)
	require.Empty(t, cs, "containers")
	ls, err := e.Client().LeasesService().List(ctx, filter)
	require.NoError(t, err)
	require.Empty(t, ls, "leases")
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(state))
	require.NoError(t, err)
	require.Empty(t, ms, "mounts")
	require.Empty(t, sessionEntries(t, state), "session directories")
	fifos, _ := os.ReadDir(filepath.Join(state, "fifo"))
	require.Empty(t, fifos, "FIFO directories")
}

// privateContainerd is a containerd of a test's own, on its own socket,
// root and state, so stopping it disturbs no other test.
type privateContainerd struct {
	t      *testing.T
	dir    string
	config string
	cmd    *exec.Cmd
}

func (p *privateContainerd) address() string { return filepath.Join(p.dir, "containerd.sock") }

func startPrivateContainerd(t *testing.T) *privateContainerd {
	t.Helper()
	if _, err := exec.LookPath("containerd"); err != nil {
		testutil.Missing(t, "containerd binary")
	}
	dir, err := os.MkdirTemp("", "ctd-")
	require.NoError(t, err)
	tmpl, err := os.ReadFile("../hack/containerd-private.toml")
	require.NoError(t, err)
	cfg := strings.ReplaceAll(string(tmpl), "@DIR@", dir)
	p := &privateContainerd{t: t, dir: dir, config: filepath.Join(dir, "config.toml")}
	require.NoError(t, os.WriteFile(p.config, []byte(cfg), 0o600))
	p.start()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM)
		_ = mountUnder(dir)
		_ = os.RemoveAll(dir)
	})
	return p
}

func (p *privateContainerd) start() {
	t := p.t
	t.Helper()
	log, err := os.OpenFile(filepath.Join(p.dir, "containerd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	defer log.Close()
	p.cmd = exec.Command("containerd", "--config", p.config)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	require.NoError(t, p.cmd.Start())
	require.Eventually(t, func() bool {
		c, err := containerd.New(p.address(), containerd.WithTimeout(time.Second))
		if err != nil {
			return false
		}
		defer c.Close()
		_, err = c.Version(context.Background())
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the private containerd did not start")
}

func (p *privateContainerd) stop(sig syscall.Signal) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	_ = p.cmd.Wait()
	p.cmd = nil
}

// mountUnder unmounts what is left under dir (a stopped containerd's
// rootfs mounts), deepest first.
func mountUnder(dir string) error {
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return err
	}
	for i := len(ms) - 1; i >= 0; i-- {
		_ = syscall.Unmount(ms[i].Mountpoint, syscall.MNT_DETACH)
	}
	return nil
}

// TestContainerdGoneChild runs one call in a session on the private
// containerd of TestContainerdDiesMidCall and prints the call's error.
func TestContainerdGoneChild(t *testing.T) {
	id := os.Getenv("CORRAL_IT_GONE_SESSION")
	if id == "" {
		t.Skip("runs only as the child of TestContainerdDiesMidCall")
	}
	e, err := sandbox.New(context.Background(), sandbox.Config{Address: os.Getenv("CORRAL_IT_GONE_ADDRESS"), Namespace: testutil.Namespace,
		StateDir: testutil.StateDir(t), Image: testutil.TestImageRef, Cold: true})
	require.NoError(t, err)
	defer e.Close()
	s, err := e.OpenSession(context.Background(), id)
	require.NoError(t, err)
	defer s.Close()
	_, err = testutil.ExecWithoutPolicy(context.Background(), s, []string{"probe", "sleep", "60s"}, nil, nil)
	fmt.Printf("ERROR: %v\n", err)
}

// TestContainerdDiesMidCall: containerd is killed while a call runs. The
// call fails with one line saying what happened and what to do; the
// container is reaped by the next corral start once containerd is back,
// and the session works again.
func TestContainerdDiesMidCall(t *testing.T) {
	testutil.Executor(t) // the test image and corral-init are built
	p := startPrivateContainerd(t)
	e, err := sandbox.New(context.Background(), sandbox.Config{Address: p.address(), Namespace: testutil.Namespace,
		StateDir: testutil.StateDir(t), Image: testutil.TestImageRef})
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, testutil.BuildTestImageOn(e))
	repo := lateRepo(t)
	s, err := e.CreateSession(context.Background(), sandbox.SessionConfig{Repo: repo, Profile: timeoutProfile(t, 5*time.Second)}, "docs")
	require.NoError(t, err)
	id := s.ID
	require.NoError(t, s.Close())

	child := exec.Command(os.Args[0], "-test.run", "^TestContainerdGoneChild$", "-test.count=1")
	child.Env = append(os.Environ(), "CORRAL_IT_GONE_SESSION="+id, "CORRAL_IT_GONE_ADDRESS="+p.address(), "CORRAL_IT_STATE_DIR="+testutil.StateDir(t))
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	require.NoError(t, child.Start())
	pid := child.Process.Pid
	ctx := namespaces.WithNamespace(context.Background(), testutil.Namespace)
	client, err := containerd.New(p.address())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		cs, err := client.Containers(ctx, fmt.Sprintf("labels.%q==%d", sandbox.LabelPID, pid))
		if err != nil {
			return false
		}
		for _, c := range cs {
			if runsACall(ctx, c) {
				return true
			}
		}
		return false
	}, 60*time.Second, 50*time.Millisecond, "the child never started its call: %s", out.String())
	client.Close()

	p.stop(syscall.SIGKILL)
	require.NoError(t, child.Wait(), out.String())
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "ERROR: ") {
			line = strings.TrimPrefix(l, "ERROR: ")
		}
	}
	// The task runs before containerd answers the start: the call may
	// be waiting for the task, or for that answer still.
	require.Regexp(t, "^containerd at "+regexp.QuoteMeta(p.address())+" stopped answering while (waiting for|starting) task corral-", line, out.String())
	require.Contains(t, line, "; the container is reaped at the next corral start: start containerd again, then repeat the call")

	p.start()
	// The next corral start reaps the dead call's container, and the
	// session works again.
	stdout, stderr, code := corralCmd(t, "--address", p.address(), "session", "exec", id, "--", "ls")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "README.md")
	client, err = containerd.New(p.address())
	require.NoError(t, err)
	defer client.Close()
	cs, err := client.Containers(ctx, fmt.Sprintf("labels.%q==%d", sandbox.LabelPID, pid))
	require.NoError(t, err)
	require.Empty(t, cs, "the dead call's container is left")
	ls, err := client.LeasesService().List(ctx, fmt.Sprintf("labels.%q==%d", sandbox.LabelPID, pid))
	require.NoError(t, err)
	require.Empty(t, ls, "the dead call's lease is left")
	_, stderr, code = corralCmd(t, "--address", p.address(), "session", "rm", id)
	require.Equal(t, 0, code, stderr)
}

// TestSessionStateWithoutContainerd: session ls, diff and apply need no
// containerd; a repository that moved gives a clear error and the writes
// stay reachable.
func TestSessionStateWithoutContainerd(t *testing.T) {
	testutil.Executor(t)
	repo := lateRepo(t)
	stdout, stderr, code := corralCmd(t, "session", "create", "--repo", repo)
	require.Equal(t, 0, code, stderr)
	id := strings.TrimSpace(stdout)
	_, stderr, code = corralCmd(t, "session", "exec", id, "--", "cp", "README.md", "openwiki/readme.md")
	require.Equal(t, 0, code, stderr)

	bogus := []string{"--address", filepath.Join(t.TempDir(), "no-containerd.sock")}
	stdout, stderr, code = corralCmd(t, append(bogus, "session", "ls")...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, id)
	stdout, stderr, code = corralCmd(t, append(bogus, "session", "diff", id, "--format", "patch")...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "+++ b/openwiki/readme.md")
	stdout, stderr, code = corralCmd(t, append(bogus, "session", "apply", id)...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "openwiki/readme.md")

	// The repository moves: a clear error, the writes still reachable.
	moved := repo + "-moved"
	require.NoError(t, os.Rename(repo, moved))
	defer os.Rename(moved, repo)
	_, stderr, code = corralCmd(t, append(bogus, "session", "exec", id, "--", "ls")...)
	require.Equal(t, 125, code, stderr)
	require.Equal(t, fmt.Sprintf("corral: session %s: repository %s: it was moved or removed; its writes stay reachable: `corral session diff %s --format patch`\n", id, repo, id), stderr)
	_, stderr, code = corralCmd(t, append(bogus, "session", "apply", id)...)
	require.Equal(t, 125, code, stderr)
	require.Contains(t, stderr, "it was moved or removed")
	stdout, stderr, code = corralCmd(t, append(bogus, "session", "diff", id, "--format", "patch")...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "+++ b/openwiki/readme.md")
	require.NoError(t, os.Rename(moved, repo))
	_, stderr, code = corralCmd(t, "session", "rm", id)
	require.Equal(t, 0, code, stderr)
}

// TestCallSurvivesAContainerThatDiedAhead: a container made ahead whose
// init dies while it waits (the kernel's OOM killer in a tight memory
// cgroup did it in CI; here SIGKILL) ran nothing, so the call runs on a
// new container instead of failing, and runs once: on a runtime that
// starts ahead (runc, crun), the init waited on its control FIFO and the
// call's open of it fails with ENXIO (no reader); on one that only creates
// ahead (runsc), the runtime refuses to start a stopped task ("cannot
// start a container that has stopped"). Each call appends a line to a
// file of the write area: as many lines as calls, none ran twice.
func TestCallSurvivesAContainerThatDiedAhead(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		info, err := sandbox.LookupRuntime(rt.name)
		require.NoError(t, err)
		// What a container made ahead waits in.
		ahead := containerd.Created
		if info.StartAhead {
			ahead = containerd.Running
		}
		e := rt.executor(t)
		ctx := e.Context(context.Background())
		s := newSessionOn(t, e, demoRepo(t))
		calls := 0
		mark := func() {
			t.Helper()
			calls++
			res := sh(t, s, "echo ran >> openwiki/runs && ls")
			require.Equal(t, 0, res.ExitCode, string(res.Stderr))
			require.Contains(t, out(res), "README.md")
		}
		mark()
		s.Idle() // the pool refilled: containers made ahead wait
		cs, err := e.Client().Containers(ctx, fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, s.ID))
		require.NoError(t, err)
		killed := 0
		for _, c := range cs {
			task, err := c.Task(ctx, nil)
			if err != nil {
				continue
			}
			if st, err := task.Status(ctx); err == nil && st.Status == ahead {
				if info.StartAhead {
					// Idle: corral-init alone, waiting for its request.
					pids, err := task.Pids(ctx)
					require.NoError(t, err)
					require.Len(t, pids, 1, "a container started ahead runs only its init")
				}
				require.NoError(t, syscall.Kill(int(task.Pid()), syscall.SIGKILL))
				require.Eventually(t, func() bool {
					st, err := task.Status(ctx)
					return err == nil && st.Status == containerd.Stopped
				}, 10*time.Second, 20*time.Millisecond)
				killed++
			}
		}
		require.NotZero(t, killed, "no container was made ahead")
		for range killed + 1 {
			mark()
		}
		res := sh(t, s, "cat openwiki/runs")
		require.Equal(t, strings.Repeat("ran\n", calls), out(res), "every call ran once")
	})
}
