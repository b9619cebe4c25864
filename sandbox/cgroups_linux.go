package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupSettle bounds how long removeCgroups retries a cgroup that
// refuses its rmdir (containers/common waits as long, for the same
// reason: podman#11946).
const cgroupSettle = 5 * time.Second

// cgroupRoot is where the host's cgroup hierarchies are mounted.
var cgroupRoot = "/sys/fs/cgroup"

// cgroupDirs lists the cgroups of container id: the leaf id under the
// namespace (the cgroupsPath /NS/ID the spec sets, containerPlan) in every
// cgroup v1 hierarchy (the unified one of a hybrid host included) and in
// cgroup v2's.
func cgroupDirs(ns, id string) []string {
	dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", ns, id))
	return append(dirs, filepath.Join(cgroupRoot, ns, id))
}

// removeCgroups removes the cgroups of container id once its task is
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
// threads). removeCgroups retries each rmdir (deepest first: runsc and
// nested managers make sub-cgroups) with a growing delay until wait, and
// kills with SIGKILL what a cgroup of the container still holds (a task a
// runtime killed mid-create left behind is out of every API's reach),
// through a pidfd checked to be in the container's cgroup, so a reused
// pid is never signalled.
func removeCgroups(ns, id string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	delay := 10 * time.Millisecond
	for {
		var left []string
		for _, d := range cgroupDirs(ns, id) {
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

// killCgroupProcs sends SIGKILL to each process listed in the cgroup d
// (and the cgroups below it) whose /proc/PID/cgroup still names a path
// at or below leaf (/NS/ID), through a pidfd opened before that check.
func killCgroupProcs(d, leaf string) {
	_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil || pid <= 0 {
				continue
			}
			fd, err := unix.PidfdOpen(pid, 0)
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
