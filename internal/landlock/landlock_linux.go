// Package landlock confines a process's file reads with the kernel's
// Landlock LSM (Documentation/userspace-api/landlock.rst): a ruleset that
// handles the read rights, one rule per tree or file that stays readable,
// and landlock_restrict_self(2) on the calling thread. The domain is kept
// across execve(2) and inherited by every child, and no process can leave
// it. The package is cgo-free: corral-init, which is linked statically,
// uses it.
package landlock

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnavailable is returned (wrapped) when the kernel has no Landlock:
// ENOSYS (not built in, or a runtime such as gVisor's runsc that does not
// implement it), EOPNOTSUPP (built in, disabled at boot: Landlock is not
// in the lsm= list) or EPERM from landlock_create_ruleset(2) (a seccomp
// filter or sandbox kernel above the container refuses the call: gVisor's
// runsc answers so; corral's own seccomp allowlist allows it).
var ErrUnavailable = errors.New("landlock unavailable")

// unavailable reports whether landlock_create_ruleset(2) failing with
// errno means there is no Landlock to use (see ErrUnavailable).
func unavailable(errno unix.Errno) bool {
	return errno == unix.ENOSYS || errno == unix.EOPNOTSUPP || errno == unix.EPERM
}

// Read rights (ABI 1): what a Ruleset handles, and so denies where no rule
// allows it.
const (
	ReadFile = unix.LANDLOCK_ACCESS_FS_READ_FILE
	ReadDir  = unix.LANDLOCK_ACCESS_FS_READ_DIR
)

// ABI returns the Landlock ABI version the kernel serves (1 or more), or an
// error wrapping ErrUnavailable and the errno when there is none.
func ABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		if unavailable(errno) {
			return 0, fmt.Errorf("%w: %w", ErrUnavailable, errno)
		}
		return 0, fmt.Errorf("landlock abi: %w", errno)
	}
	return int(v), nil
}

// Ruleset is a Landlock ruleset being built. Close releases it; after
// RestrictSelf it is no longer needed.
type Ruleset struct{ fd int }

// NewRuleset creates a ruleset handling the rights in handled (ReadFile,
// ReadDir): once enforced, each of them is denied wherever no rule allows
// it. Errors wrap ErrUnavailable when the kernel has no Landlock.
func NewRuleset(handled uint64) (*Ruleset, error) {
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled}
	// Only the first field: it is the whole struct of ABI 1, which every
	// kernel with Landlock accepts.
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr.Handled_access_fs), 0)
	if errno != 0 {
		if unavailable(errno) {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, errno)
		}
		return nil, fmt.Errorf("landlock ruleset: %w", errno)
	}
	return &Ruleset{fd: int(fd)}, nil
}

// Allow adds a rule allowing access (a subset of the handled rights) on
// path and, for a directory, everything beneath it, through any mount
// below. The rule names the inode path resolves to now (symbolic links
// followed); a file gets only file rights (ReadDir is dropped for it).
// The error wraps the errno (ENOENT for a missing path).
func (r *Ruleset) Allow(path string, access uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("landlock rule %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("landlock rule %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &^= ReadDir
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(r.fd), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("landlock rule %s: %w", path, errno)
	}
	return nil
}

// RestrictSelf sets no_new_privs (landlock_restrict_self(2) needs it
// without CAP_SYS_ADMIN) and enforces the ruleset on the calling thread
// only: the caller locks its goroutine to the thread (runtime.LockOSThread)
// and execs from it, so the program it runs starts confined. It closes the
// ruleset.
func (r *Ruleset) RestrictSelf() error {
	defer r.Close()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(r.fd), 0, 0)
	if errno != 0 {
		return fmt.Errorf("landlock restrict: %w", errno)
	}
	return nil
}

// Close releases the ruleset; it is safe to call twice.
func (r *Ruleset) Close() error {
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return os.NewSyscallError("close", err)
}
