package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/initctl"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/seccomp"
	"golang.org/x/sys/unix"
)

// Limit names, as reported in Result.LimitsHit.
const (
	LimitTimeout   = "timeout"    // the wall-clock timeout killed the tool
	LimitMemory    = "memory"     // the OOM killer killed a process
	LimitPids      = "pids"       // a fork or clone failed at pids.max
	LimitOutput    = "output"     // stdout or stderr passed its cap; the tool was killed
	LimitWriteArea = "write_area" // the write area's tmpfs is full (ENOSPC)
)

// limitOrder is the order of Result.LimitsHit, whichever limit was seen
// first.
var limitOrder = []string{LimitTimeout, LimitMemory, LimitPids, LimitOutput, LimitWriteArea}

// Result is one invocation's outcome, shaped after os/exec: a non-zero
// exit is a result, not an error.
type Result struct {
	// Argv is what ran (the normalized argv from the allowlist).
	Argv []string `json:"argv"`
	// ExitCode is the tool's exit status; 128+N when killed by signal N.
	// Always 137 (SIGKILL) when LimitsHit holds LimitOutput, even if the
	// tool exited by itself before the kill reached it.
	ExitCode int `json:"exit_code"`
	// Duration is the wall time from the request (the task's start, or
	// the request sent to a container started ahead) to the exit.
	Duration time.Duration `json:"duration_ns"`
	// LimitsHit names each limit reached (Limit* constants), in the
	// constants' order.
	// LimitTimeout means a process of the container still ran at the
	// deadline (the supervisor's, or corral-init's own when the
	// supervisor was late): a container that ended before it hit no
	// timeout, however late its exit status arrives (a loaded host runs
	// the runtime's shim late), on a runtime whose container cgroups
	// hold the tool's processes (RuntimeInfo.StartAhead).
	LimitsHit []string `json:"limits_hit"`
	// Stdout and Stderr hold at most the profile's output cap each.
	Stdout          []byte `json:"-"`
	Stderr          []byte `json:"-"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
}

// Killed reports whether a limit ended the tool (its exit code is then
// the kill's, not the tool's).
func (r *Result) Killed() bool {
	for _, l := range r.LimitsHit {
		if l == LimitTimeout || l == LimitMemory || l == LimitOutput {
			return true
		}
	}
	return false
}

// cappedWriter keeps at most limit bytes and forwards them to its target;
// past the cap it drops the rest (so the copy never blocks) and signals
// over once.
type cappedWriter struct {
	mu        sync.Mutex
	w         io.Writer
	buf       bytes.Buffer
	limit     int64
	truncated bool
	over      chan struct{}
	once      *sync.Once
	// inWrite is set while a Write waits on w, the caller's writer (a
	// pipe its reader has not emptied): the output copy then waits on
	// the caller, not on the shim (outputCopied).
	inWrite atomic.Bool
}

func (c *cappedWriter) setTarget(w io.Writer) {
	c.mu.Lock()
	c.w = w
	c.mu.Unlock()
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	room := c.limit - int64(c.buf.Len())
	if int64(len(p)) > room {
		p = p[:max(room, 0)]
		if !c.truncated {
			c.truncated = true
			c.once.Do(func() { close(c.over) })
		}
	}
	c.buf.Write(p)
	if c.w != nil && len(p) > 0 {
		c.inWrite.Store(true)
		_, _ = c.w.Write(p)
		c.inWrite.Store(false)
	}
	return n, nil
}

func (c *cappedWriter) bytes() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes()), c.truncated
}

// container is one created (namespaces, mounts, seccomp filter, cgroup)
// container whose tool has not run yet. Its process is corral-init, which
// reads what to run from ctlFile; so it can be made before the call
// arrives. Created by create, it is started by the call after the control
// file is written; started ahead by startAhead, its init waits on ctlFile,
// a FIFO, for the call's request (send).
type container struct {
	id        string
	c         containerd.Container
	task      containerd.Task
	statusC   <-chan containerd.ExitStatus
	out, errw *cappedWriter
	over      chan struct{}
	ctlFile   string // the host path of its control file
	lease     leases.Lease
	created   time.Time
	started   bool // started ahead: ctlFile is a FIFO its init waits on
	// shim is its runtime shim's pidfd and pid (shimOf), or -1: destroy
	// moves the shim into the executor's reap cgroup before the delete
	// (Config.ReapCgroup).
	shimFD, shimPid int
	// exited: wait received the task's exit status, so the task is
	// stopped and destroy deletes it without killing it first.
	exited bool
}

// runner is the part of a session that makes, starts, waits for and
// destroys its containers: one containerPlan per container, from the
// session's fixed parts. It tracks the containers that are running so a
// failed session can kill them at once (stop).
type runner struct {
	e       *Executor
	session string
	limits  profiles.Limits
	seccomp *seccomp.Profile
	layout  *mounts.Layout

	mu      sync.Mutex
	running map[*container]struct{}
	stopped error // once set, nothing starts and start returns it
}

func newRunner(e *Executor, id string, p *Policy, sc *seccomp.Profile, l *mounts.Layout) *runner {
	return &runner{e: e, session: id, limits: p.limits, seccomp: sc, layout: l, running: map[*container]struct{}{}}
}

// newID names a new container of the session: corral-<session>-<n>,
// n a random 48-bit decimal. Several processes (and several openers in
// one process) make containers of one session; their names, and their
// control files, never meet.
func (r *runner) newID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[2:]); err != nil {
		return "", err
	}
	return "corral-" + r.session + "-" + strconv.FormatUint(binary.BigEndian.Uint64(b[:]), 10), nil
}

// setLayout gives the runner the session's layout, once, before its
// first container.
func (r *runner) setLayout(l *mounts.Layout) { r.layout = l }

// planFor returns the plan of the container id.
func (r *runner) planFor(id, init string) containerPlan {
	return containerPlan{
		ID: id, Namespace: r.e.cfg.Namespace, Limits: r.limits, Seccomp: r.seccomp,
		Binds: r.layout.Binds(), Ctl: r.layout.Ctl, Req: r.reqDir(id), Init: init,
	}
}

// reqDir is the host's request directory of the container id, bound
// into it alone (containerPlan.Req).
func (r *runner) reqDir(id string) string { return filepath.Join(r.layout.Req, id) }

// create makes a container from its plan, on the image the executor
// resolved once (a fresh writable snapshot, so runc can make the mount
// points any image lacks; the spec's root is read-only). It connects to
// containerd if this is the executor's first need of it.
func (r *runner) create(ctx context.Context) (_ *container, retErr error) {
	e := r.e
	rt, err := e.runtime(ctx)
	if err != nil {
		return nil, err
	}
	lim := r.limits
	ctx = e.Context(ctx)
	id, err := r.newID()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	// Overdue once a call taken from the pool as late as it allows has
	// had its timeout and its slack (maxWarmAge).
	labels := e.ownerLabels(now.Add(maxWarmAge + lim.Timeout + InitGrace))
	labels[LabelSession] = r.session

	// What containerd makes for this container (a lease, a record and
	// its snapshot, a task) is made under a context the caller cannot
	// cancel, bounded by createWait: a request canceled half way may still
	// commit in containerd while its answer is lost, and destroy would not
	// know of what it made. The caller's end is checked between them.
	mctx, mcancel := context.WithTimeout(context.WithoutCancel(ctx), createWait)
	defer mcancel()
	// The lease holds the snapshot until the container is deleted; its
	// expiry lets containerd's GC reclaim it after a crash.
	l, err := rt.client.LeasesService().Create(mctx, leases.WithRandomID(), leases.WithExpiration(maxWarmAge+lim.Timeout+InitGrace+time.Minute), leases.WithLabels(labels))
	if err != nil {
		return nil, e.wrapContainerd("creating a lease", err)
	}
	ctx, mctx = leases.WithLease(ctx, l.ID), leases.WithLease(mctx, l.ID)
	callerGone := func() error {
		if ctx.Err() != nil {
			return fmt.Errorf("creating container %s: %w", id, context.Cause(ctx))
		}
		return nil
	}
	c := &container{id: id, lease: l, ctlFile: filepath.Join(r.reqDir(id), filepath.Base(initctl.RequestFile)), created: now, shimFD: -1}
	defer func() {
		if retErr != nil {
			r.destroy(c)
		}
	}()
	// The bind's source exists before the create; 0755: corral-init (the
	// spec's uid, not root) reads what it holds. MkdirAll: a session made
	// by an older corral has no Req yet.
	if err := os.MkdirAll(r.layout.Req, 0o700); err != nil {
		return nil, fmt.Errorf("making the request directory: %w", err)
	}
	if err := os.Mkdir(r.reqDir(id), 0o755); err != nil {
		return nil, fmt.Errorf("making the request directory: %w", err)
	}
	if err := os.Chmod(r.reqDir(id), 0o755); err != nil {
		return nil, fmt.Errorf("making the request directory: %w", err)
	}
	if err := callerGone(); err != nil {
		return nil, err
	}
	cc, err := rt.client.NewContainer(mctx, id,
		withNewSnapshot(id, rt),
		containerd.WithContainerLabels(labels),
		e.withRuntime(),
		containerd.WithNewSpec(e.oci.spec(specOpts(r.planFor(id, rt.init)))...),
	)
	if err != nil {
		return nil, e.wrapContainerd("creating container "+id, err)
	}
	c.c = cc

	c.over = make(chan struct{})
	once := &sync.Once{}
	c.out = &cappedWriter{limit: lim.OutputBytes, over: c.over, once: once}
	c.errw = &cappedWriter{limit: lim.OutputBytes, over: c.over, once: once}
	if err := os.MkdirAll(e.fifoDir(), 0o700); err != nil {
		return nil, err
	}
	if err := callerGone(); err != nil {
		return nil, err
	}
	task, err := cc.NewTask(mctx, cio.NewCreator(cio.WithStreams(nil, c.out, c.errw), cio.WithFIFODir(e.fifoDir())))
	if err != nil {
		return nil, e.wrapContainerd("creating task "+id, err)
	}
	c.task = task
	if err := callerGone(); err != nil {
		return nil, err
	}
	if e.cfg.ReapCgroup != "" {
		c.shimFD, c.shimPid = shimOf(int(task.Pid()), id)
	}
	// Wait before Start, so the exit can never be missed.
	// Under a context the caller cannot cancel: the caller's end would
	// deliver a made-up status (gRPC's Canceled, no exit code) taken for
	// the exit; the wait ends when the task is deleted.
	if c.statusC, err = task.Wait(context.WithoutCancel(ctx)); err != nil {
		return nil, e.wrapContainerd("waiting on task "+id, err)
	}
	return c, nil
}

// createAhead makes a container for the pool: create, and on a runtime
// that starts ahead (RuntimeInfo.StartAhead) a FIFO as its control file
// and the start, after which its corral-init waits on the FIFO for the
// call's request (send). Until then the container runs nothing but
// corral-init, under every confinement of the spec.
func (r *runner) createAhead(ctx context.Context) (_ *container, retErr error) {
	c, err := r.create(ctx)
	if err != nil || !r.e.oci.info.StartAhead {
		return c, err
	}
	defer func() {
		if retErr != nil {
			r.destroy(c)
		}
	}()
	// Read by the container's uid (the spec's, not root): 0644 whatever
	// the umask.
	if err := unix.Mkfifo(c.ctlFile, 0o600); err != nil {
		return nil, fmt.Errorf("making the control FIFO: %w", err)
	}
	if err := os.Chmod(c.ctlFile, 0o644); err != nil {
		return nil, fmt.Errorf("making the control FIFO: %w", err)
	}
	if err := c.task.Start(leases.WithLease(r.e.Context(ctx), c.lease.ID)); err != nil {
		return nil, r.e.wrapContainerd("starting task "+c.id+" ahead", err)
	}
	c.started = true
	return c, nil
}

// createWait bounds the requests that make a container (its lease,
// record and snapshot, task): a shim's start included, a second on an
// idle host, seconds on a loaded one.
const createWait = time.Minute

// startWait bounds the start, at its call, of a container not started
// ahead (runsc's, created ahead; any runtime's, created on the call): the
// runtime's start, requested through the container's shim, which a shim
// stopped or starved of the CPU never answers.
const startWait = 20 * time.Second

// statusWait bounds the status request that tells a refused start from
// one that ran nothing (a call after a refusal adds it to startWait's
// place in callSlack, never to the kill's).
const statusWait = 5 * time.Second

// startTask starts c's task (its request is in its control file
// already) within startWait and while the call's ctx lasts; cctx is the
// context the task's requests use. A start that failed or ended early may
// still be carried out by the shim (or by a runtime whose answer was
// lost), and run the tool after its call returned. So on any error the
// request is first withdrawn (c's control file removed: a corral-init
// started later finds none and exits 125, having run nothing), which
// holds whatever the runtime and wherever the supervisor runs. A start
// that ended by startWait or the call may have happened all the same
// (its answer late): every process of c's cgroups that this process can
// tell is the container's is killed (cgroups.killProcs: before the start
// the runtime's own, runc's or crun's init, gVisor's sandbox and gofer),
// then the runtime's kill is sent through the shim and the exit awaited
// (c.killed, within killWait; c is then exited). The error wraps
// ErrShimSilent past startWait, else it is the call's
// (context.Cause(ctx)); any other is the runtime's refusal.
func (r *runner) startTask(ctx, cctx context.Context, c *container) error {
	sctx, cancel := context.WithTimeout(cctx, startWait)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	err := c.task.Start(sctx)
	if err == nil {
		return nil
	}
	withdrawn := "its request was withdrawn"
	if err := os.Remove(c.ctlFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		withdrawn = "its request could not be withdrawn: " + err.Error()
	}
	if sctx.Err() == nil {
		return err
	}
	r.e.cgroups.killProcs(r.e.cfg.Namespace, c.id)
	st, kerr := c.killed(cctx)
	if kerr == nil {
		c.statusC = exited(st)
		c.exited = true
	}
	if ctx.Err() != nil {
		if kerr != nil {
			return fmt.Errorf("invocation %s: %w; %w", c.id, context.Cause(ctx), kerr)
		}
		return fmt.Errorf("invocation %s: %w", c.id, context.Cause(ctx))
	}
	killedMsg := "the container killed and its exit seen"
	if kerr != nil {
		killedMsg = fmt.Sprintf("the container killed where this process sees its cgroups; the shim reported no exit within %s of the kill either, so the tool may still run if it had started", killWait)
	}
	return &shimSilentError{fmt.Sprintf("container %s: its shim did not answer the start within %s (%s, %s; retry it)", c.id, startWait, withdrawn, killedMsg)}
}

// sendWait bounds how long send waits for a started container's init to
// open its FIFO (it normally waits there long before the call).
const sendWait = 10 * time.Second

// send hands data, a request, to the corral-init of a container started
// ahead: it opens the FIFO O_WRONLY|O_NONBLOCK, which fails with ENXIO
// while no process has it open for reading (fifo(7)): an init that has not
// reached its open yet (retried until sendWait), or one that is dead (its
// exit arrives on statusC). A dead init, an init gone before it read the
// whole request (EPIPE) or one that never opened ran nothing: the error
// wraps errNotStarted.
//
// It honours ctx: ended before the FIFO is open (or right after, before a
// byte is written), send returns at once with its cause and the init got
// nothing; ended while the request is written (a request larger than
// the pipe's buffer, an init slow to read it), the write stops and the
// error wraps errRequestCut as well: the init may have read part of it,
// so the caller kills the container before it returns. A request written
// whole returns nil, whenever ctx ends: the caller's wait sees the end.
func (c *container) send(ctx context.Context, data []byte) error {
	canceled := func() error {
		return fmt.Errorf("container %s: sending the request: %w", c.id, context.Cause(ctx))
	}
	giveUp := time.NewTimer(sendWait)
	defer giveUp.Stop()
	var fd int
	for {
		if ctx.Err() != nil {
			return canceled()
		}
		var err error
		fd, err = unix.Open(c.ctlFile, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.ENXIO) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("opening the control FIFO: %w", err)
		}
		select {
		case <-ctx.Done():
			return canceled()
		case st := <-c.statusC:
			c.statusC = exited(st)
			return &notStartedError{fmt.Errorf("container %s: its init exited (status %d) before the call", c.id, st.ExitCode())}
		case <-giveUp.C:
			return &notStartedError{fmt.Errorf("container %s: its init never opened the control FIFO", c.id)}
		case <-time.After(time.Millisecond):
		}
	}
	// Non-blocking, the FIFO is in the runtime's poller: a request larger
	// than the pipe's buffer is read by the init as it comes, and the end
	// of ctx stops the write through its deadline.
	f := os.NewFile(uintptr(fd), c.ctlFile)
	defer f.Close()
	if ctx.Err() != nil {
		return canceled() // nothing written: the init reads an empty request
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	_, err := f.Write(data)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EPIPE):
		return &notStartedError{fmt.Errorf("container %s: its init closed the control FIFO before the request's end", c.id)}
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
		return fmt.Errorf("container %s: sending the request: %w: %w", c.id, errRequestCut, context.Cause(ctx))
	}
	return fmt.Errorf("writing the control FIFO: %w", err)
}

// timeoutVerdict decides a call whose timer fired before its exit status
// came: ran says whether a process of the container was still there when
// the supervisor's kill looked (walked after the request). A process
// that ran is a timeout. None ran, seen so before timeout + InitGrace
// (corral-init's own deadline counts from its read of the request, after
// it): every process had ended before the deadline and only the exit
// status came late (a shim a loaded host runs late), so no timeout,
// whatever the exit code (endedEarly). None ran, seen later: corral-init's
// deadline may have ended it, which the exit code tells (wait's rule for
// an exit that came first).
func timeoutVerdict(ran bool, walked, timeout time.Duration) (timedOut, endedEarly bool) {
	switch {
	case ran:
		return true, false
	case walked < timeout+InitGrace:
		return false, true
	}
	return false, false
}

// killWait bounds how long a call waits, after it killed its container
// (a limit, a cancel), for the runtime's kill to be sent and the exit to
// come back through the shim; ioWait bounds the output copy's end after
// the exit (the shim closes its ends of the stdio FIFOs once the
// container's processes are gone). A shim stopped or starved of the CPU
// answers neither; without the bounds a call would hold its slot, and
// its container past the deadline label, for as long as the shim (a
// process other than corral) stays stopped. callSlack counts both.
const (
	killWait = 15 * time.Second
	ioWait   = 5 * time.Second
)

// killed sends the runtime's kill of every process of c (SIGKILL, which
// no process can catch, corral-init included) through c's shim and waits
// for the exit, both within killWait. Past it the error wraps
// ErrShimSilent, c's stdio is closed so that nothing waits on the copy,
// and c stays not exited: destroy kills and deletes it again.
func (c *container) killed(ctx context.Context) (containerd.ExitStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, killWait)
	defer cancel()
	_ = c.task.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll)
	select {
	case st := <-c.statusC:
		return st, nil
	case <-ctx.Done():
		c.closeIO()
		return containerd.ExitStatus{}, &shimSilentError{fmt.Sprintf("container %s: its shim reported no exit within %s of the kill (the kill was sent; the call's result is lost: retry it)", c.id, killWait)}
	}
}

// outputCopied waits for the end of c's output copy: within ioWait of
// the exit, not counting the time the copy waits on the caller's writer
// (a `corral run | less` whose reader is slow is not a silent shim).
// Past it c's stdio is closed and the error wraps ErrShimSilent.
func (c *container) outputCopied() error {
	done := make(chan struct{})
	go func() {
		c.task.IO().Wait()
		close(done)
	}()
	t := time.NewTimer(ioWait)
	defer t.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-t.C:
		}
		if c.out.inWrite.Load() || c.errw.inWrite.Load() {
			t.Reset(ioWait)
			continue
		}
		c.closeIO()
		select {
		case <-done:
		case <-time.After(ioWait):
		}
		return &shimSilentError{fmt.Sprintf("container %s: its shim did not end the output within %s of the exit (the call's result is lost; retry it)", c.id, ioWait)}
	}
}

// closeIO closes corral's ends of c's stdio FIFOs: the copy stops (a
// read of a closed FIFO returns at once), so neither this call nor the
// task's delete, which waits for the copy, waits on a silent shim.
func (c *container) closeIO() {
	if io := c.task.IO(); io != nil {
		io.Cancel()
		_ = io.Close()
	}
}

// exited is a channel that delivers st once, in place of a status channel
// send already read.
func exited(st containerd.ExitStatus) <-chan containerd.ExitStatus {
	ch := make(chan containerd.ExitStatus, 1)
	ch <- st
	return ch
}

// withNewSnapshot is containerd.WithNewSnapshot(id, rt.image) on the
// overlayfs snapshotter, with the image's chain ID resolved once per
// executor (runtimeParts.parent): a writable snapshot id whose parent is
// the image's unpacked layers. WithNewSnapshot reads the image's index,
// manifest and config from the content store and asks the introspection
// service for the snapshotter's capabilities on every container (seven
// round trips to containerd); the capabilities only matter for ID-mapped
// snapshots, which corral never asks for.
func withNewSnapshot(id string, rt runtimeParts) containerd.NewContainerOpts {
	return func(ctx context.Context, client *containerd.Client, c *containers.Container) error {
		if _, err := client.SnapshotService(snapshotter).Prepare(ctx, id, rt.parent); err != nil {
			return err
		}
		c.Snapshotter = snapshotter
		c.SnapshotKey = id
		c.Image = rt.image.Name()
		return nil
	}
}

// destroyWait bounds destroy's requests to containerd (callSlack counts
// it in).
const destroyWait = 30 * time.Second

// destroy kills and deletes the container, its snapshot, its control file
// and its lease, tolerating what is already gone. What containerd cannot
// delete now (it is down) the next corral start sweeps.
func (r *runner) destroy(c *container) {
	e := r.e
	ctx, cancel := context.WithTimeout(e.Context(context.Background()), destroyWait)
	defer cancel()
	lctx := leases.WithLease(ctx, c.lease.ID)
	taskDeleted := false
	if c.shimFD >= 0 {
		// The runtime's delete and the shim's exit are nobody's call:
		// they yield the CPU to calls.
		e.moveToReapCgroup(c.shimFD, c.shimPid)
		unix.Close(c.shimFD)
		c.shimFD = -1
	}
	if c.task != nil {
		// A created but never started task cannot be deleted directly:
		// it is killed first. A task whose exit wait received is stopped
		// (and the kernel killed whatever else ran in its PID namespace
		// when its init died); killing it would only make the shim run
		// the runtime's kill, to fail.
		var opts []containerd.ProcessDeleteOpts
		if !c.exited {
			opts = append(opts, containerd.WithProcessKill)
		}
		_, err := c.task.Delete(lctx, opts...)
		taskDeleted = err == nil
		if taskDeleted {
			// What the runtime's delete left of the cgroups
			// (cgroups.remove): on a loaded host runc can leave them
			// empty.
			if err := e.cgroups.remove(e.cfg.Namespace, c.id, cgroupSettle); err != nil {
				fmt.Fprintf(e.cfg.Log, "corral: %v\n", oneLine(err))
			}
		}
	}
	if c.c != nil {
		if err := r.deleteContainer(lctx, c, taskDeleted); err != nil && !errdefs.IsNotFound(err) {
			fmt.Fprintf(e.cfg.Log, "corral: deleting container %s: %v\n", c.id, oneLine(err))
		}
	}
	_ = os.Remove(c.ctlFile)
	_ = os.Remove(filepath.Dir(c.ctlFile))
	if e.client != nil {
		_ = e.client.LeasesService().Delete(ctx, c.lease)
	}
}

// deleteContainer deletes c's container record and its snapshot. When
// destroy has just deleted its task (taskDeleted) it removes the snapshot
// (its key is the container's id, withNewSnapshot) and the record
// directly, as Container.Delete with WithSnapshotCleanup does after asking
// containerd whether a task is left and reading the record back (two
// round trips that cannot change the outcome then); otherwise it goes
// through Container.Delete, which refuses while a task is left.
func (r *runner) deleteContainer(ctx context.Context, c *container, taskDeleted bool) error {
	if !taskDeleted {
		return c.c.Delete(ctx, containerd.WithSnapshotCleanup)
	}
	client := r.e.client
	if err := client.SnapshotService(snapshotter).Remove(ctx, c.id); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("removing snapshot %s: %w", c.id, err)
	}
	return client.ContainerService().Delete(ctx, c.id)
}

// stop makes every later start fail with err and kills the containers
// running now (their calls return err, not their output).
func (r *runner) stop(err error) {
	r.mu.Lock()
	if r.stopped == nil {
		r.stopped = err
	}
	var kill []*container
	for c := range r.running {
		kill = append(kill, c)
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.e.Context(context.Background()), 10*time.Second)
	defer cancel()
	for _, c := range kill {
		_ = c.task.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll)
	}
}

// track adds c to the running containers, unless the runner stopped.
func (r *runner) track(c *container) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped != nil {
		return r.stopped
	}
	r.running[c] = struct{}{}
	return nil
}

// untrack removes c and returns the error the runner stopped with, if
// it stopped while c ran.
func (r *runner) untrack(c *container) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, c)
	return r.stopped
}

// start hands req to the container (written to its control file before
// the start, or sent on the FIFO of a container started ahead) and waits
// for the exit, the timeout, the output cap or ctx; the timeout counts
// from the request. When the runner is
// stopped while the container runs, the container is killed and the
// runner's error returned without the output.
func (r *runner) start(ctx context.Context, c *container, req initctl.Request, stdout, stderr io.Writer) (*Result, error) {
	lim := r.limits
	req.DeadlineMS = (lim.Timeout + InitGrace).Milliseconds()
	data, err := initctl.Encode(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errdefs.ErrInvalidArgument, err)
	}
	if !c.started {
		if err := os.WriteFile(c.ctlFile, data, 0o644); err != nil {
			return nil, fmt.Errorf("writing the control file: %w", err)
		}
		data = nil
	}
	if err := r.track(c); err != nil {
		return nil, err
	}
	res, err := r.wait(ctx, c, req.Argv, data, stdout, stderr)
	if stopped := r.untrack(c); stopped != nil {
		return nil, stopped
	}
	return res, err
}

// wait starts c, or sends it data when it was started ahead, and waits
// (see start).
func (r *runner) wait(ctx context.Context, c *container, argv []string, data []byte, stdout, stderr io.Writer) (*Result, error) {
	lim := r.limits
	c.out.setTarget(stdout)
	c.errw.setTarget(stderr)
	defer c.out.setTarget(nil)
	defer c.errw.setTarget(nil)
	cctx := leases.WithLease(r.e.Context(context.Background()), c.lease.ID)

	res := &Result{Argv: argv}
	// Before the request: a container made ahead whose status already
	// came ran nothing. Either its init died while it waited, or the
	// stream that would carry its exit broke (containerd restarted since
	// its creation: the task lives on in its shim, but this call could
	// never learn its exit and would report containerd gone, while the
	// tool ran and wrote, then be repeated). The call runs on a new one.
	select {
	case st := <-c.statusC:
		c.statusC = exited(st)
		if err := st.Error(); err != nil {
			return nil, &notStartedError{fmt.Errorf("container %s: %w: lost its task's status before the call: %w", c.id, errStatusLost, err)}
		}
		return nil, &notStartedError{fmt.Errorf("container %s: its init exited (status %d) before the call", c.id, st.ExitCode())}
	default:
	}
	// kill ends every process of the container and waits for its exit
	// status (c.killed: within killWait, else the error). It reports
	// whether a process of the container was still there to kill: false
	// only where the supervisor sees the container's processes (below)
	// and found its cgroups empty, the container having ended before the
	// kill, its exit status not yet delivered.
	kill := func() (containerd.ExitStatus, bool, time.Time, error) {
		// SIGKILL to every process: no process in the container can
		// catch it, corral-init included. The shim runs the runtime's
		// kill, which a busy host can delay by seconds: where the
		// container's cgroups hold its own processes (runc, crun; not a
		// gVisor sandbox) they are killed here too, at once; the shim
		// still reports the exit.
		ran := true
		if r.e.oci.info.StartAhead {
			found, alive := r.e.cgroups.killProcs(r.e.cfg.Namespace, c.id)
			ran = !found || alive > 0
		}
		walked := time.Now() // what ran was seen by now
		st, err := c.killed(cctx)
		return st, ran, walked, err
	}
	start := time.Now()
	if c.started {
		if err := c.send(ctx, data); err != nil {
			if errors.Is(err, errRequestCut) {
				// The call ended while its request was written: the
				// init may have read part of it. Killed and reaped
				// before the call returns, so nothing runs after.
				if st, _, _, kerr := kill(); kerr != nil {
					err = fmt.Errorf("%w; %w", err, kerr)
				} else {
					c.statusC = exited(st)
					c.exited = true
				}
			}
			return nil, err
		}
	} else if err := r.startTask(ctx, cctx, c); err != nil {
		var silent *shimSilentError
		if errors.As(err, &silent) || ctx.Err() != nil {
			return nil, err
		}
		err = r.e.wrapContainerd("starting task "+c.id, err)
		// A start refused because the task had already stopped (or is
		// gone) ran nothing: the runtime opens the exec FIFO that lets
		// the init exec the tool only after it checked the init lives.
		// Bounded: the shim that refused may stall next (statusWait).
		stctx, cancel := context.WithTimeout(cctx, statusWait)
		st, serr := c.task.Status(stctx)
		cancel()
		if errdefs.IsNotFound(err) || errdefs.IsNotFound(serr) || (serr == nil && st.Status == containerd.Stopped) {
			return nil, &notStartedError{err}
		}
		return nil, err
	}
	timer := time.NewTimer(lim.Timeout)
	defer timer.Stop()
	var status containerd.ExitStatus
	var werr error
	endedEarly := false // the container ended before the timeout; its exit status came after it
	select {
	case status = <-c.statusC:
	case <-timer.C:
		var ran bool
		var walked time.Time
		status, ran, walked, werr = kill()
		var timedOut bool
		timedOut, endedEarly = timeoutVerdict(ran, walked.Sub(start), lim.Timeout)
		if timedOut {
			res.LimitsHit = append(res.LimitsHit, LimitTimeout)
		}
	case <-c.over:
		status, _, _, werr = kill()
		res.LimitsHit = append(res.LimitsHit, LimitOutput)
	case <-ctx.Done():
		status, _, _, werr = kill()
	}
	if werr != nil {
		return nil, werr
	}
	res.Duration = time.Since(start)
	code, _, err := status.Result()
	if err != nil {
		return nil, r.e.wrapContainerd("waiting for task "+c.id, err)
	}
	c.exited = true
	res.ExitCode = int(code)
	if res.ExitCode == 128+int(syscall.SIGKILL) && res.Duration >= lim.Timeout && !endedEarly && !slices.Contains(res.LimitsHit, LimitTimeout) {
		// corral-init's own deadline came first (a busy supervisor).
		res.LimitsHit = append(res.LimitsHit, LimitTimeout)
	}
	// The cgroup exists until the task is deleted.
	if r.e.cgroups.counter(r.e.cfg.Namespace, c.id, "memory", "memory.oom_control", "memory.events", "oom_kill") > 0 {
		res.LimitsHit = append(res.LimitsHit, LimitMemory)
	}
	if r.e.cgroups.counter(r.e.cfg.Namespace, c.id, "pids", "pids.events", "pids.events", "max") > 0 {
		res.LimitsHit = append(res.LimitsHit, LimitPids)
	}
	// The exit can arrive before the output copy has finished.
	if err := c.outputCopied(); err != nil {
		return nil, err
	}
	if r.layout.AreaFull() {
		res.LimitsHit = append(res.LimitsHit, LimitWriteArea)
	}
	res.Stdout, res.StdoutTruncated = c.out.bytes()
	res.Stderr, res.StderrTruncated = c.errw.bytes()
	// A tool that wrote past the cap and exited before the copy reached
	// it was cut all the same: the limit is hit whichever came first.
	if (res.StdoutTruncated || res.StderrTruncated) && !slices.Contains(res.LimitsHit, LimitOutput) {
		res.LimitsHit = append(res.LimitsHit, LimitOutput)
	}
	if slices.Contains(res.LimitsHit, LimitOutput) {
		// Whether the tool's own exit or the kill lands first is a race
		// between the tool and the output copy (a tool whose output fits
		// the pipe buffers exits before the copy passes the cap): the
		// result reports the kill either way, so the same call gives the
		// same result standalone, through the daemon, and on a loaded host.
		res.ExitCode = 128 + int(syscall.SIGKILL)
	}
	// The order the limits were seen in is a race (a tool flooding its
	// output at its deadline); the result lists them in limitOrder's.
	slices.SortFunc(res.LimitsHit, func(a, b string) int {
		return slices.Index(limitOrder, a) - slices.Index(limitOrder, b)
	})
	if ctx.Err() != nil {
		return res, fmt.Errorf("invocation %s: %w", c.id, context.Cause(ctx))
	}
	return res, nil
}

// InitGrace is how long after the profile's timeout corral-init kills
// every process of the container itself (initctl.Request.DeadlineMS): the
// supervisor's kill at the timeout normally comes first and reports it;
// corral-init's holds when the supervisor is gone.
const InitGrace = 2 * time.Second
