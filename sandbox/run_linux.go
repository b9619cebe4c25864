package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/initctl"
)

// Limit names, as reported in Result.LimitsHit.
const (
	LimitTimeout   = "timeout"    // the wall-clock timeout killed the tool
	LimitMemory    = "memory"     // the OOM killer killed a process
	LimitPids      = "pids"       // a fork or clone failed at pids.max
	LimitOutput    = "output"     // stdout or stderr passed its cap; the tool was killed
	LimitWriteArea = "write_area" // the write area's tmpfs is full (ENOSPC)
)

// Result is one invocation's outcome, shaped after os/exec: a non-zero
// exit is a result, not an error.
type Result struct {
	// Argv is what ran (the normalized argv from the allowlist).
	Argv []string `json:"argv"`
	// ExitCode is the tool's exit status; 128+N when killed by signal N.
	ExitCode int `json:"exit_code"`
	// Duration is the wall time from task start to exit.
	Duration time.Duration `json:"duration_ns"`
	// LimitsHit names each limit reached (Limit* constants).
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
		_, _ = c.w.Write(p)
	}
	return n, nil
}

func (c *cappedWriter) bytes() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes()), c.truncated
}

// container is one created (namespaces, mounts, seccomp filter, cgroup)
// but not yet started container. Its process is corral-init, which reads
// what to run from ctlFile at the start; so it can be made before the call
// arrives.
type container struct {
	id        string
	c         containerd.Container
	task      containerd.Task
	statusC   <-chan containerd.ExitStatus
	out, errw *cappedWriter
	over      chan struct{}
	ctlFile   string // the host path of its control file
	lease     leases.Lease
}

// planFor returns the plan of the session's container id.
func (s *Session) planFor(id string) containerPlan {
	return containerPlan{
		ID: id, Namespace: s.exec.cfg.Namespace, Limits: s.limits, Seccomp: s.seccomp,
		Binds: s.layout.Binds(), Ctl: s.layout.Ctl, Init: s.init,
	}
}

// create makes a container for this session from its plan, on the image
// the session resolved once (a fresh writable snapshot, so runc can make
// the mount points any image lacks; the spec's root is read-only).
func (s *Session) create() (_ *container, retErr error) {
	e := s.exec
	lim := s.limits
	ctx := e.Context(context.Background())
	id := fmt.Sprintf("corral-%s-%d", s.ID, s.seq.Add(1))
	labels := map[string]string{LabelOwner: "corral", LabelSession: s.ID, LabelStateDir: e.cfg.StateDir, LabelPID: strconv.Itoa(os.Getpid())}

	// The lease holds the snapshot until the container is deleted; its
	// expiry lets containerd's GC reclaim it after a crash.
	l, err := e.client.LeasesService().Create(ctx, leases.WithRandomID(), leases.WithExpiration(lim.Timeout+30*time.Minute), leases.WithLabels(labels))
	if err != nil {
		return nil, fmt.Errorf("creating lease: %w", err)
	}
	ctx = leases.WithLease(ctx, l.ID)
	c := &container{id: id, lease: l, ctlFile: filepath.Join(s.layout.Ctl, id)}
	defer func() {
		if retErr != nil {
			s.destroy(c)
		}
	}()
	cc, err := e.client.NewContainer(ctx, id,
		containerd.WithSnapshotter(snapshotter),
		containerd.WithNewSnapshot(id, s.image),
		containerd.WithContainerLabels(labels),
		containerd.WithRuntime(e.cfg.Runtime, e.runtimeOptions()),
		containerd.WithNewSpec(specOpts(s.planFor(id))...),
	)
	if err != nil {
		return nil, fmt.Errorf("creating container %s: %w", id, err)
	}
	c.c = cc

	c.over = make(chan struct{})
	once := &sync.Once{}
	c.out = &cappedWriter{limit: lim.OutputBytes, over: c.over, once: once}
	c.errw = &cappedWriter{limit: lim.OutputBytes, over: c.over, once: once}
	fifoDir := filepath.Join(e.cfg.StateDir, "fifo")
	if err := os.MkdirAll(fifoDir, 0o700); err != nil {
		return nil, err
	}
	task, err := cc.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, c.out, c.errw), cio.WithFIFODir(fifoDir)))
	if err != nil {
		return nil, fmt.Errorf("creating task %s: %w", id, err)
	}
	c.task = task
	// Wait before Start, so the exit can never be missed.
	if c.statusC, err = task.Wait(ctx); err != nil {
		return nil, fmt.Errorf("waiting on task %s: %w", id, err)
	}
	return c, nil
}

// destroy kills and deletes the container, its snapshot, its control file
// and its lease, tolerating what is already gone.
func (s *Session) destroy(c *container) {
	ctx := leases.WithLease(s.exec.Context(context.Background()), c.lease.ID)
	if c.task != nil {
		// A created but never started task cannot be deleted directly.
		_, _ = c.task.Delete(ctx, containerd.WithProcessKill)
	}
	if c.c != nil {
		if err := c.c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
			fmt.Fprintf(s.exec.cfg.Log, "corral: deleting container %s: %v\n", c.id, err)
		}
	}
	_ = os.Remove(c.ctlFile)
	_ = s.exec.client.LeasesService().Delete(s.exec.Context(context.Background()), c.lease)
}

// run runs req in a fresh container: the one created ahead when there is
// one, else one made now. The used container is deleted, and the next one
// created, after the result is returned (Close waits for that).
func (s *Session) run(ctx context.Context, req initctl.Request, stdout, stderr io.Writer) (*Result, error) {
	c := s.takeReady()
	if c == nil {
		var err error
		if c, err = s.create(); err != nil {
			return nil, err
		}
	}
	res, err := s.start(ctx, c, req, stdout, stderr)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.destroy(c)
		s.refill()
	}()
	return res, err
}

// takeReady returns the container created ahead, if any.
func (s *Session) takeReady() *container {
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	c := s.ready
	s.ready = nil
	return c
}

// refill creates the next container ahead of the call, unless the
// executor is Cold or one is waiting. Failures are not fatal: the next
// call creates one on its own path and reports the error then.
func (s *Session) refill() {
	if s.exec.cfg.Cold {
		return
	}
	s.readyMu.Lock()
	if s.ready != nil || s.closing {
		s.readyMu.Unlock()
		return
	}
	s.readyMu.Unlock()
	c, err := s.create()
	if err != nil {
		return
	}
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	if s.ready != nil || s.closing {
		s.destroy(c) // still inside the tracked background goroutine
		return
	}
	s.ready = c
}

// start writes req to the container's control file, starts it and waits
// for the exit, the timeout, the output cap or ctx.
func (s *Session) start(ctx context.Context, c *container, req initctl.Request, stdout, stderr io.Writer) (*Result, error) {
	lim := s.limits
	data, err := initctl.Encode(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errdefs.ErrInvalidArgument, err)
	}
	if err := os.WriteFile(c.ctlFile, data, 0o644); err != nil {
		return nil, fmt.Errorf("writing the control file: %w", err)
	}
	argv := req.Argv
	c.out.setTarget(stdout)
	c.errw.setTarget(stderr)
	cctx := leases.WithLease(s.exec.Context(context.Background()), c.lease.ID)

	res := &Result{Argv: argv}
	start := time.Now()
	if err := c.task.Start(cctx); err != nil {
		return nil, fmt.Errorf("starting task %s: %w", c.id, err)
	}
	timer := time.NewTimer(lim.Timeout)
	defer timer.Stop()
	kill := func(limit string) containerd.ExitStatus {
		if limit != "" {
			res.LimitsHit = append(res.LimitsHit, limit)
		}
		// The tool is PID 1 and ignores SIGTERM: kill outright.
		_ = c.task.Kill(cctx, syscall.SIGKILL, containerd.WithKillAll)
		return <-c.statusC
	}
	var status containerd.ExitStatus
	select {
	case status = <-c.statusC:
	case <-timer.C:
		status = kill(LimitTimeout)
	case <-c.over:
		status = kill(LimitOutput)
	case <-ctx.Done():
		status = kill("")
	}
	res.Duration = time.Since(start)
	code, _, err := status.Result()
	if err != nil {
		return nil, fmt.Errorf("task %s exit status: %w", c.id, err)
	}
	res.ExitCode = int(code)
	// The cgroup exists until the task is deleted.
	if cgroupCounter(s.exec.cfg.Namespace, c.id, "memory", "memory.oom_control", "memory.events", "oom_kill") > 0 {
		res.LimitsHit = append(res.LimitsHit, LimitMemory)
	}
	if cgroupCounter(s.exec.cfg.Namespace, c.id, "pids", "pids.events", "pids.events", "max") > 0 {
		res.LimitsHit = append(res.LimitsHit, LimitPids)
	}
	// The exit can arrive before the output copy has finished.
	c.task.IO().Wait()
	if s.layout.AreaFull() {
		res.LimitsHit = append(res.LimitsHit, LimitWriteArea)
	}
	res.Stdout, res.StdoutTruncated = c.out.bytes()
	res.Stderr, res.StderrTruncated = c.errw.bytes()
	// A tool that wrote past the cap and exited before the copy reached
	// it was cut all the same: the limit is hit whichever came first.
	if (res.StdoutTruncated || res.StderrTruncated) && !slices.Contains(res.LimitsHit, LimitOutput) {
		res.LimitsHit = append(res.LimitsHit, LimitOutput)
	}
	c.out.setTarget(nil)
	c.errw.setTarget(nil)
	if ctx.Err() != nil {
		return res, fmt.Errorf("invocation %s: %w", c.id, ctx.Err())
	}
	return res, nil
}

// cgroupCounter reads one counter of the container's cgroup from the host:
// v1 file under /sys/fs/cgroup/<controller>/<ns>/<id>/, or the v2 file
// under /sys/fs/cgroup/<ns>/<id>/. Lines are "key value". Missing files
// read as 0.
func cgroupCounter(ns, id, controller, v1File, v2File, key string) int64 {
	var p string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		p = filepath.Join("/sys/fs/cgroup", ns, id, v2File)
	} else {
		p = filepath.Join("/sys/fs/cgroup", controller, ns, id, v1File)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

var errClosed = errors.New("session is closed")
