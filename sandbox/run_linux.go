package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
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

// cappedWriter keeps at most limit bytes and forwards them to w; past the
// cap it drops the rest (so the copy never blocks) and signals once.
type cappedWriter struct {
	mu        sync.Mutex
	w         io.Writer
	buf       bytes.Buffer
	limit     int64
	truncated bool
	over      chan struct{}
	once      *sync.Once
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

// run creates a fresh container for argv, runs it to completion under the
// limits and removes it. stdout and stderr (may be nil) receive the output
// as it arrives, up to the cap.
func (s *Session) run(ctx context.Context, argv []string, stdout, stderr io.Writer) (res *Result, retErr error) {
	e := s.exec
	lim := s.limits
	ctx = e.Context(ctx)
	id := fmt.Sprintf("corral-%s-%d", s.ID, s.seq.Add(1))
	labels := map[string]string{LabelOwner: "corral", LabelSession: s.ID, LabelStateDir: e.cfg.StateDir, LabelPID: strconv.Itoa(os.Getpid())}

	ctx, done, err := e.client.WithLease(ctx, leases.WithExpiration(lim.Timeout+10*time.Minute), leases.WithLabels(labels))
	if err != nil {
		return nil, fmt.Errorf("creating lease: %w", err)
	}
	cleanupCtx := context.WithoutCancel(ctx)
	defer done(cleanupCtx)

	img, err := e.image(ctx)
	if err != nil {
		return nil, err
	}
	container, err := e.client.NewContainer(ctx, id,
		containerd.WithSnapshotter(snapshotter),
		containerd.WithNewSnapshotView(id, img),
		containerd.WithContainerLabels(labels),
		containerd.WithRuntime(e.cfg.Runtime, e.runtimeOptions()),
		containerd.WithNewSpec(specOpts(specInput{
			Namespace: e.cfg.Namespace, ID: id, Argv: argv, Limits: lim,
			Seccomp: s.seccomp, Mounts: s.layout.Mounts(),
		})...),
	)
	if err != nil {
		return nil, fmt.Errorf("creating container %s: %w", id, err)
	}
	defer func() {
		if err := container.Delete(cleanupCtx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) && retErr == nil {
			retErr = fmt.Errorf("deleting container %s: %w", id, err)
		}
	}()

	over := make(chan struct{})
	once := &sync.Once{}
	out := &cappedWriter{w: stdout, limit: lim.OutputBytes, over: over, once: once}
	errw := &cappedWriter{w: stderr, limit: lim.OutputBytes, over: over, once: once}
	fifoDir := filepath.Join(e.cfg.StateDir, "fifo")
	if err := os.MkdirAll(fifoDir, 0o700); err != nil {
		return nil, err
	}
	task, err := container.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, out, errw), cio.WithFIFODir(fifoDir)))
	if err != nil {
		return nil, fmt.Errorf("creating task %s: %w", id, err)
	}
	taskDeleted := false
	defer func() {
		if !taskDeleted {
			_, _ = task.Delete(cleanupCtx, containerd.WithProcessKill)
		}
	}()
	statusC, err := task.Wait(ctx)
	if err != nil {
		return nil, fmt.Errorf("waiting on task %s: %w", id, err)
	}
	res = &Result{Argv: argv}
	start := time.Now()
	if err := task.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting task %s: %w", id, err)
	}
	timer := time.NewTimer(lim.Timeout)
	defer timer.Stop()
	kill := func(limit string) containerd.ExitStatus {
		if limit != "" {
			res.LimitsHit = append(res.LimitsHit, limit)
		}
		// The tool is PID 1 and ignores SIGTERM: kill outright.
		_ = task.Kill(cleanupCtx, syscall.SIGKILL, containerd.WithKillAll)
		return <-statusC
	}
	var status containerd.ExitStatus
	select {
	case status = <-statusC:
	case <-timer.C:
		status = kill(LimitTimeout)
	case <-over:
		status = kill(LimitOutput)
	case <-ctx.Done():
		status = kill("")
	}
	res.Duration = time.Since(start)
	code, _, err := status.Result()
	if err != nil {
		return nil, fmt.Errorf("task %s exit status: %w", id, err)
	}
	res.ExitCode = int(code)
	// The cgroup still exists until the task is deleted.
	if n := cgroupCounter(e.cfg.Namespace, id, "memory", "memory.oom_control", "memory.events", "oom_kill"); n > 0 {
		res.LimitsHit = append(res.LimitsHit, LimitMemory)
	}
	if n := cgroupCounter(e.cfg.Namespace, id, "pids", "pids.events", "pids.events", "max"); n > 0 {
		res.LimitsHit = append(res.LimitsHit, LimitPids)
	}
	// Delete waits for the IO copy to finish.
	if _, err := task.Delete(cleanupCtx); err != nil && !errdefs.IsNotFound(err) {
		return nil, fmt.Errorf("deleting task %s: %w", id, err)
	}
	taskDeleted = true
	if s.layout.AreaFull() {
		res.LimitsHit = append(res.LimitsHit, LimitWriteArea)
	}
	res.Stdout, res.StdoutTruncated = out.bytes()
	res.Stderr, res.StderrTruncated = errw.bytes()
	if ctx.Err() != nil {
		return res, fmt.Errorf("invocation %s: %w", id, ctx.Err())
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
