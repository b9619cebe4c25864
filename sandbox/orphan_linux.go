package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"github.com/corral-sandbox/corral/internal/kubepod"
	safefs "github.com/corral-sandbox/corral/internal/rootfs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// createSettle bounds how long a sweep waits for a task create that a
// dead owner left in flight in containerd: containerd's Create goes on
// after its client died (it makes the bundle, starts the shim, runs the
// runtime's create), and a container record deleted meanwhile leaves a
// task nobody can reach through the API (every task call looks up the
// record first).
const createSettle = 30 * time.Second

// shimProc is a process of a containerd shim binary working on one
// container: the runc v2 shim's daemon, serving the task, runs as
// `<shim> -namespace NS -id ID -address ADDR ...` with its bundle
// (containerd's state dir io.containerd.runtime.v2.task/NS/ID) as working
// directory; its actions run as the same command line and an action word
// (containerd's `start` and `delete`, gc's own delete).
type shimProc struct {
	pid int
	id  string
	// action is "" for the shim daemon; else the action word, a process
	// that ends by itself once the action is done (`delete`: the
	// runtime's `delete --force` of the container). Only a daemon is
	// ever killed.
	action string
	// exe is the shim binary the process runs, a path this process
	// resolved itself (shimBinaryOf); "" when the process runs no
	// containerd-shim-* binary of the system's directories: then it is
	// not known to be a shim, and nothing of it is run or removed.
	exe    string
	bundle string // the working directory
}

// findShims returns the shim processes (daemons and actions) of namespace
// ns working on containers named corral-*, by container id, from /proc
// (shimAt).
func findShims(ns string) map[string][]shimProc {
	out := map[string][]shimProc{}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range procs {
		if sp, ok := shimAt(dir, ns); ok {
			out[sp.id] = append(out[sp.id], sp)
		}
	}
	return out
}

// shimAt reports whether the process of procDir (/proc/PID) is a shim
// process of namespace ns working on a corral container: a root process
// whose command line is a shim's (argv0 containerd-shim-*, then the
// shim's flags and at most an action, parseShimArgs, with -namespace ns
// and -id a corral container id); exe and bundle are filled only when the
// process is in the node's mount namespace (inNodeMountNS).
func shimAt(procDir, ns string) (shimProc, bool) {
	// A bounded read (any user may start many processes with huge
	// command lines naming a shim), then root's processes only: a shim
	// runs as root.
	data, err := readAtMost(filepath.Join(procDir, "cmdline"), maxShimCmdline)
	if err != nil || !strings.Contains(string(data), "containerd-shim") {
		return shimProc{}, false
	}
	args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") || !rootOwned(procDir) {
		return shimProc{}, false
	}
	var sp shimProc
	var procNS string
	procNS, sp.id, sp.action, err = parseShimArgs(args[1:])
	if err != nil || procNS != ns || !isContainerID(sp.id) {
		return shimProc{}, false
	}
	sp.pid, err = strconv.Atoi(filepath.Base(procDir))
	if err != nil {
		return shimProc{}, false
	}
	if inNodeMountNS(procDir) {
		// Paths the process shows (its exe and cwd links) name what
		// they name for this process only in its mount namespace.
		sp.exe = shimBinaryOf(procDir)
		sp.bundle = cwdOf(procDir)
	}
	return sp, true
}

// parseShimArgs parses a shim's arguments (its command line after argv0)
// as the shim's own flag set does (containerd's runtime/v2/shim: -debug,
// -v and -info take no value; -namespace, -id, -address, -socket,
// -bundle and -publish-binary do) and returns its namespace, id and
// action: the one positional argument, "" for none. containerd's `start`
// and `delete` and gc's own delete (removeOrphan) run the shim binary as
// root with the same flags and an action; only the daemon serving a task
// has none. It fails on a flag the set lacks (fail closed) and on more
// than one positional argument.
func parseShimArgs(args []string) (ns, id, action string, err error) {
	set := flag.NewFlagSet("containerd-shim", flag.ContinueOnError)
	set.SetOutput(io.Discard)
	for _, name := range []string{"debug", "v", "info"} {
		set.Bool(name, false, "")
	}
	for _, name := range []string{"address", "socket", "bundle", "publish-binary"} {
		set.String(name, "", "")
	}
	nsFlag, idFlag := set.String("namespace", "", ""), set.String("id", "", "")
	if err := set.Parse(args); err != nil {
		return "", "", "", err
	}
	if set.NArg() > 1 {
		return "", "", "", fmt.Errorf("more than one positional argument (%q): no shim's command line", set.Args())
	}
	return *nsFlag, *idFlag, set.Arg(0), nil
}

// errNotTheShim is wrapped by openShim's error when the process
// findShims found is gone (or its pid went to another process): nothing
// is left to kill.
var errNotTheShim = errors.New("no longer the shim found")

// openShim returns a pidfd (pidfd_open(2)) of the shim daemon findShims
// found as sp. Its error wraps errNotTheShim when pid sp.pid no longer
// names that daemon (an action never is one): it exited, and the pid may
// have gone to any other process since. The pidfd is opened first,
// shimAt checks the process again through /proc/PID, and then the pidfd
// must still name a live process (pidfd_send_signal(2) with signal 0):
// a live process holds its pid, so what shimAt read was the pidfd's
// process, provided /proc is of this process's PID namespace (the
// pidfd's own pid, its fdinfo's, is sp.pid; else an error). Signals sent
// through the pidfd reach that process or none. Any other error (no pidfd: EMFILE, a seccomp filter,
// a kernel before 5.3) leaves a shim that may still run.
func openShim(sp shimProc, ns string) (int, error) {
	fd, err := unix.PidfdOpen(sp.pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, fmt.Errorf("shim %d of %s: %w", sp.pid, sp.id, errNotTheShim)
	}
	if err != nil {
		return -1, fmt.Errorf("opening a pidfd of shim %d of %s: %w", sp.pid, sp.id, err)
	}
	fail := func(err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("shim %d of %s: %w", sp.pid, sp.id, err)
	}
	switch pid, err := kubepod.PidOf(fd); {
	case errors.Is(err, kubepod.ErrGone):
		return fail(errNotTheShim)
	case err != nil:
		return fail(err)
	case pid != sp.pid:
		return fail(fmt.Errorf("/proc is not of this process's PID namespace (the pidfd's pid is %d)", pid))
	}
	again, ok := shimAt("/proc/"+strconv.Itoa(sp.pid), ns)
	if !ok || again.id != sp.id || again.exe != sp.exe || again.action != "" {
		return fail(errNotTheShim)
	}
	if err := unix.PidfdSendSignal(fd, 0, nil, 0); err != nil {
		return fail(errNotTheShim)
	}
	return fd, nil
}

// maxBundleSpec bounds bundleSpec's read of a bundle's config.json (a
// corral spec is a few KiB).
const maxBundleSpec = 4 << 20

// maxShimCmdline bounds findShims's read of a command line: a shim's is
// under 300 bytes.
const maxShimCmdline = 4 << 10

// readAtMost reads at most n bytes of the file at path (internal/rootfs.ReadAtMost).
func readAtMost(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return safefs.ReadAtMost(f, 0, n-1)
}

// inNodeMountNS reports whether the process of procDir (/proc/PID) is in
// this process's mount namespace or in pid 1's (the node's, when corral
// runs in a Pod): where containerd starts its shims. A process of
// another mount namespace (a container's root naming itself a shim)
// shows exe and cwd paths of its own filesystem.
func inNodeMountNS(procDir string) bool {
	ns, err := os.Stat(filepath.Join(procDir, "ns", "mnt"))
	if err != nil {
		return false
	}
	for _, ref := range []string{"/proc/self/ns/mnt", "/proc/1/ns/mnt"} {
		if st, err := os.Stat(ref); err == nil && os.SameFile(st, ns) {
			return true
		}
	}
	return false
}

// cwdOf returns the working directory of the process of procDir as a
// path this process can use: the cwd link's text when it names the same
// directory (device and inode) as the link itself; the text as it is
// when the directory was deleted (bundleGone reads its " (deleted)"
// suffix); "" otherwise (the process's root is not this one's).
func cwdOf(procDir string) string {
	link := filepath.Join(procDir, "cwd")
	text, err := os.Readlink(link)
	if err != nil {
		return ""
	}
	if strings.HasSuffix(text, " (deleted)") {
		return text
	}
	st, err1 := os.Stat(link)
	named, err2 := os.Lstat(text)
	if err1 != nil || err2 != nil || !os.SameFile(st, named) {
		return ""
	}
	return text
}

// rootOwned reports whether the process of procDir (/proc/PID) runs
// with real and effective uid 0 (its status's Uid line: the directory's
// owner is root for any process that made itself non-dumpable).
func rootOwned(procDir string) bool {
	data, err := os.ReadFile(filepath.Join(procDir, "status"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			return len(f) >= 2 && f[0] == "0" && f[1] == "0"
		}
	}
	return false
}

// shimDirs are where containerd finds its shim binaries on the hosts
// corral supports (PATH of a system service); each is also looked at
// beneath /proc/1/root, the node's root when corral runs in a Pod.
var shimDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// shimBinaryOf returns the path of the shim binary that the process of
// procDir (/proc/PID) runs: a file named containerd-shim-* in shimDirs
// (or this process's PATH, or beneath /proc/1/root) that is the same file
// (device and inode) as /proc/PID/exe; "" when there is none. The
// process's command line, the path its exe link reads and its working
// directory are the process's to choose, so only a binary found here is
// ever run (removeOrphan): a root process in another mount namespace
// naming itself a shim runs a file of its own, never the same inode.
func shimBinaryOf(procDir string) string {
	running, err := os.Stat(filepath.Join(procDir, "exe"))
	if err != nil {
		return ""
	}
	link, err := os.Readlink(filepath.Join(procDir, "exe"))
	if err != nil {
		return ""
	}
	name := filepath.Base(strings.TrimSuffix(link, " (deleted)"))
	if !strings.HasPrefix(name, "containerd-shim-") {
		return ""
	}
	var candidates []string
	if p, err := exec.LookPath(name); err == nil && filepath.IsAbs(p) {
		candidates = append(candidates, p)
	}
	for _, d := range shimDirs {
		candidates = append(candidates, filepath.Join(d, name), filepath.Join("/proc/1/root", d, name))
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && os.SameFile(st, running) {
			return c
		}
	}
	return ""
}

// settleCreate waits, for a container of a dead owner that has no task,
// until a task create the owner left in flight has ended: the task
// appeared (returned), or no shim process works on the container (its
// daemon, or containerd's cleanup of a create that failed: the shim's
// delete action) and the record is older than a shim start takes.
// Bounded by createSettle from the record's creation.
func (e *Executor) settleCreate(ctx context.Context, c containerd.Container) (containerd.Task, error) {
	info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata)
	if err != nil {
		return nil, err
	}
	deadline := info.CreatedAt.Add(createSettle)
	for {
		task, err := c.Task(ctx, nil)
		if err == nil || !errdefs.IsNotFound(err) {
			return task, err
		}
		if len(shimBinaryProcs(e.cfg.Namespace, c.ID())) == 0 && time.Since(info.CreatedAt) > 5*time.Second {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sweepOrphanShims removes the tasks whose container record is gone: the
// shims of this namespace (root processes running a shim binary of the
// system's, shimBinaryOf; any other process may name itself one) serving
// a corral-* container no record names,
// whose bundle's spec binds a path of this executor's state directory
// (ownedBy) or whose bundle is gone (bundleGone): the record and its
// labels are gone, and another state directory's corral (another
// daemon, a test run, another version) on the same namespace sweeps its
// own. No live process can own one (a
// container's record is made before its task and deleted after it). Each goes the way containerd's own
// cleanup of a dead shim goes: through containerd when it still holds
// the task (a record of the same id is made again so the task API
// reaches it: kill, delete, then the record), else through the shim's
// own `delete` command (the runtime's `delete --force` with the bundle's
// options, rootfs unmounted), then the shim is killed and its bundle and
// cgroups removed.
func (e *Executor) sweepOrphanShims(ctx context.Context) ([]string, error) {
	var removed []string
	var errs []error
	for id, procs := range findShims(e.cfg.Namespace) {
		shims := slices.DeleteFunc(procs, func(sp shimProc) bool { return sp.action != "" })
		if len(shims) == 0 {
			continue // actions only (containerd's cleanup): they end by themselves
		}
		if _, err := e.client.LoadContainer(ctx, id); err == nil || !errdefs.IsNotFound(err) {
			continue
		}
		if slices.ContainsFunc(shims, func(sp shimProc) bool { return sp.exe == "" }) {
			continue // a process that runs no shim binary: not known to be a shim
		}
		spec, err := bundleSpec(shims[0].bundle)
		switch {
		case err == nil && !ownedBy(spec, e.cfg.StateDir):
			continue // another state directory's
		case err != nil && !bundleGone(shims[0].bundle):
			continue // unreadable: not known to be this one's
		}
		if err := e.removeOrphan(ctx, id, shims, spec); err != nil {
			errs = append(errs, fmt.Errorf("removing the orphan task %s: %w", id, err))
			continue
		}
		removed = append(removed, id)
	}
	return removed, errors.Join(errs...)
}

// removeOrphan removes the task of container id, served by shims (shim
// daemons), whose record is gone; spec is its bundle's, nil when the
// bundle is gone (then the shims are only killed: nothing is left for
// containerd or the shim's delete to work on). The bundle goes once no
// shim process has worked on id for shimQuiet (awaitShimsGone):
// containerd cleans up after a shim it held that died, in the bundle,
// and starts that cleanup only after it saw the shim's connection close.
func (e *Executor) removeOrphan(ctx context.Context, id string, shims []shimProc, spec *specs.Spec) error {
	shimDeleteDone := spec == nil
	if spec == nil {
		// Nothing to recreate a record from.
	} else if c, err := e.recreateRecord(ctx, id, spec); err == nil {
		if task, err := c.Task(ctx, nil); err == nil {
			_ = task.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll)
			if _, err := task.Delete(ctx, containerd.WithProcessKill); err == nil || errdefs.IsNotFound(err) {
				shimDeleteDone = true // containerd ran it
			}
		}
		if err := c.Delete(ctx); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("deleting the record made again: %w", err)
		}
	}
	var killErrs []error
	for _, sp := range shims {
		if !shimDeleteDone && sp.exe != "" && sp.bundle != "" {
			// The shim binary's delete action (containerd's cleanup of
			// a bundle whose shim died): runs with the bundle as its
			// working directory and the shim's own flags.
			// The flags are corral's own: the process's could turn the
			// action into another one.
			// Bounded by shimSettle: a runtime stuck on its lock
			// holds no gc.
			args := []string{"-namespace", e.cfg.Namespace, "-id", id, "-address", e.cfg.Address, "delete"}
			actx, cancel := context.WithTimeout(ctx, shimSettle)
			cmd := exec.CommandContext(actx, sp.exe, args...)
			cmd.Dir, cmd.WaitDelay = sp.bundle, time.Second
			_ = cmd.Run()
			cancel()
		}
		// The shim delete above ends most shims; one that is still the
		// shim found is killed through a pidfd, so a pid that went to
		// another process meanwhile is never signalled.
		fd, err := openShim(sp, e.cfg.Namespace)
		switch {
		case err == nil:
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			waitExit(fd, 5*time.Second)
			unix.Close(fd)
		case !errors.Is(err, errNotTheShim):
			killErrs = append(killErrs, err)
		}
	}
	if len(killErrs) > 0 {
		// A shim that may still run keeps its bundle: the next sweep
		// finds it as it is now.
		return fmt.Errorf("killing the orphan's shim: %w", errors.Join(killErrs...))
	}
	if err := awaitShimsGone(ctx, e.cfg.Namespace, id, true, shimQuiet, shimSettle); err != nil {
		return err
	}
	for _, sp := range shims {
		if sp.bundle != "" && filepath.Base(sp.bundle) == id && filepath.Base(filepath.Dir(sp.bundle)) == e.cfg.Namespace {
			// containerd's layout: <state>/io.containerd.runtime.v2.task/<namespace>/<id>.
			_ = unix.Unmount(filepath.Join(sp.bundle, "rootfs"), unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
			_ = os.RemoveAll(sp.bundle)
		}
	}
	cgErr := e.cgroups.remove(e.cfg.Namespace, id, cgroupSettle)
	if spec != nil {
		e.removeRequestDir(spec, id)
	}
	if cgErr != nil {
		return cgErr
	}
	if left := runtimeState(e.oci.root, e.cfg.Namespace, id); len(left) > 0 {
		return fmt.Errorf("the runtime's state %s is left", strings.Join(left, ", "))
	}
	return nil
}

// runtimeState returns the paths of the runtime's state of container id
// under root (the runc v2 shim's state root, ociRuntime.root; nothing
// when it is ""), namespace ns: runc's and crun's directory root/ns/id,
// runsc's files root/ns/<sandbox id>_sandbox:<id>.state and .lock.
func runtimeState(root, ns, id string) []string {
	if root == "" {
		return nil
	}
	var left []string
	dir := filepath.Join(root, ns)
	if _, err := os.Lstat(filepath.Join(dir, id)); err == nil {
		left = append(left, filepath.Join(dir, id))
	}
	entries, _ := os.ReadDir(dir)
	for _, d := range entries {
		if strings.HasSuffix(d.Name(), "_sandbox:"+id+".state") || strings.HasSuffix(d.Name(), "_sandbox:"+id+".lock") {
			left = append(left, filepath.Join(dir, d.Name()))
		}
	}
	return left
}

// bundleSpec reads the OCI spec of a task's bundle (its config.json,
// written by containerd from the container's record).
func bundleSpec(bundle string) (*specs.Spec, error) {
	// A regular file, no symbolic link on the way, never a FIFO's
	// blocking open, at most maxBundleSpec bytes.
	data, err := safefs.ReadFileInRoot(bundle, "config.json", safefs.NoSymlinks, maxBundleSpec)
	if err != nil {
		return nil, err
	}
	var spec specs.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(bundle, "config.json"), err)
	}
	return &spec, nil
}

// bundleGone reports whether a shim's bundle (its working directory,
// as /proc/PID/cwd reads) was deleted: containerd removes it when it
// cleans up after a shim that stopped answering, and such a shim serves
// no task any corral could own.
func bundleGone(bundle string) bool {
	if bundle == "" || strings.HasSuffix(bundle, " (deleted)") {
		return true
	}
	_, err := os.Stat(bundle)
	return errors.Is(err, fs.ErrNotExist)
}

// ownedBy reports whether spec is of a container made by a corral of
// stateDir: one of its mounts binds a path beneath stateDir (every
// corral container binds its session's control directory and
// corral-init from there).
func ownedBy(spec *specs.Spec, stateDir string) bool {
	if stateDir == "" {
		return false
	}
	for _, m := range spec.Mounts {
		if !filepath.IsAbs(m.Source) {
			continue
		}
		if rel, err := filepath.Rel(stateDir, m.Source); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return true
		}
	}
	return false
}

// recreateRecord makes a container record named id again, with spec (its
// bundle's) and this executor's runtime, so that the task API reaches the
// task containerd still holds.
func (e *Executor) recreateRecord(ctx context.Context, id string, spec *specs.Spec) (containerd.Container, error) {
	anySpec, err := typeurl.MarshalAny(spec)
	if err != nil {
		return nil, err
	}
	rec := containers.Container{
		ID:      id,
		Runtime: containers.RuntimeInfo{Name: e.oci.info.Shim},
		Spec:    anySpec,
		Labels:  map[string]string{LabelOwner: "corral", LabelStateDir: e.cfg.StateDir},
	}
	if _, err := e.client.ContainerService().Create(ctx, rec); err != nil {
		return nil, err
	}
	return e.client.LoadContainer(ctx, id)
}

// shimSettle bounds how long gc waits for the shim processes still
// working on a container it reaps or on an orphan whose shim it ended
// (awaitShimsGone), and gc's own run of a shim's delete action:
// containerd runs the shim's delete action whenever a shim it held exits
// (containerd 1.6's cleanup after a disconnected shim, bounded there by
// io.containerd.timeout.shim.cleanup, 5 s by default; a task Delete
// through containerd returns after it), a create its client's death
// aborted and a shim gc killed included, and that action runs the
// runtime's `delete --force`, which under runsc stops a sandbox: the
// runtime's state of the container is gone only when it ended. A
// variable for tests.
var shimSettle = 20 * time.Second

// shimQuiet is how long no shim process may work on an orphan whose
// shim gc ended before removeOrphan takes the cleanup as done:
// containerd starts its delete action only after it saw the shim's
// connection close, a fork and exec later (milliseconds).
const shimQuiet = time.Second

// shimBinaryProcs returns the processes running a shim binary of the
// system's (shimBinaryOf) that work on container id of namespace ns, its
// daemon and actions (findShims); a process merely naming itself a shim
// is left out, so it holds no wait.
func shimBinaryProcs(ns, id string) []shimProc {
	return slices.DeleteFunc(findShims(ns)[id], func(sp shimProc) bool { return sp.exe == "" })
}

// awaitShimsGone waits until no process of a shim binary has worked on
// container id of namespace ns (shimBinaryProcs) for quiet (0: one scan
// that finds none), at most d: no action, and no daemon either when
// daemons is set (a daemon whose task is gone is sweepOrphanShims's).
// Its error names the processes still there, or is ctx's.
func awaitShimsGone(ctx context.Context, ns, id string, daemons bool, quiet, d time.Duration) error {
	deadline := time.Now().Add(d)
	var none time.Time // since when the scans found none
	for {
		procs := slices.DeleteFunc(shimBinaryProcs(ns, id), func(sp shimProc) bool { return sp.action == "" && !daemons })
		switch {
		case len(procs) > 0:
			none = time.Time{}
		case none.IsZero():
			none = time.Now()
		}
		if len(procs) == 0 && time.Since(none) >= quiet {
			return nil
		}
		if len(procs) > 0 && time.Now().After(deadline) {
			var names []string
			for _, sp := range procs {
				names = append(names, fmt.Sprintf("%d (%s)", sp.pid, cmp.Or(sp.action, "daemon")))
			}
			return fmt.Errorf("shim processes of %s still run after gc waited %s for them: %s", id, d, strings.Join(names, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitExit waits until the process of pidfd has exited (the pidfd
// polls readable then, pidfd_open(2); a zombie has exited), at most d.
func waitExit(pidfd int, d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		if n > 0 || (err != nil && err != unix.EINTR) {
			return
		}
	}
}
