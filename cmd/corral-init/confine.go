package main

import (
	"errors"
	"io/fs"
	"os"
	"runtime"
	"syscall"

	"github.com/corral-sandbox/corral/internal/landlock"
)

// stageArg, as corral-init's first argument, runs the confining stage
// (confineAndExec) instead of reading a control file. Running it by hand
// (the tool may exec corral-init) only ever adds restrictions.
const stageArg = "--confine-exec"

// selfExe is corral-init's own file, as the kernel knows it: the stage is
// started from it whatever path it was bound at.
const selfExe = "/proc/self/exe"

// hiddenTop are the entries of / the tool may not read below: /proc and
// /sys (the mount tables of /proc/self, /proc/thread-self and /proc/mounts
// name host paths, and masks, being mounts on paths fixed when the
// container starts, cannot cover the tool's own /proc/<pid>), and
// /.corral (corral-init and the session's control files; the tool needs
// neither once it runs).
var hiddenTop = map[string]bool{"proc": true, "sys": true, ".corral": true}

// ownFiles are the files of /proc and /sys a tool may still read, each by
// a rule on that one file made in the tool's own process, so that
// /proc/self is the tool: what the built-in grammars' tools were measured
// reading (seccomp/testdata/measure.sh under strace), and the harmless
// rest of its own status. /proc/self/maps: glibc's pthread_getattr_np
// (grep, diff); /proc/filesystems: libselinux (ls, find, cp, sed, stat,
// mkdir, mv); /sys/devices/system/cpu/online: glibc's CPU count (git grep);
// /sys/class/net, the directory of the container's own network namespace's
// interfaces (lo alone), so that a check inside the container can see there
// is no network (the integration tests' probe).
// Not here, read and survived on failure: rg's /proc/self/cgroup and
// /proc/self/mountinfo (it then counts CPUs with sched_getaffinity).
var ownFiles = []string{
	"/proc/self/status", "/proc/self/stat", "/proc/self/statm", "/proc/self/maps",
	"/proc/self/limits", "/proc/self/environ",
	"/proc/filesystems", "/sys/devices/system/cpu/online", "/sys/class/net",
}

// confineAndExec is the tool's process before it becomes the tool: it
// confines its reads with Landlock (confine) on a locked thread and execs
// argv from that thread, which the domain then belongs to. Where the
// kernel has no Landlock (landlock.ErrUnavailable: ENOSYS or EPERM under
// gVisor's runsc, whose /proc is its own; EOPNOTSUPP: disabled at boot) it
// execs unconfined, as `corral doctor` reports; any other failure to confine refuses the tool (126).
func confineAndExec(argv []string) int {
	runtime.LockOSThread()
	if len(argv) == 0 {
		os.Stderr.WriteString("corral-init: " + stageArg + ": no command\n")
		return 125
	}
	if err := confine(); err != nil && !errors.Is(err, landlock.ErrUnavailable) {
		os.Stderr.WriteString("corral-init: cannot confine " + argv[0] + "'s reads: " + err.Error() + "\n")
		return 126
	}
	return execTool(argv)
}

// confine restricts the calling thread's file and directory reads to
// every entry of / but hiddenTop and the ownFiles that exist (directories
// with everything beneath them, across mounts). Writes, execution and
// path walking are not handled: the read-only root, the one writable
// overlay and the seccomp filter already bound them. Errors wrap
// landlock.ErrUnavailable when the kernel has no Landlock.
func confine() error {
	rs, err := landlock.NewRuleset(landlock.ReadFile | landlock.ReadDir)
	if err != nil {
		return err
	}
	defer rs.Close()
	entries, err := os.ReadDir("/")
	if err != nil {
		return err
	}
	for _, e := range entries {
		// A link at the top (/bin -> usr/bin) reaches another entry; one
		// to /proc must not allow it.
		if hiddenTop[e.Name()] || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		if err := rs.Allow("/"+e.Name(), landlock.ReadFile|landlock.ReadDir); err != nil {
			return err
		}
	}
	for _, p := range ownFiles {
		if err := rs.Allow(p, landlock.ReadFile|landlock.ReadDir); err != nil && !errors.Is(err, syscall.ENOENT) {
			return err
		}
	}
	return rs.RestrictSelf()
}
