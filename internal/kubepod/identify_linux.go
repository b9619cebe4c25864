package kubepod

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// maxCgroupFile bounds /proc/PID/cgroup (a line per v1 hierarchy).
const maxCgroupFile = 64 << 10

// Identify returns the Pod UID of the process pidfd refers to, or an
// error wrapping ErrNoPod (in no Pod) or ErrGone (it exited meanwhile).
// procRoot is where procfs is mounted ("/proc"); the daemon must see the
// node's PID namespace (hostPID) for the pid to mean anything.
//
// The pid is the pidfd's own (its fdinfo's "Pid:" line), /proc/PID is
// opened once and its cgroup file read through that descriptor, and then
// the pidfd must still name a live process (pidfd_send_signal with signal
// 0): a live process holds its pid, so /proc/PID was that process all
// along and a pid reused by another process can never lend its Pod. The
// cgroup path must follow the kubelet's layout below the kubelet's cgroup
// root, learned from this process's own cgroup (UIDFromCgroup,
// KubeletCgroupRoots).
func Identify(procRoot string, pidfd int) (string, error) {
	pid, err := PidOf(pidfd)
	if err != nil {
		return "", err
	}
	dir, err := unix.Open(procRoot+"/"+strconv.Itoa(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
			return "", fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		return "", fmt.Errorf("opening %s/%d: %w", procRoot, pid, err)
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, "cgroup", unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
			return "", fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		return "", fmt.Errorf("reading pid %d's cgroup: %w", pid, err)
	}
	f := os.NewFile(uintptr(fd), "cgroup")
	text, err := io.ReadAll(io.LimitReader(f, maxCgroupFile))
	f.Close()
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return "", fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		return "", fmt.Errorf("reading pid %d's cgroup: %w", pid, err)
	}
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		return "", fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	uid, err := UIDFromCgroup(text, ownRoots()...)
	if err != nil {
		return "", fmt.Errorf("pid %d: %w", pid, err)
	}
	return uid, nil
}

// ownRoots is KubeletCgroupRoots of this process's own cgroup file, read
// once: the kubelet's cgroup root when this process (the daemon) runs in
// a Pod. Nothing a caller does can change it.
var ownRoots = sync.OnceValue(func() []string {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return []string{"/"}
	}
	return KubeletCgroupRoots(self)
})

// PidOf returns the pid (in the caller's PID namespace) of the process
// pidfd refers to, from /proc/self/fdinfo (Linux 5.3): ErrGone when it has
// exited (-1), an error when it is in a PID namespace the caller cannot
// see (0).
func PidOf(pidfd int) (int, error) {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(pidfd))
	if err != nil {
		return 0, fmt.Errorf("reading the pidfd's fdinfo: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "Pid:")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(v))
		switch {
		case err != nil:
			return 0, fmt.Errorf("the pidfd's fdinfo: Pid %q: %w", v, err)
		case pid == -1:
			return 0, ErrGone
		case pid == 0:
			return 0, errors.New("the caller is in a PID namespace this daemon cannot see (run it with the node's PID namespace, hostPID)")
		}
		return pid, nil
	}
	return 0, errors.New("the pidfd's fdinfo has no Pid line (not a pidfd)")
}
