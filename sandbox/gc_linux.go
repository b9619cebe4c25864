package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/initctl"
	"github.com/corral-sandbox/corral/internal/testhook"
	"github.com/corral-sandbox/corral/mounts"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// GCReport lists what a sweep or GC removed.
type GCReport struct {
	Containers []string `json:"containers"`
	Leases     []string `json:"leases"`
	// FIFODirs are stdio FIFO directories of containers that are gone.
	FIFODirs []string `json:"fifo_dirs"`
	Mounts   []string `json:"mounts"`
	// Cgroups are the container ids whose cgroups no container record
	// named (left by a runtime's delete, or by a crash before the
	// cleanup that follows it): removed, with what ran in them.
	Cgroups []string `json:"cgroups"`
	// RuntimeStates are the container ids whose state in the runtime's
	// root was all that was left of them (a runtime's delete cut short):
	// its files removed (sweepRuntimeStates).
	RuntimeStates []string `json:"runtime_states"`
	// Sessions are the session directories removed: ephemeral sessions
	// of dead processes and half-made ones (no complete record, nobody
	// holding them).
	Sessions []string `json:"sessions"`
	// Pruned are the expired persistent sessions removed, each with the
	// patch file that keeps its change set.
	Pruned []Ended `json:"pruned"`
}

func (r *GCReport) add(o *GCReport) {
	r.Containers = append(r.Containers, o.Containers...)
	r.Leases = append(r.Leases, o.Leases...)
	r.FIFODirs = append(r.FIFODirs, o.FIFODirs...)
	r.Mounts = append(r.Mounts, o.Mounts...)
	r.Cgroups = append(r.Cgroups, o.Cgroups...)
	r.RuntimeStates = append(r.RuntimeStates, o.RuntimeStates...)
	r.Sessions = append(r.Sessions, o.Sessions...)
	r.Pruned = append(r.Pruned, o.Pruned...)
}

// timeNow is the creation time of records.
func timeNow() time.Time { return time.Now().UTC().Truncate(time.Second) }

// ownerLabels are the labels of a container or lease this process
// creates now, overdue after deadline.
func (e *Executor) ownerLabels(deadline time.Time) map[string]string {
	pid := os.Getpid()
	return map[string]string{
		LabelOwner: "corral", LabelStateDir: e.cfg.StateDir,
		LabelPID: strconv.Itoa(pid), LabelPIDStart: processStart(pid),
		LabelDeadline: strconv.FormatInt(deadline.Unix(), 10),
	}
}

// processStart returns field 22 of /proc/PID/stat (the start time in
// clock ticks since boot, proc(5)), "" when unreadable.
func processStart(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces; it ends at the last ')'.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// alive reports whether the process pid exists and, when start is
// known, is the one that started then (not a reuse of its pid).
func alive(pid, start string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	err = syscall.Kill(n, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return start == "" || processStart(n) == "" || processStart(n) == start
}

// overdue reports whether what carries labels may be reaped: its owner
// is dead, or its deadline passed (force: always).
func overdue(labels map[string]string, force bool, now time.Time) bool {
	if force || !alive(labels[LabelPID], labels[LabelPIDStart]) {
		return true
	}
	if d, err := strconv.ParseInt(labels[LabelDeadline], 10, 64); err == nil && now.Unix() > d {
		return true
	}
	return false
}

// GC removes (and reports, with what the sweeps when this executor
// started removed) what crashed corral processes of this state directory left
// behind: in containerd (SweepContainers: containers, their tasks and
// snapshots, leases, FIFO directories) and on the host (Sweep: host
// mounts found with mountinfo, ephemeral and half-made session
// directories, expired sessions with their change sets kept). What a
// live process owns is kept, and so are persistent sessions, unless
// force is set: then everything goes, persistent sessions included.
func (e *Executor) GC(ctx context.Context, force bool) (*GCReport, error) {
	rep := &GCReport{}
	defer func() {
		// What this process's own start swept is part of the report.
		swept := e.takeSwept()
		swept.add(rep)
		*rep = swept
	}()
	var errs []error
	if _, err := e.Connect(ctx); err != nil {
		errs = append(errs, err)
	} else {
		r, err := e.sweepContainers(ctx, force, cgroupSettle)
		rep.add(r)
		errs = append(errs, err)
	}
	r, err := e.sweepSessions(ctx, force)
	rep.add(r)
	errs = append(errs, err)
	return rep, errors.Join(errs...)
}

// SweepContainers reaps the containers and leases of this state
// directory whose owner is dead or whose deadline passed, the FIFO
// directories of containers that are gone, and the cgroups of the
// namespace that no container names (sweepCgroups), and the runtime's
// state of containers of which nothing else is left
// (sweepRuntimeStates). Every Connect runs it once; it costs two list
// calls, a read of the namespace's cgroup directories and one of the
// runtime's state root when nothing is overdue (a container list more
// for each of the last two when another container is there).
func (e *Executor) SweepContainers(ctx context.Context) (*GCReport, error) {
	if _, err := e.Connect(ctx); err != nil {
		return &GCReport{}, err
	}
	return e.sweepContainers(ctx, false, strayCgroupWait)
}

// sweepRounds bounds the rounds of listings (containers, then leases) of
// one sweepContainers: the first, and one more after each that found
// something overdue.
const sweepRounds = 4

// sweepSettle is how old the newest overdue container or lease a sweep's
// round found must be before the next round lists again: a dead owner's
// requests in flight when it died are served by then.
const sweepSettle = 2 * time.Second

// HookSweepListed is the testhook point of sweepContainers at the end of
// its first round (containers listed and reaped, then leases): a test
// makes there what a dead owner's requests in flight make after the
// listings.
const HookSweepListed = "sandbox: sweep containers: listed"

// strayCgroupWait bounds how long the sweeps of a start and of the daemon
// (SweepContainers) wait for each cgroup no record names (sweepCgroups)
// to go once what ran in it is killed; gc waits cgroupSettle. A cgroup
// that stays (a process out of this process's reach: another pid
// namespace, uninterruptible sleep) then costs each start that much, not
// cgroupSettle; the next sweep tries again.
const strayCgroupWait = 250 * time.Millisecond

// sweepContainers is SweepContainers (force: every container, as GC
// --force), waiting at most cgroupWait for each cgroup no record names.
func (e *Executor) sweepContainers(ctx context.Context, force bool, cgroupWait time.Duration) (*GCReport, error) {
	ctx = e.Context(ctx)
	rep := &GCReport{}
	filter := fmt.Sprintf("labels.%q==corral,labels.%q==%q", LabelOwner, LabelStateDir, e.cfg.StateDir)
	now := time.Now()
	live, reaped, seenLease := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var errs []error
	// A dead owner's requests may still land after the listings:
	// containerd serves a request its client sent before dying (its
	// pool's refill: a lease, then a container record) once it reads it,
	// and commits what it makes with the owner's labels. So while a
	// round finds something overdue, another round lists containers and
	// leases again once that is reaped and the newest of it is
	// sweepSettle old (the owner died after making it, and what it sent
	// before dying lands soon after); it stops at a round with nothing
	// new overdue, or after sweepRounds.
	var newest time.Time
	for round := 0; round < sweepRounds; round++ {
		if wait := sweepSettle - time.Since(newest); round > 0 && wait > 0 {
			select {
			case <-ctx.Done():
				return rep, errors.Join(append(errs, ctx.Err())...)
			case <-time.After(wait):
			}
		}
		cs, err := e.client.Containers(ctx, filter)
		if err != nil {
			return rep, errors.Join(append(errs, e.wrapContainerd("listing containers", err))...)
		}
		found := false
		for _, c := range cs {
			if live[c.ID()] || reaped[c.ID()] {
				continue
			}
			// The listing's metadata: labels never change after a
			// container is made.
			info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata)
			if err != nil || !overdue(info.Labels, force, now) {
				live[c.ID()] = true
				continue
			}
			found = true
			if info.CreatedAt.After(newest) {
				newest = info.CreatedAt
			}
			if err := e.reap(ctx, c); err != nil {
				errs = append(errs, err)
				live[c.ID()] = true
				continue
			}
			rep.Containers = append(rep.Containers, c.ID())
			reaped[c.ID()] = true
		}
		if round == 0 {
			// Tasks whose record is gone (a record deleted while its
			// create was in flight, by an older corral's gc, or by
			// hand): before the leases, whose deletion lets containerd
			// collect the snapshot such a task still runs on.
			orphans, err := e.sweepOrphanShims(ctx)
			for _, id := range orphans {
				if !reaped[id] {
					rep.Containers = append(rep.Containers, id)
					reaped[id] = true
				}
			}
			errs = append(errs, err)
		}
		ls, err := e.client.LeasesService().List(ctx, filter)
		if err != nil {
			return rep, errors.Join(append(errs, e.wrapContainerd("listing leases", err))...)
		}
		for _, l := range ls {
			if seenLease[l.ID] || !overdue(l.Labels, force, now) {
				continue
			}
			seenLease[l.ID], found = true, true
			if l.CreatedAt.After(newest) {
				newest = l.CreatedAt
			}
			if err := e.client.LeasesService().Delete(ctx, l, leases.SynchronousDelete); err != nil && !errdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting lease %s: %w", l.ID, err))
				continue
			}
			rep.Leases = append(rep.Leases, l.ID)
		}
		if round == 0 {
			if err := testhook.Point(HookSweepListed); err != nil {
				return rep, err
			}
		}
		if !found {
			break
		}
	}
	rep.FIFODirs = e.sweepFIFOs(live, reaped, now)
	cgroups, err := e.sweepCgroups(ctx, cgroupWait)
	rep.Cgroups = cgroups
	errs = append(errs, err)
	states, err := e.sweepRuntimeStates(ctx)
	rep.RuntimeStates = states
	errs = append(errs, err)
	return rep, errors.Join(errs...)
}

// sweepRuntimeStates removes the runtime's state (runtimeState) of the
// containers in this executor's runtime root and namespace of which
// nothing is left anywhere else, and returns their ids: no container
// record, no task in containerd's task list, no shim process (findShims:
// daemons and actions), no cgroup (cgroups.ids) and no process with the
// id among its arguments (a runtime's delete that outlived the shim
// action containerd killed). Such state is what a runtime's delete cut
// short left: containerd bounds its cleanup after a dead shim
// (io.containerd.timeout.shim.cleanup, 5 s by default); nothing else ever
// looks there again. The files go by hand, never through the runtime's
// `delete --force`: runsc's kills the sandbox and gofer pids its state
// recorded without checking that they are still those processes, and a
// state found days later names pids reused since. The states are listed
// before the records and tasks: a runtime makes a container's state in
// its create, after containerd made the record and the shim. Nothing is
// done in a Pod (Config.InPod): the root is the node's, and the node's
// processes and tasks are not all this process's to see.
func (e *Executor) sweepRuntimeStates(ctx context.Context) ([]string, error) {
	if e.oci == nil || e.oci.root == "" || e.cfg.InPod {
		return nil, nil
	}
	dir := filepath.Join(e.oci.root, e.cfg.Namespace)
	ids := runtimeStateIDs(dir)
	if len(ids) == 0 {
		return nil, nil
	}
	// Each step only takes ids away: the cheap ones first, so that a
	// sweep with nothing stale (live containers only) ends after the
	// record listing, and containerd's task list (a State call to each
	// shim) is asked only for what is left.
	if err := e.dropReachable(ctx, ids); err != nil {
		return nil, err
	}
	for id := range e.cgroups.ids(e.cfg.Namespace) {
		delete(ids, id)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	ts, err := e.client.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err != nil {
		return nil, e.wrapContainerd("listing tasks", err)
	}
	for _, t := range ts.GetTasks() {
		delete(ids, t.GetID())
	}
	for id := range processesNaming(ids) {
		delete(ids, id)
	}
	var removed []string
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		if _, err := e.client.LoadContainer(ctx, id); !errdefs.IsNotFound(err) {
			continue // made since the listing, or containerd did not say
		}
		left := runtimeState(e.oci.root, e.cfg.Namespace, id)
		if len(left) == 0 {
			continue // a delete that ended meanwhile
		}
		var rmErrs []error
		for _, p := range left {
			if err := os.RemoveAll(p); err != nil {
				rmErrs = append(rmErrs, err)
			}
		}
		if err := errors.Join(rmErrs...); err != nil {
			errs = append(errs, fmt.Errorf("removing the runtime's state of %s: %w", id, err))
			continue
		}
		removed = append(removed, id)
	}
	return removed, errors.Join(errs...)
}

// processesNaming returns those of ids that a root process of this PID
// namespace has as one of its arguments (/proc/PID/cmdline, read up to
// maxRuntimeCmdline bytes): a runtime runs as root, and another user's
// process naming an id keeps nothing.
func processesNaming(ids map[string]bool) map[string]bool {
	named := map[string]bool{}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		data, err := readAtMost(filepath.Join(p, "cmdline"), maxRuntimeCmdline)
		if err != nil {
			continue
		}
		for _, arg := range strings.Split(string(data), "\x00") {
			if ids[arg] && rootOwned(p) {
				named[arg] = true
			}
		}
	}
	return named
}

// maxRuntimeCmdline bounds processesNaming's read of a command line: a
// runtime's (runsc's with its flags) is under 2 KiB.
const maxRuntimeCmdline = 4 << 10

// runtimeStateIDs returns the container ids (isContainerID) that have
// state in dir, a runtime's root for one namespace: runc's and crun's
// directories named by the id, runsc's files <sandbox id>_sandbox:<id>.state
// and .lock (a delete cut short may leave the lock alone).
func runtimeStateIDs(dir string) map[string]bool {
	ids := map[string]bool{}
	entries, _ := os.ReadDir(dir)
	for _, d := range entries {
		name := d.Name()
		if _, after, ok := strings.Cut(name, "_sandbox:"); ok && !d.IsDir() && (strings.HasSuffix(after, ".state") || strings.HasSuffix(after, ".lock")) {
			name = strings.TrimSuffix(strings.TrimSuffix(after, ".state"), ".lock")
		} else if !d.IsDir() {
			continue
		}
		if isContainerID(name) {
			ids[name] = true
		}
	}
	return ids
}

// sweepCgroups removes (cgroups.remove: with what still runs in them) the
// cgroups under the namespace whose name is a corral container's id
// (isContainerID) and which no container record of the namespace names,
// whatever its state directory, and no shim serves, and returns their
// ids. Such a cgroup belongs to no container anyone can reach: the
// runtime makes a container's cgroups in its create, after containerd
// made the record, and every corral removes them (destroy, reap,
// removeOrphan) before it deletes the record; what is left is what a
// runtime's delete left (runc 1.1.5 on a loaded host) with a crash before
// that cleanup, or from before it existed. The cgroups are listed before
// the records, so a cgroup listed has its record already made unless it
// is gone; a task whose record is gone but whose shim lives is
// sweepOrphanShims's (which another state directory's corral may own);
// and each record is looked up once more just before its cgroups go.
// Each cgroup is waited for at most wait (cgroups.remove).
func (e *Executor) sweepCgroups(ctx context.Context, wait time.Duration) ([]string, error) {
	ids := e.cgroups.ids(e.cfg.Namespace)
	if len(ids) == 0 {
		return nil, nil
	}
	if err := e.dropReachable(ctx, ids); err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		if _, err := e.client.LoadContainer(ctx, id); !errdefs.IsNotFound(err) {
			continue // made since the listing, or containerd did not say
		}
		if err := e.cgroups.remove(e.cfg.Namespace, id, wait); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, id)
	}
	return removed, errors.Join(errs...)
}

// dropReachable takes away from ids those that a container record of the
// namespace names, whatever its state directory, or a shim process
// (findShims: daemons and actions) works on: the sweeps of what no one
// can reach anymore (sweepCgroups, sweepRuntimeStates) leave them alone.
func (e *Executor) dropReachable(ctx context.Context, ids map[string]bool) error {
	cs, err := e.client.Containers(ctx)
	if err != nil {
		return e.wrapContainerd("listing containers", err)
	}
	for _, c := range cs {
		delete(ids, c.ID())
	}
	for id := range findShims(e.cfg.Namespace) {
		delete(ids, id)
	}
	return nil
}

// sweepFIFOs removes the FIFO directories (cio.WithFIFODir: one per task,
// its files named <container id>-stdout and so on) of the containers just
// reaped, and those of no listed container once a minute old (younger, it
// may be a task another process is creating right now).
func (e *Executor) sweepFIFOs(live, reaped map[string]bool, now time.Time) []string {
	dirs, _ := os.ReadDir(e.fifoDir())
	var removed []string
	for _, d := range dirs {
		p := filepath.Join(e.fifoDir(), d.Name())
		files, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		mine, owned := false, false
		for _, f := range files {
			if id, _, ok := strings.Cut(f.Name(), "-std"); ok {
				mine = mine || reaped[id]
				owned = owned || live[id]
			}
		}
		st, err := os.Lstat(p)
		old := err == nil && now.Sub(st.ModTime()) > time.Minute
		if owned || !(mine || old) {
			continue
		}
		if err := os.RemoveAll(p); err == nil {
			removed = append(removed, d.Name())
		}
	}
	return removed
}

// Sweep cleans the state directory's sessions without containerd: it
// removes ephemeral sessions no process holds any more (their owner
// died), half-made ones (no complete record, nobody holding them), and
// prunes expired persistent sessions (Prune). Every New runs it.
func (e *Executor) Sweep(ctx context.Context) (*GCReport, error) {
	return e.sweepSessions(ctx, false)
}

func (e *Executor) sweepSessions(ctx context.Context, force bool) (*GCReport, error) {
	rep := &GCReport{}
	entries, err := os.ReadDir(e.sessionsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	now := time.Now()
	var errs []error
	for _, d := range entries {
		if d.Name() == CreatorsLock {
			continue
		}
		dir := filepath.Join(e.sessionsDir(), d.Name())
		var release func()
		var free bool
		if strings.HasPrefix(d.Name(), newPrefix) && !force {
			// Half-made: removed at once unless a live creator may hold
			// it (tryStaging).
			release, free = tryStaging(e.sessionsDir(), dir, now)
		} else {
			release, free = tryExclusive(dir)
		}
		if !free && !force {
			continue // a live process holds it
		}
		if release == nil {
			release = func() {}
		}
		rec, rerr := readRecord(dir)
		switch {
		case errors.Is(rerr, errdefs.ErrNotFound) || strings.HasPrefix(d.Name(), "."):
			// Half-made: the staging name, or no record (a crash, or a
			// one-call session of an older corral, which wrote owner.pid).
			if pid, err := os.ReadFile(filepath.Join(dir, ownerFile)); err == nil && alive(strings.TrimSpace(string(pid)), "") && !force {
				release()
				continue
			}
		case rerr != nil:
			release() // unreadable: `corral session rm` decides
			continue
		case rec.Ephemeral, force:
		case now.After(lastUse(dir, rec.Created).Add(rec.idleTTL())):
			ended, err := e.end(ctx, dir, rec)
			release()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			rep.Pruned = append(rep.Pruned, ended)
			continue
		default:
			release()
			continue
		}
		found, err := mounts.Sweep(dir)
		rep.Mounts = append(rep.Mounts, found...)
		if err == nil {
			err = removeSessionDir(dir)
		}
		release()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Sessions = append(rep.Sessions, d.Name())
	}
	return rep, errors.Join(errs...)
}

// reap kills and deletes a leftover container: its task through
// containerd first (the shim deletes the runtime's state, cgroups and
// bundle, and exits), then whatever the runtime left of its cgroups
// (cgroups.remove), then the record with its snapshot. The task's IO is
// attached to a discard sink first: without a reader the task can block
// forever on its FIFOs and task.Delete waits. A container without a task
// may have its create still in flight in containerd (the owner died in
// NewTask): the record is kept until that create ended (settleCreate),
// since a task whose record is gone is out of the API's reach.
func (e *Executor) reap(ctx context.Context, c containerd.Container) error {
	task, err := c.Task(ctx, cio.NewAttach(cio.WithStreams(nil, io.Discard, io.Discard)))
	if err != nil && !errdefs.IsNotFound(err) {
		// The FIFOs went with the crashed supervisor's state: take the task
		// without IO; Kill and Delete still work, Delete only waits longer.
		task, err = c.Task(ctx, nil)
	}
	if errdefs.IsNotFound(err) {
		task, err = e.settleCreate(ctx, c)
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
	// containerd's own cleanup after the shim (its delete action, the
	// runtime's delete --force) may still run when there was no task to
	// delete (a create its client's death aborted; containerd's task
	// Delete returns after it): the record stays until it ended, so a
	// gc that gives up finds the container again. A shim daemon still
	// there (no task, or one whose Delete said NotFound) is
	// sweepOrphanShims's once the record is gone: it kills it and waits
	// for containerd's cleanup after it.
	if err := awaitShimsGone(ctx, e.cfg.Namespace, c.ID(), false, 0, shimSettle); err != nil {
		return err
	}
	// What the runtime's delete left of the cgroups (cgroups.remove).
	cgErr := e.cgroups.remove(e.cfg.Namespace, c.ID(), cgroupSettle)
	spec, specErr := c.Spec(ctx)
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("deleting container %s: %w", c.ID(), err)
	}
	if specErr == nil {
		e.removeRequestDir(spec, c.ID())
	}
	return cgErr
}

// removeRequestDir removes the request directory (Layout.Req/<id>: its
// control file, a FIFO or a regular file, and the directory) of the
// reaped container id, named by its spec's bind at initctl.ReqDir, when
// that is a session's under this state directory; a live session keeps
// its layout, where the dead owner's containers would otherwise leave one
// per container until the session closes.
func (e *Executor) removeRequestDir(spec *specs.Spec, id string) {
	for _, m := range spec.Mounts {
		if m.Destination != initctl.ReqDir {
			continue
		}
		dir := filepath.Clean(m.Source)
		if filepath.Base(dir) != id || filepath.Base(filepath.Dir(dir)) != "req" ||
			!strings.HasPrefix(dir, filepath.Join(e.cfg.StateDir, "sessions")+string(filepath.Separator)) {
			return
		}
		_ = os.Remove(filepath.Join(dir, filepath.Base(initctl.RequestFile)))
		_ = os.Remove(dir)
	}
}

// sortSessions orders sessions oldest first.
func sortSessions(out []SessionInfo) {
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
}
