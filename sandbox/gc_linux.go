package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/mounts"
)

// LabelPID is the pid of the supervisor that created a container; gc
// leaves alone what a live supervisor owns.
const LabelPID = LabelPrefix + "pid"

// GCReport lists what GC removed.
type GCReport struct {
	Containers []string `json:"containers"`
	Leases     []string `json:"leases"`
	Mounts     []string `json:"mounts"`
	Sessions   []string `json:"sessions"`
}

// alive reports whether a process with this pid exists.
func alive(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	err = syscall.Kill(n, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// GC removes what a crashed supervisor of this state directory left
// behind: containers (killing their tasks, deleting their snapshots),
// leases, host mounts found with mountinfo under the state directory, and
// session directories. Containers and sessions whose supervisor is still
// running, and persistent sessions (CreateSession), are kept unless force
// is set.
func (e *Executor) GC(ctx context.Context, force bool) (*GCReport, error) {
	ctx = e.Context(ctx)
	rep := &GCReport{}
	filter := fmt.Sprintf("labels.%q==corral,labels.%q==%q", LabelOwner, LabelStateDir, e.cfg.StateDir)
	cs, err := e.client.Containers(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	var errs []error
	for _, c := range cs {
		labels, err := c.Labels(ctx)
		if err != nil {
			continue
		}
		if !force && alive(labels[LabelPID]) {
			continue
		}
		if err := reap(ctx, c); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Containers = append(rep.Containers, c.ID())
	}
	ls, err := e.client.LeasesService().List(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("listing leases: %w", err)
	}
	for _, l := range ls {
		if !force && alive(l.Labels[LabelPID]) {
			continue
		}
		if err := e.client.LeasesService().Delete(ctx, l, leases.SynchronousDelete); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting lease %s: %w", l.ID, err))
			continue
		}
		rep.Leases = append(rep.Leases, l.ID)
	}
	sessions := filepath.Join(e.cfg.StateDir, "sessions")
	entries, _ := os.ReadDir(sessions)
	for _, d := range entries {
		dir := filepath.Join(sessions, d.Name())
		// A persistent session outlives every process: only
		// `corral session rm` (or --force) removes it.
		if !force && persistent(dir) {
			continue
		}
		pid, _ := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if !force && alive(string(pid)) {
			continue
		}
		found, err := mounts.Sweep(dir)
		rep.Mounts = append(rep.Mounts, found...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Sessions = append(rep.Sessions, d.Name())
	}
	return rep, errors.Join(errs...)
}

// reap kills and deletes a leftover container. The task's IO is attached
// to a discard sink first: without a reader the task can block forever on
// its FIFOs and task.Delete waits (NOTES-containerd.md).
func reap(ctx context.Context, c containerd.Container) error {
	task, err := c.Task(ctx, cio.NewAttach(cio.WithStreams(nil, io.Discard, io.Discard)))
	if err != nil && !errdefs.IsNotFound(err) {
		// The FIFOs went with the crashed supervisor's state: take the task
		// without IO; Kill and Delete still work, Delete only waits longer.
		task, err = c.Task(ctx, nil)
	}
	if err == nil {
		_ = task.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll)
		if ch, err := task.Wait(ctx); err == nil {
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
			}
		}
		if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("deleting task of %s: %w", c.ID(), err)
		}
	} else if !errdefs.IsNotFound(err) {
		return fmt.Errorf("getting task of %s: %w", c.ID(), err)
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("deleting container %s: %w", c.ID(), err)
	}
	return nil
}
