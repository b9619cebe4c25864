package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// cgroupSettle bounds how long cgroups.remove retries a cgroup that
// refuses its rmdir (containers/common waits as long, for the same
// reason: podman#11946).
const cgroupSettle = 5 * time.Second

// hostCgroupRoot is where the host's cgroup hierarchies are mounted.
const hostCgroupRoot = "/sys/fs/cgroup"

// podCgroupPath is the node's cgroup mount point, seen from a Pod with
// the node's PID namespace below /proc/PID/root of the node's init, pid 1
// (proc(5): /proc/pid/root is the process's root directory, in its mount
// namespace).
const podCgroupPath = "1/root/sys/fs/cgroup"

// cgroups is where one executor finds the node's cgroup hierarchies
// (resolveCgroups, once, in New): every reader and writer of cgroups in
// this package goes through it, never a path of its own.
type cgroups struct {
	// root is the directory the hierarchies are mounted in: cgroup v2's
	// (cgroup.controllers in it), or one directory per cgroup v1
	// hierarchy (memory, pids, cpu, …; a hybrid host's unified too); ""
	// is the host's, hostCgroupRoot.
	root string
}

// dir is c.root, the host's when unset.
func (c cgroups) dir() string {
	if c.root == "" {
		return hostCgroupRoot
	}
	return c.root
}

// resolveCgroups decides where the node's cgroup hierarchies are: the
// host's /sys/fs/cgroup, or, in a Pod (inPod), the node's seen through
// its init (podCgroups on /proc).
func resolveCgroups(inPod bool) (cgroups, error) {
	if !inPod {
		return cgroups{root: hostCgroupRoot}, nil
	}
	return podCgroups("/proc")
}

// podCgroups returns the node's cgroup hierarchies for a process in a
// Pod, through pid 1 of the procfs at proc, or an error (wrapping
// errdefs.ErrFailedPrecondition or the kernel's) that says why they
// cannot be reached. A Pod's own /sys/fs/cgroup is no way to them: on
// cgroup v1 runc binds the container's own cgroup over each hierarchy,
// and a cgroup namespace's root is its own cgroup. So pid 1 must be the
// node's init: in another mount namespace than this process (without the
// node's PID namespace, hostPID, pid 1 is this container's first process
// or the Pod's pause), its root reachable (ptrace access to pid 1:
// CAP_SYS_PTRACE, a privileged Pod), and each hierarchy under it the
// root cgroup of a cgroup filesystem (checkHostHierarchy): never a
// container's view taken for the node's.
func podCgroups(proc string) (cgroups, error) {
	self, err := nsInode(filepath.Join(proc, "self", "ns", "mnt"))
	if err != nil {
		return cgroups{}, fmt.Errorf("the node's cgroups: %w", err)
	}
	init, err := nsInode(filepath.Join(proc, "1", "ns", "mnt"))
	if err != nil {
		return cgroups{}, fmt.Errorf("the node's cgroups: pid 1's mount namespace (a privileged Pod with the node's PID namespace, hostPID, reaches it): %w", err)
	}
	if self == init {
		return cgroups{}, fmt.Errorf("the node's cgroups: %w: pid 1 shares this process's mount namespace, it is not the node's init (run the Pod with hostPID)", errdefs.ErrFailedPrecondition)
	}
	c := cgroups{root: filepath.Join(proc, podCgroupPath)}
	if err := c.checkRoots(); err != nil {
		return cgroups{}, fmt.Errorf("the node's cgroups: %w", err)
	}
	return c, nil
}

// nsInode returns the inode of the namespace file p (/proc/PID/ns/TYPE):
// two processes share a namespace when their inodes are equal
// (namespaces(7)).
func nsInode(p string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	return st.Ino, nil
}

// checkRoots refuses c unless each cgroup hierarchy in its root (v2's, or
// every v1 one) is a hierarchy's root cgroup (checkHostHierarchy), and
// there is at least one.
func (c cgroups) checkRoots() error {
	if fileExists(filepath.Join(c.dir(), "cgroup.controllers")) {
		return checkHostHierarchy(c.dir())
	}
	entries, err := os.ReadDir(c.dir())
	if err != nil {
		return err
	}
	n := 0
	for _, e := range entries {
		h := filepath.Join(c.dir(), e.Name())
		var st unix.Statfs_t
		if unix.Statfs(h, &st) != nil || (st.Type != unix.CGROUP_SUPER_MAGIC && st.Type != unix.CGROUP2_SUPER_MAGIC) {
			continue // not a hierarchy (cpu, a link to cpu,cpuacct, counts once per name)
		}
		if err := checkHostHierarchy(h); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%w: no cgroup hierarchy in %s", errdefs.ErrFailedPrecondition, c.dir())
	}
	return nil
}

// dirs lists the cgroups of container id: the leaf id under the
// namespace (the cgroupsPath /NS/ID the spec sets, containerPlan) in every
// cgroup v1 hierarchy (the unified one of a hybrid host included) and in
// cgroup v2's.
func (c cgroups) dirs(ns, id string) []string {
	dirs, _ := filepath.Glob(filepath.Join(c.dir(), "*", ns, id))
	return append(dirs, filepath.Join(c.dir(), ns, id))
}

// counter reads one counter of the container's cgroup: the v1 file
// <controller>/<ns>/<id>/v1File, or the v2 file <ns>/<id>/v2File. Lines
// are "key value". Missing files read as 0.
func (c cgroups) counter(ns, id, controller, v1File, v2File, key string) int64 {
	var p string
	if fileExists(filepath.Join(c.dir(), "cgroup.controllers")) {
		p = filepath.Join(c.dir(), ns, id, v2File)
	} else {
		p = filepath.Join(c.dir(), controller, ns, id, v1File)
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

// containerIDPattern is the form of a corral container's id,
// corral-<session>-<n> (runner.newID: a session id, sessionIDPattern, and
// a decimal).
var containerIDPattern = regexp.MustCompile(`^corral-[0-9a-f]{12}-[0-9]{1,20}$`)

// isContainerID reports whether name is a corral container's id.
func isContainerID(name string) bool { return containerIDPattern.MatchString(name) }

// ids returns the names of the cgroups directly under the
// namespace ns's cgroup (in any cgroup v1 hierarchy, or cgroup v2's: the
// places dirs names) that are corral container ids; nothing for a
// namespace that is not a single path component.
func (c cgroups) ids(ns string) map[string]bool {
	ids := map[string]bool{}
	if ns == "" || ns == "." || ns == ".." || strings.ContainsRune(ns, '/') {
		return ids
	}
	parents := []string{filepath.Join(c.dir(), ns)}
	hierarchies, _ := os.ReadDir(c.dir())
	for _, h := range hierarchies {
		if h.IsDir() {
			parents = append(parents, filepath.Join(c.dir(), h.Name(), ns))
		}
	}
	for _, p := range parents {
		entries, _ := os.ReadDir(p)
		for _, e := range entries {
			if e.IsDir() && isContainerID(e.Name()) {
				ids[e.Name()] = true
			}
		}
	}
	return ids
}

// remove removes the cgroups of container id once its task is
// deleted (or its shim is gone), whatever the runtime left of them, and
// returns an error naming those still there after wait.
//
// The runtime normally removes them when it deletes the container, but
// a cgroup whose last task was just reaped can refuse rmdir with EBUSY
// for a while on a loaded host (the kernel takes an exiting task out of
// its cgroup after the parent may already have seen its exit); runc
// 1.1.5 retries for about 150 ms, then logs "Failed to remove paths" and
// still ends `runc delete` with success, its state removed: the cgroups
// stay, empty, out of everyone's reach (seen under runc after gc of a
// container started ahead: empty cgroups, pids.peak 6, corral-init's
// threads). remove retries each rmdir (deepest first: runsc and
// nested managers make sub-cgroups) with a growing delay until wait, and
// kills with SIGKILL what a cgroup of the container still holds (a task a
// runtime killed mid-create left behind is out of every API's reach),
// through a pidfd checked to be in the container's cgroup, so a reused
// pid is never signalled.
func (c cgroups) remove(ns, id string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	delay := 10 * time.Millisecond
	for {
		var left []string
		for _, d := range c.dirs(ns, id) {
			if err := removeCgroupTree(d); err != nil {
				left = append(left, d)
				killCgroupProcs(d, "/"+ns+"/"+id)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroups of %s left after %s: %s", id, wait, strings.Join(left, ", "))
		}
		time.Sleep(delay)
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// removeCgroupTree removes the cgroup d and the cgroups below it,
// deepest first; one already gone is no error.
func removeCgroupTree(d string) error {
	entries, err := os.ReadDir(d)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, removeCgroupTree(filepath.Join(d, e.Name())))
		}
	}
	if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
	}
	return errors.Join(errs...)
}

// killProcs is killCgroupProcs over every cgroup of container id of
// namespace ns (dirs): whether any of them exists, and how many listed
// processes were still there.
func (c cgroups) killProcs(ns, id string) (found bool, alive int) {
	for _, d := range c.dirs(ns, id) {
		f, a := killCgroupProcs(d, "/"+ns+"/"+id)
		found, alive = found || f, alive+a
	}
	return found, alive
}

// killCgroupProcs sends SIGKILL to each process listed in the cgroup d
// (and the cgroups below it) whose /proc/PID/cgroup still names a path
// at or below leaf (/NS/ID), through a pidfd opened before that check.
// It reports whether d exists and how many listed processes were still
// there (a process that exited, a zombie included, is no longer listed:
// kernel Documentation/admin-guide/cgroup-v2.rst, "cgroup.procs"):
// every listed process but one whose pidfd_open failed with ESRCH,
// whether this call could signal it or not (a reader in another cgroup
// namespace sees /proc/PID/cgroup paths relative to its own, and
// signals nothing; pidfd_open can fail for want of a descriptor). So a
// cgroup found with none alive held no process when it was read.
func killCgroupProcs(d, leaf string) (found bool, alive int) {
	_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		found = true
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil || pid <= 0 {
				continue
			}
			fd, err := unix.PidfdOpen(pid, 0)
			if errors.Is(err, unix.ESRCH) {
				continue // exited since the listing
			}
			alive++
			if err != nil {
				continue
			}
			if inCgroup(pid, leaf) {
				_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			}
			unix.Close(fd)
		}
		return nil
	})
	return found, alive
}

// inCgroup reports whether the process pid is in the cgroup leaf or
// below it, in any hierarchy of /proc/PID/cgroup (lines
// "ID:CONTROLLERS:PATH").
func inCgroup(pid int, leaf string) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[2] == leaf || strings.HasPrefix(parts[2], leaf+"/")) {
			return true
		}
	}
	return false
}

// DefaultReapCgroup is the cgroup the shims of containers being
// destroyed move to (Config.ReapCgroup).
const DefaultReapCgroup = "/corral-reap"

// The reap cgroup's CPU share: 1/16 of a default cgroup's (cgroup v1
// cpu.shares defaults to 1024, cgroup v2 cpu.weight to 100; kernel
// Documentation/admin-guide/cgroup-v1/cgroups.rst, cgroup-v2.rst). CPU
// shares only order runnable work: an idle host gives the deletes all
// they ask for.
const (
	reapCPUShares = "64"
	reapCPUWeight = "6"
)

// checkReapCgroup refuses a reap cgroup that is not an absolute,
// clean path ("" is none).
func checkReapCgroup(p string) error {
	if p == "" {
		return nil
	}
	if !strings.HasPrefix(p, "/") || p == "/" || filepath.Clean(p) != p || strings.ContainsAny(p, "\n:,") {
		return fmt.Errorf("reap cgroup %q: %w: want an absolute, clean cgroup path such as %s", p, errdefs.ErrInvalidArgument, DefaultReapCgroup)
	}
	return nil
}

// ensureReap makes the cgroup p (checked by checkReapCgroup) in
// the cpu controller's hierarchy (reapDir) and sets its CPU share,
// enabling cgroup v2's cpu controller in its parent when needed. It is
// made again on each use: an operator may have removed it. An error
// means the share cannot be set: the caller leaves the shims where they
// are.
func (c cgroups) ensureReap(p string) error {
	_, err := c.makeReap(p)
	return err
}

// makeReap is ensureReap, returning the cgroup's directory.
func (c cgroups) makeReap(p string) (string, error) {
	h := c.reapHierarchy()
	if err := checkHostHierarchy(h); err != nil {
		return "", fmt.Errorf("the reap cgroup's hierarchy: %w", err)
	}
	dir, file, share := c.reapIn(h, p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("making the reap cgroup: %w", err)
	}
	err := writeCgroupFile(filepath.Join(dir, file), share)
	if errors.Is(err, os.ErrNotExist) && file == "cpu.weight" {
		// cgroup v2 without the cpu controller enabled for p's parent.
		if werr := writeCgroupFile(filepath.Join(filepath.Dir(dir), "cgroup.subtree_control"), "+cpu"); werr != nil {
			return "", fmt.Errorf("enabling the cpu controller for the reap cgroup: %w", werr)
		}
		err = writeCgroupFile(filepath.Join(dir, file), share)
	}
	if err != nil {
		return "", fmt.Errorf("setting the reap cgroup's CPU share: %w", err)
	}
	return dir, nil
}

// reapDir is where the reap cgroup p is: cgroup v2's, else
// cgroup v1's cpu hierarchy (also on a hybrid host, whose v2 hierarchy
// has no controllers), with the name of its CPU share file and the value
// corral gives it.
func (c cgroups) reapDir(p string) (dir, file, share string) {
	return c.reapIn(c.reapHierarchy(), p)
}

// reapIn is reapDir in the hierarchy h (reapHierarchy's).
func (c cgroups) reapIn(h, p string) (dir, file, share string) {
	if h == c.dir() {
		return filepath.Join(h, p), "cpu.weight", reapCPUWeight
	}
	return filepath.Join(h, p), "cpu.shares", reapCPUShares
}

// reapHierarchy is the hierarchy the reap cgroup is made in: cgroup
// v2's, else cgroup v1's cpu hierarchy.
func (c cgroups) reapHierarchy() string {
	if fileExists(filepath.Join(c.dir(), "cgroup.controllers")) {
		return c.dir()
	}
	return filepath.Join(c.dir(), "cpu")
}

// checkHostHierarchy refuses h unless it is the root cgroup of a cgroup
// hierarchy: a cgroup filesystem (statfs(2)) whose top directory has the
// files only a root cgroup has (cgroup v1's release_agent) or lacks those
// it lacks (cgroup v2's cgroup.type; kernel
// Documentation/admin-guide/cgroup-v1/cgroups.rst, cgroup-v2.rst). A
// container's cgroup v1 hierarchies are binds of the container's own
// cgroup (runc does so without a cgroup namespace too, for a privileged
// container: a daemon Pod's), a cgroup namespace's root is its own
// cgroup: a reap cgroup made there would be a child of the container's
// cgroup, and the shims moved into it the container's. Two stats, not
// mountinfo, which a daemon's sessions make thousands of lines long (4.6
// ms to read at 1,300 mounts) and ensureReap runs on every destroy.
func checkHostHierarchy(h string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(h, &st); err != nil {
		return fmt.Errorf("cgroup hierarchy: %w", err)
	}
	var view bool
	switch st.Type {
	case unix.CGROUP_SUPER_MAGIC:
		view = !fileExists(filepath.Join(h, "release_agent"))
	case unix.CGROUP2_SUPER_MAGIC:
		view = fileExists(filepath.Join(h, "cgroup.type"))
	default:
		return fmt.Errorf("cgroup hierarchy %s: %w: not a cgroup mount", h, errdefs.ErrFailedPrecondition)
	}
	if view {
		return fmt.Errorf("cgroup hierarchy %s: %w: a view of one cgroup (a container's), not the host's cgroup root", h, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// fileExists reports whether p can be stat'ed.
func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// shimOf returns a pidfd and the pid of the runtime shim of container
// id, found as the parent of its init process pid (the shim is a child
// subreaper: runc's and crun's init is its child once the runtime's
// create returned) and checked, after the pidfd is open, to be a shim
// whose command line names id (containerd's runc v2 shim runs as
// "containerd-shim-runc-v2 -namespace NS -id ID -address ..."); (-1, 0)
// when it is not one (a gVisor sandbox's parent, a process gone).
func shimOf(pid int, id string) (int, int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1, 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return -1, 0
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil || ppid <= 1 {
		return -1, 0
	}
	fd, err := unix.PidfdOpen(ppid, 0)
	if err != nil {
		return -1, 0
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ppid))
	if err != nil || !strings.HasPrefix(filepath.Base(strings.SplitN(string(cmd), "\x00", 2)[0]), "containerd-shim") ||
		!strings.Contains(string(cmd), "\x00-id\x00"+id+"\x00") ||
		unix.PidfdSendSignal(fd, 0, nil, 0) != nil {
		// Checked live after the read: the command line was the
		// pidfd's process's, not a reused pid's.
		unix.Close(fd)
		return -1, 0
	}
	return fd, ppid
}

// moveToReapCgroup moves the process pid, whose pidfd is fd, into the
// executor's reap cgroup, unless it is gone (the pidfd says so, so a
// reused pid is never moved) or the cgroup cannot be made (said once).
func (e *Executor) moveToReapCgroup(fd, pid int) {
	dir, err := e.cgroups.makeReap(e.cfg.ReapCgroup)
	if err != nil {
		e.reapOnce.Do(func() {
			fmt.Fprintf(e.cfg.Log, "corral: %v; shims stay in containerd's cgroup\n", oneLine(err))
		})
		return
	}
	if unix.PidfdSendSignal(fd, 0, nil, 0) != nil {
		return
	}
	_ = writeCgroupFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
}

// writeCgroupFile writes v to the cgroup interface file p, which must
// exist (a controller that is not enabled has none: os.ErrNotExist).
func writeCgroupFile(p, v string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	return errors.Join(err, f.Close())
}
