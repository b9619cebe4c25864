package integration

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"github.com/corral-sandbox/corral/internal/testhook"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/moby/sys/mountinfo"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
)

// TestCrashSupervisorChild is the supervisor that TestGCAfterSupervisorKill
// kills with SIGKILL, on the runtime $CORRAL_IT_CRASH_RUNTIME: mid-call
// ($CORRAL_IT_CRASH_MODE "running"), once its session has made a
// container ahead of the next call ("ahead": started, its init waiting for
// the request, on a runtime that starts ahead; else created and never
// started), or while its pool is making the next one ("creating": the runtime's
// binary is a gate, $CORRAL_IT_CRASH_GATE, that holds a create once the
// child armed it). It only runs as that child.
func TestCrashSupervisorChild(t *testing.T) {
	repo := os.Getenv("CORRAL_IT_CRASH_REPO")
	if repo == "" {
		t.Skip("runs only as the child of TestGCAfterSupervisorKill")
	}
	rt := testRuntime{name: os.Getenv("CORRAL_IT_CRASH_RUNTIME")}
	mode, gate := os.Getenv("CORRAL_IT_CRASH_MODE"), os.Getenv("CORRAL_IT_CRASH_GATE")
	e := rt.executor(t)
	if gate != "" {
		e = testutil.ExecutorWith(t, func(cfg *sandbox.Config) {
			cfg.Runtime, cfg.RuntimeBinary = rt.name, filepath.Join(gate, "runtime")
		})
	}
	s, err := e.NewSession(context.Background(), sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t)})
	require.NoError(t, err)
	fmt.Println("session", s.ID)
	if mode == "ahead" || mode == "creating" {
		// After the first call the session's pool creates containers
		// ahead: the parent kills this process once one exists.
		_, err := testutil.ExecWithoutPolicy(context.Background(), s, []string{"probe", "sleep", "0s"}, os.Stdout, os.Stderr)
		require.NoError(t, err)
		if mode == "ahead" {
			// The parent looks for a container made ahead only now: before,
			// the first call's own container is "created" for a moment
			// on its way to being started, run and deleted.
			require.NoError(t, os.WriteFile(os.Getenv("CORRAL_IT_CRASH_READY"), nil, 0o644))
			time.Sleep(5 * time.Minute)
		}
		// "creating": once the pool holds a container made ahead, arm the
		// gate; the next call takes that container and the refill's
		// create is held in the runtime until the parent killed us.
		ctx := e.Context(context.Background())
		filter := fmt.Sprintf("labels.%q==%d", sandbox.LabelPID, os.Getpid())
		for created := false; !created; time.Sleep(50 * time.Millisecond) {
			cs, err := e.Client().Containers(ctx, filter)
			require.NoError(t, err)
			for _, c := range cs {
				if task, err := c.Task(ctx, nil); err == nil {
					if st, err := task.Status(ctx); err == nil && st.Status == aheadStatus(t, rt) {
						created = true
					}
				}
			}
		}
		require.NoError(t, os.WriteFile(filepath.Join(gate, "armed"), nil, 0o644))
	}
	_, _ = testutil.ExecWithoutPolicy(context.Background(), s, []string{"probe", "sleep", "120s"}, os.Stdout, os.Stderr)
	t.Fatal("the parent should have killed this process")
}

// gateScript is the runtime binary of the "creating" child: the real
// runtime, except that a create, once dir/armed exists, writes the
// container's id (its last argument) to dir/creating and waits for
// dir/go. runc, crun and corral-runsc all end a create's command line
// with the id.
const gateScript = `#!/bin/sh
for a in "$@"; do last=$a; done
for a in "$@"; do
	if [ "$a" = create ] && [ -e %[1]s/armed ] && [ ! -e %[1]s/creating ]; then
		echo "$last" > %[1]s/creating.tmp && mv %[1]s/creating.tmp %[1]s/creating
		while [ ! -e %[1]s/go ]; do sleep 0.05; done
	fi
done
exec %[2]s "$@"
`

// TestGCAfterSupervisorKill: gc removes everything a supervisor killed
// with SIGKILL left, under each runtime, with a container running a call,
// made ahead of the next call ("ahead": on runc and crun started, its
// corral-init alone waiting for the request on its FIFO; on runsc created
// and never started, which runsc 20221219 cannot signal, so corral-runsc
// deletes it instead), being made by the pool (its create held in the
// runtime when the supervisor dies), or orphaned (the record of a
// container made ahead deleted, its task left: out of the task API's
// reach): the containers, their tasks
// and the runtime's state of them, shims, sandbox processes, cgroups (of
// every container of the session, also one whose record went first),
// leases, the session's host mounts and directory.
func TestGCAfterSupervisorKill(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		for _, mode := range []string{"running", "ahead", "creating", "orphaned"} {
			t.Run(mode, func(t *testing.T) { testGCAfterSupervisorKill(t, rt, mode) })
		}
	})
}

func testGCAfterSupervisorKill(t *testing.T, rt testRuntime, mode string) {
	// A state directory of its own: what the child leaves is this gc's
	// alone to sweep (another executor of the test binary's state
	// directory starting, or a daemon's periodic sweep, would take the
	// orphan first and report it in its own sweep).
	state, err := os.MkdirTemp("", "corral-gc-it-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(state) })
	e := rt.executor(t, func(cfg *sandbox.Config) { cfg.StateDir = state })
	repo := hiddenRepo(t)
	child := exec.Command(os.Args[0], "-test.run", "^TestCrashSupervisorChild$", "-test.count=1")
	child.Env = append(os.Environ(), "CORRAL_IT_CRASH_REPO="+repo, "CORRAL_IT_STATE_DIR="+state,
		"CORRAL_IT_CRASH_RUNTIME="+rt.name, "CORRAL_IT_CRASH_MODE="+strings.Replace(mode, "orphaned", "ahead", 1))
	gate := ""
	if mode == "creating" {
		info, err := sandbox.LookupRuntime(rt.name)
		require.NoError(t, err)
		bin := info.Binary
		if bin == "" {
			bin = "runc"
		}
		real, err := exec.LookPath(bin)
		require.NoError(t, err)
		gate = t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(gate, "runtime"), []byte(fmt.Sprintf(gateScript, gate, real)), 0o755))
		child.Env = append(child.Env, "CORRAL_IT_CRASH_GATE="+gate)
		// Whatever happens, never leave a create held.
		t.Cleanup(func() { _ = os.WriteFile(filepath.Join(gate, "go"), nil, 0o644) })
	}
	ready := filepath.Join(t.TempDir(), "ready")
	child.Env = append(child.Env, "CORRAL_IT_CRASH_READY="+ready)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	require.NoError(t, child.Start())
	defer child.Process.Kill()

	ctx := e.Context(context.Background())
	filter := fmt.Sprintf("labels.%q==%d", sandbox.LabelPID, child.Process.Pid)
	deadline := time.Now().Add(120 * time.Second)
	// The child's session keeps containers created ahead: the target is
	// the one in state mode (the call's when "running").
	running, childSession := "", ""
	var ids []string
	for running == "" {
		require.True(t, time.Now().Before(deadline), "the child never had a %s container", mode)
		if mode == "ahead" || mode == "orphaned" {
			if _, err := os.Stat(ready); err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		ids = nil
		cs, err := e.Client().Containers(ctx, filter)
		require.NoError(t, err)
		for _, c := range cs {
			ids = append(ids, c.ID())
			labels, err := c.Labels(ctx)
			if errdefs.IsNotFound(err) {
				continue // deleted since the listing
			}
			require.NoError(t, err)
			if mode == "creating" {
				// The target is the container whose create the gate holds.
				if id, err := os.ReadFile(filepath.Join(gate, "creating")); err == nil && strings.TrimSpace(string(id)) == c.ID() {
					running, childSession = c.ID(), labels[sandbox.LabelSession]
				}
				continue
			}
			if task, err := c.Task(ctx, nil); err == nil {
				st, err := task.Status(ctx)
				if err != nil {
					continue
				}
				switch {
				case mode == "running" && st.Status == containerd.Running:
					// The call's container, not one started ahead (its
					// init alone): the init and the tool.
					if aheadStatus(t, rt) == containerd.Running {
						if pids, err := task.Pids(ctx); err != nil || len(pids) < 2 {
							continue
						}
					}
					running, childSession = c.ID(), labels[sandbox.LabelSession]
				case (mode == "ahead" || mode == "orphaned") && st.Status == aheadStatus(t, rt):
					running, childSession = c.ID(), labels[sandbox.LabelSession]
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	_ = child.Wait()
	if mode == "creating" {
		_, err := e.Client().LoadContainer(ctx, running)
		require.NoError(t, err)
		// The runtime's create of it is held in the gate (containerd may
		// already list the task: it registers a shim before the shim's
		// create returns).
		held := false
		procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
		require.NoError(t, err)
		for _, p := range procs {
			cmdline, err := os.ReadFile(p)
			if err == nil && strings.Contains(string(cmdline), filepath.Join(gate, "runtime")) && strings.Contains(string(cmdline), running) {
				held = true
			}
		}
		require.True(t, held, "the create of %s is held in the gate", running)
	}
	if mode == "orphaned" {
		// The record of a created container goes, its task stays (what a
		// gc that deleted the record while the create was in flight
		// left): a task out of the API's reach, with its shim, runtime
		// state and cgroups.
		require.NoError(t, e.Client().ContainerService().Delete(ctx, running))
		ids = append(ids, running)
		// A corral of another state directory on the same namespace (its
		// start sweeps, then its gc) leaves the orphan alone: only the
		// spec ties a task without a record to its state directory.
		other := testutil.ExecutorWith(t, func(cfg *sandbox.Config) { cfg.StateDir = t.TempDir() })
		orep, err := other.GC(context.Background(), false)
		require.NoError(t, err)
		require.NotContains(t, orep.Containers, running, "another state directory's gc removed the orphan")
		require.NotEmpty(t, runtimeLeftovers(t, rt, state, running), "the orphan after another state directory's gc")
	}
	// Every container the child made, the one being created included.
	cs, err := e.Client().Containers(ctx, filter)
	require.NoError(t, err)
	for _, c := range cs {
		if !slices.Contains(ids, c.ID()) {
			ids = append(ids, c.ID())
		}
	}

	sessions := filepath.Join(state, "sessions")
	left, err := mountinfo.GetMounts(mountinfo.PrefixFilter(sessions))
	require.NoError(t, err)
	require.NotEmpty(t, left, "the killed supervisor should have left its host mounts")

	// The target is there before gc (a container whose create had not
	// reached the runtime yet may have nothing outside containerd).
	before := runtimeLeftovers(t, rt, state, running)
	require.NotEmpty(t, before, "the runtime's state and processes of %s before gc", running)

	// The crash may also take the FIFOs with it: gc must reap without them.
	fifos, err := filepath.Glob(filepath.Join(state, "fifo", "*", running+"-*"))
	require.NoError(t, err)
	require.NotEmpty(t, fifos, "the child's FIFOs")
	for _, f := range fifos {
		require.NoError(t, os.RemoveAll(filepath.Dir(f)))
	}

	if mode == "creating" {
		// Let the held create go on while gc runs: gc must wait for it
		// rather than delete the record of a task being made.
		go func() {
			time.Sleep(time.Second)
			_ = os.WriteFile(filepath.Join(gate, "go"), nil, 0o644)
		}()
	}
	gcStart := time.Now()
	rep, err := e.GC(context.Background(), false)
	require.NoError(t, err)
	require.Contains(t, rep.Containers, running, "gc's report: %+v; the target before gc: %q; after: %q", rep, before, runtimeLeftovers(t, rt, state, running))
	require.NotEmpty(t, rep.Mounts)

	cs, err = e.Client().Containers(ctx, filter)
	require.NoError(t, err)
	require.Empty(t, describeContainers(ctx, cs), "containers left after the gc that started at %s: %+v", gcStart.Format(time.StampMicro), rep)
	ls, err := e.Client().LeasesService().List(ctx, filter)
	require.NoError(t, err)
	require.Empty(t, ls, "leases left after gc")
	// Every container's runtime state, cgroups and processes (shim,
	// sandbox) are gone, a create in flight when the child died included.
	for _, id := range ids {
		require.Empty(t, runtimeLeftovers(t, rt, state, id), "left by %s after gc", rt.name)
	}
	// No cgroup of any container of the child's session either, one whose
	// record went before the listings above included (runc 1.1.5 can end
	// its delete with the cgroups left, empty, on a loaded host).
	cgroups, err := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", testutil.Namespace, "corral-"+childSession+"-*"))
	require.NoError(t, err)
	require.Empty(t, cgroups, "cgroups of the child's session left by %s after gc", rt.name)
	for _, m := range left {
		mounted, err := mountinfo.Mounted(m.Mountpoint)
		require.True(t, err != nil || !mounted, "mount %s left after gc", m.Mountpoint)
	}
	_, err = os.Lstat(filepath.Join(sessions, childSession))
	require.True(t, os.IsNotExist(err), "the child's session directory is left after gc")
}

// aheadStatus is the status of rt's containers made ahead of a call:
// running (corral-init waiting for its request) where the runtime starts
// ahead, else created.
func aheadStatus(t *testing.T, rt testRuntime) containerd.ProcessStatus {
	t.Helper()
	info, err := sandbox.LookupRuntime(rt.name)
	require.NoError(t, err)
	if info.StartAhead {
		return containerd.Running
	}
	return containerd.Created
}

// runtimeLeftovers lists what the runtime holds of container id: entries
// of its state root (StateDir/<runtime>/<namespace>) naming id, its
// cgroups (with the processes in them), and processes whose command line names id (runsc's sandbox and
// gofer; the shim).
func runtimeLeftovers(t *testing.T, rt testRuntime, state, id string) []string {
	t.Helper()
	var left []string
	root := filepath.Join(state, rt.name, testutil.Namespace)
	entries, _ := os.ReadDir(root)
	for _, d := range entries {
		if strings.Contains(d.Name(), id) {
			left = append(left, filepath.Join(root, d.Name()))
		}
	}
	cgroups, err := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", testutil.Namespace, id))
	require.NoError(t, err)
	for _, cg := range cgroups {
		// The processes still in it, if any (a runtime's init killed
		// mid-create does not name the container on its command line).
		procs, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
		left = append(left, cg+" (procs: "+strings.Join(strings.Fields(string(procs)), " ")+")")
	}
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(cmdline), id) {
			left = append(left, p+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return left
}

// TestGCStrayCgroups: gc removes the cgroups under its namespace that
// are named like a corral container (corral-<session>-<n>) and that no
// container record names, what a runtime's delete left with a crash
// before corral's cleanup after it: one holding a process (killed) and
// one empty, in each hierarchy they are in; the cgroups of a running
// call's container (another session) are untouched and its call ends as
// it would have. A start's sweep (Connect) removes such a cgroup too.
func TestGCStrayCgroups(t *testing.T) {
	forEachRuntime(t, testGCStrayCgroups)
}

func testGCStrayCgroups(t *testing.T, rt testRuntime) {
	e := rt.executor(t)
	s := newSessionOn(t, e, hiddenRepo(t))
	type outcome struct {
		res *sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := testutil.ExecWithoutPolicy(context.Background(), s, []string{"probe", "sleep", "30s"}, nil, nil)
		done <- outcome{res, err}
	}()
	// The call's container, running the tool, and its cgroups.
	live := containerCgroups(t, runningCall(t, e, s.ID))
	require.NotEmpty(t, live, "the running call's cgroups")

	// Two cgroups named like containers of a session of this test that
	// has no container: one holding a process, one empty.
	fake, err := sandbox.NewSessionID()
	require.NoError(t, err)
	busy, empty := "corral-"+fake+"-1", "corral-"+fake+"-2"
	var made []string
	for _, id := range []string{busy, empty} {
		for _, d := range strayCgroupDirs(id) {
			require.NoError(t, os.MkdirAll(d, 0o755))
			made = append(made, d)
		}
	}
	sleep := exec.Command("sleep", "300")
	require.NoError(t, sleep.Start())
	reaped := make(chan error, 1)
	exited := make(chan struct{})
	go func() { reaped <- sleep.Wait(); close(exited) }()
	t.Cleanup(func() {
		// Only what this test made: its sleep, then its cgroups.
		_ = sleep.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
		for _, d := range made {
			_ = os.Remove(d)
		}
	})
	for _, d := range strayCgroupDirs(busy) {
		require.NoError(t, os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(fmt.Sprint(sleep.Process.Pid)), 0o644))
	}
	in, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", sleep.Process.Pid))
	require.NoError(t, err)
	require.Contains(t, string(in), "/"+testutil.Namespace+"/"+busy, "the sleep is in the stray cgroup")

	rep, err := e.GC(context.Background(), false)
	require.NoError(t, err)
	require.Subset(t, rep.Cgroups, []string{busy, empty}, "gc's report: %+v", rep)
	for _, d := range made {
		require.NoDirExists(t, d, "a stray cgroup after gc")
	}
	select {
	case err := <-reaped:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "the sleep in the stray cgroup")
	case <-time.After(10 * time.Second):
		t.Fatal("the sleep in the stray cgroup was not killed")
	}
	select {
	case out := <-done:
		t.Fatalf("the call ended before gc did (%+v, %v): its cgroups tell nothing", out.res, out.err)
	default:
	}
	for _, d := range live {
		require.DirExists(t, d, "a cgroup of the running call's container after gc")
	}
	out := <-done
	require.NoError(t, out.err)
	require.Equal(t, 0, out.res.ExitCode, "the call that ran during gc: %+v", out.res)
	require.Empty(t, out.res.LimitsHit)

	// The sweep of every start (Connect) removes them too, and the next
	// gc of that executor reports them.
	third := "corral-" + fake + "-3"
	for _, d := range strayCgroupDirs(third) {
		require.NoError(t, os.MkdirAll(d, 0o755))
		made = append(made, d)
	}
	next := rt.executor(t)
	_, err = next.Connect(context.Background())
	require.NoError(t, err)
	for _, d := range strayCgroupDirs(third) {
		require.NoDirExists(t, d, "a stray cgroup after a start's sweep")
	}
	rep, err = next.GC(context.Background(), false)
	require.NoError(t, err)
	require.Contains(t, rep.Cgroups, third, "gc's report, with its start's sweep: %+v", rep)
}

// strayCgroupDirs is where TestGCStrayCgroups makes the cgroups of the
// container id that does not exist: cgroup v2's, or on cgroup v1 the pids
// and memory hierarchies' and, on a hybrid host, the unified one's.
func strayCgroupDirs(id string) []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{filepath.Join("/sys/fs/cgroup", testutil.Namespace, id)}
	}
	var dirs []string
	for _, h := range []string{"pids", "memory", "unified"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, "cgroup.procs")); err == nil {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", h, testutil.Namespace, id))
		}
	}
	return dirs
}

// containerCgroups lists the cgroups of the container id, in every
// hierarchy.
func containerCgroups(t *testing.T, id string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", testutil.Namespace, id))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", testutil.Namespace, id)); err == nil {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", testutil.Namespace, id))
	}
	return dirs
}

// describeContainers names each of cs with its creation time, labels and
// task status, for a failure's message.
func describeContainers(ctx context.Context, cs []containerd.Container) []string {
	var out []string
	for _, c := range cs {
		d := c.ID()
		if info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata); err == nil {
			d += fmt.Sprintf(" created %s labels %v", info.CreatedAt.Local().Format(time.StampMicro), info.Labels)
		}
		if task, err := c.Task(ctx, nil); err != nil {
			d += fmt.Sprintf(" task: %v", err)
		} else if st, err := task.Status(ctx); err == nil {
			d += fmt.Sprintf(" task %s", st.Status)
		}
		out = append(out, d)
	}
	return out
}

// TestGCReapsWhatLandsAfterItsListing: a container record a dead owner's
// request in flight commits after gc listed the containers (containerd
// serves a NewContainer its client sent before it died), and a lease, are
// reaped by the same gc, not left for the next one: gc lists again once
// it reaped what the first listing found overdue. Both records and the
// lease carry the labels of a process that has exited.
func TestGCReapsWhatLandsAfterItsListing(t *testing.T) {
	e := testutil.ExecutorWith(t, func(cfg *sandbox.Config) { cfg.StateDir = t.TempDir() })
	ctx := e.Context(context.Background())
	_, err := e.Connect(ctx)
	require.NoError(t, err)
	pid, labels := deadOwner(t, e)
	record := func(id string) { t.Helper(); require.NoError(t, makeRecord(t, ctx, e, id, labels)) }
	first, late := "corral-gc-first-"+strconv.Itoa(pid), "corral-gc-late-"+strconv.Itoa(pid)
	record(first)
	landed := false
	testhook.SetPoint(sandbox.HookSweepListed, func() error {
		if !landed {
			landed = true
			record(late)
			_, err := e.Client().LeasesService().Create(ctx, leases.WithID(late), leases.WithLabels(labels))
			require.NoError(t, err)
			t.Cleanup(func() { _ = e.Client().LeasesService().Delete(ctx, leases.Lease{ID: late}) })
		}
		return nil
	})
	t.Cleanup(func() { testhook.SetPoint(sandbox.HookSweepListed, nil) })

	rep, err := e.GC(context.Background(), false)
	require.NoError(t, err)
	require.True(t, landed, "gc never listed the containers")
	require.Subset(t, rep.Containers, []string{first, late}, "gc's report")
	require.Contains(t, rep.Leases, late, "gc's report")
	for _, id := range []string{first, late} {
		_, err := e.Client().LoadContainer(ctx, id)
		require.True(t, errdefs.IsNotFound(err), "%s left after gc: %v", id, err)
	}
	ls, err := e.Client().LeasesService().List(ctx, fmt.Sprintf("id==%q", late))
	require.NoError(t, err)
	require.Empty(t, ls, "the lease that landed after the listings is left after gc")
}

// deadOwner returns the pid of a process that has exited and the labels a
// container or lease of e's state directory would carry had that process
// made it (its deadline an hour away).
func deadOwner(t *testing.T, e *sandbox.Executor) (int, map[string]string) {
	t.Helper()
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	pid := dead.Process.Pid
	return pid, map[string]string{
		sandbox.LabelOwner: "corral", sandbox.LabelStateDir: e.Config().StateDir,
		sandbox.LabelPID: strconv.Itoa(pid), sandbox.LabelPIDStart: "1",
		sandbox.LabelDeadline: strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10),
	}
}

// makeRecord makes a container record id with labels and an empty spec,
// no snapshot and no task (what a NewContainer landing alone makes),
// deleted at the test's end if still there.
func makeRecord(t *testing.T, ctx context.Context, e *sandbox.Executor, id string, labels map[string]string) error {
	spec, err := typeurl.MarshalAny(&specs.Spec{Version: specs.Version})
	if err != nil {
		return err
	}
	t.Cleanup(func() { _ = e.Client().ContainerService().Delete(ctx, id) })
	_, err = e.Client().ContainerService().Create(ctx, containers.Container{
		ID: id, Runtime: containers.RuntimeInfo{Name: "io.containerd.runc.v2"}, Spec: spec, Labels: labels,
	})
	return err
}

// TestGCWaitsForWhatLandsJustAfterARound: a dead owner's lease made a
// moment before gc, and its container record landing half a second after
// gc's first round ended (its NewContainer still in containerd's hands),
// are both reaped by that gc: a round that found something made less
// than two seconds ago lists again only once it is that old.
func TestGCWaitsForWhatLandsJustAfterARound(t *testing.T) {
	e := testutil.ExecutorWith(t, func(cfg *sandbox.Config) { cfg.StateDir = t.TempDir() })
	ctx := e.Context(context.Background())
	_, err := e.Connect(ctx)
	require.NoError(t, err)
	pid, labels := deadOwner(t, e)
	id := "corral-gc-settle-" + strconv.Itoa(pid)
	_, err = e.Client().LeasesService().Create(ctx, leases.WithID(id), leases.WithLabels(labels))
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Client().LeasesService().Delete(ctx, leases.Lease{ID: id}) })
	landed := make(chan error, 1)
	var once sync.Once
	testhook.SetPoint(sandbox.HookSweepListed, func() error {
		once.Do(func() {
			go func() {
				time.Sleep(500 * time.Millisecond)
				landed <- makeRecord(t, ctx, e, id, labels)
			}()
		})
		return nil
	})
	t.Cleanup(func() { testhook.SetPoint(sandbox.HookSweepListed, nil) })

	rep, err := e.GC(context.Background(), false)
	require.NoError(t, err)
	require.NoError(t, <-landed)
	require.Contains(t, rep.Leases, id, "gc's report")
	require.Contains(t, rep.Containers, id, "gc's report: the record that landed after the first round")
	_, err = e.Client().LoadContainer(ctx, id)
	require.True(t, errdefs.IsNotFound(err), "%s left after gc: %v", id, err)
}

// TestGCStrayRuntimeState: gc removes the runtime's state of a container
// of which nothing else is left (no record, task, shim, cgroup or process
// naming it), what a runtime's delete cut short leaves (containerd kills
// its cleanup after a dead shim at io.containerd.timeout.shim.cleanup):
// here the state a finished call's container had while it ran, put back
// once the call's own cleanup removed it, under each runtime. While a
// process names the id (a runtime's delete still running) the state
// stays. A running call's state is untouched and its call ends as it
// would have; a second gc finds nothing.
func TestGCStrayRuntimeState(t *testing.T) {
	forEachRuntime(t, testGCStrayRuntimeState)
}

func testGCStrayRuntimeState(t *testing.T, rt testRuntime) {
	state, err := os.MkdirTemp("", "corral-gc-it-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(state) })
	e := rt.executor(t, func(cfg *sandbox.Config) { cfg.StateDir = state })
	s := newSessionOn(t, e, hiddenRepo(t))
	root := filepath.Join(state, rt.name, testutil.Namespace)

	type outcome struct {
		res *sandbox.Result
		err error
	}
	call := func(d string) (<-chan outcome, string) {
		done := make(chan outcome, 1)
		go func() {
			res, err := testutil.ExecWithoutPolicy(context.Background(), s, []string{"probe", "sleep", d}, nil, nil)
			done <- outcome{res, err}
		}()
		return done, runningCall(t, e, s.ID)
	}

	// A call's container while it runs: its runtime state, kept.
	done, stale := call("3s")
	saved := t.TempDir()
	var names []string
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, d := range entries {
		if strings.Contains(d.Name(), stale) {
			names = append(names, d.Name())
			copyState(t, filepath.Join(root, d.Name()), filepath.Join(saved, d.Name()))
		}
	}
	require.NotEmpty(t, names, "the runtime's state of the running %s in %s", stale, root)
	out := <-done
	require.NoError(t, out.err)
	require.Equal(t, 0, out.res.ExitCode)
	require.Eventually(t, func() bool { return len(runtimeLeftovers(t, rt, state, stale)) == 0 }, 30*time.Second, 100*time.Millisecond,
		"the call's own cleanup of %s", stale)
	// Put back: state with no record, no shim, no process.
	for _, n := range names {
		copyState(t, filepath.Join(saved, n), filepath.Join(root, n))
	}
	require.NotEmpty(t, runtimeLeftovers(t, rt, state, stale))

	// A process with the id among its arguments, as a runtime's delete
	// that outlived containerd's cleanup has: the state stays.
	runtimeLike := exec.Command("sh", "-c", "sleep 300", stale)
	require.NoError(t, runtimeLike.Start())
	t.Cleanup(func() { _ = runtimeLike.Process.Kill(); _ = runtimeLike.Wait() })
	rep, err := e.GC(context.Background(), false)
	require.NoError(t, err)
	require.Empty(t, rep.RuntimeStates, "gc's report while a process names %s", stale)
	require.NotEmpty(t, runtimeLeftovers(t, rt, state, stale))
	require.NoError(t, runtimeLike.Process.Kill())
	_ = runtimeLike.Wait()

	done, live := call("5s")
	rep, err = e.GC(context.Background(), false)
	require.NoError(t, err)
	require.Equal(t, []string{stale}, rep.RuntimeStates, "gc's report: %+v", rep)
	require.Empty(t, runtimeLeftovers(t, rt, state, stale), "left by %s after gc", rt.name)
	var liveState []string
	entries, err = os.ReadDir(root)
	require.NoError(t, err)
	for _, d := range entries {
		if strings.Contains(d.Name(), live) {
			liveState = append(liveState, d.Name())
		}
	}
	require.NotEmpty(t, liveState, "the running call's state after gc")
	out = <-done
	require.NoError(t, out.err)
	require.Equal(t, 0, out.res.ExitCode, "the call that ran during gc: %+v", out.res)

	rep, err = e.GC(context.Background(), false)
	require.NoError(t, err)
	require.Empty(t, rep.RuntimeStates, "a second gc")
}

// runningCall returns the id of session sid's container running a
// call's tool (its task running with more than its init).
func runningCall(t *testing.T, e *sandbox.Executor, sid string) string {
	t.Helper()
	ctx := e.Context(context.Background())
	filter := fmt.Sprintf("labels.%q==%q", sandbox.LabelSession, sid)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the call's container never ran")
		cs, err := e.Client().Containers(ctx, filter)
		require.NoError(t, err)
		for _, c := range cs {
			task, err := c.Task(ctx, nil)
			if err != nil {
				continue
			}
			if st, err := task.Status(ctx); err != nil || st.Status != containerd.Running {
				continue
			}
			if pids, err := task.Pids(ctx); err != nil || len(pids) < 2 {
				continue // one started ahead: its init alone
			}
			return c.ID()
		}
	}
}

// copyState copies the file or directory tree src to dst: its
// directories and regular files (a runtime's FIFOs and sockets are
// skipped), with their permission bits.
func copyState(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, info.Mode().Perm())
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, data, info.Mode().Perm())
		}
		return nil
	}), "copying %s", src)
}
