//go:build linux && cgo

package seccomp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// childEnv switches the test binary into TestKernelChild, which loads the
// built-in profile into its own process. Only TestKernelEnforces sets it.
const childEnv = "CORRAL_SECCOMP_TEST_CHILD"

// TestKernelEnforces re-executes the test binary with the built-in profile
// loaded into its own process (no runc, no containerd) and checks what the
// kernel then allows and denies, twice: loaded by libseccomp from the
// section Spec returns (what runc and crun do with the spec), and loaded
// raw from BPF's program (what crun does with run.oci.seccomp_bpf_data).
// The same assertions hold for both. The filter never touches this process.
func TestKernelEnforces(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	for _, loader := range []string{loadLibseccomp, loadBPF} {
		t.Run(loader, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKernelChild$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+loader)
			out, err := cmd.CombinedOutput()
			if strings.Contains(string(out), "--- SKIP: TestKernelChild") {
				t.Skipf("the child skipped:\n%s", out)
			}
			require.NoError(t, err, "child output:\n%s", out)
			require.Contains(t, string(out), "--- PASS: TestKernelChild", "child output:\n%s", out)
			t.Logf("child output:\n%s", out)
		})
	}
}

// The child's loaders (childEnv's values).
const (
	loadLibseccomp = "libseccomp"
	loadBPF        = "bpf"
)

// loadRawBPF loads prog into every thread of the process with
// seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC), after
// no_new_privs, as crun loads a run.oci.seccomp_bpf_data program.
func loadRawBPF(prog []byte) error {
	if len(prog) == 0 || len(prog)%8 != 0 {
		return fmt.Errorf("a BPF program of %d bytes", len(prog))
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog) / 8), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return errno
	}
	return nil
}

// TestKernelChild runs only as TestKernelEnforces's child. Every denied call
// below is made with arguments that fail harmlessly with another errno (or
// do nothing lasting) when no filter is loaded, so EPERM can only come from
// the filter, and a broken filter cannot damage the host.
func TestKernelChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs only as the child of TestKernelEnforces")
	}
	loader := os.Getenv(childEnv)
	s, err := Default().Spec()
	require.NoError(t, err)
	load := func() error {
		f := compile(t, s)
		defer f.Release()
		if err := f.SetNoNewPrivsBit(true); err != nil {
			return err
		}
		return f.Load()
	}
	if loader == loadBPF {
		prog, err := BPF(s)
		require.NoError(t, err)
		load = func() error { return loadRawBPF(prog) }
	}

	// Control: without the filter an inet socket can be created, so the
	// EPERM below is the filter's doing.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Skipf("cannot create an inet socket even without the filter: %v", err)
	}
	unix.Close(fd)

	// The tools' tree, made before the filter: a container never creates
	// a repository (git is read-only there, and chmod is denied).
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("beta\nalpha needle\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.txt"), []byte("beta\nalpha needle\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "tree"), 0o755))
	require.NoError(t, os.Symlink("../a.txt", filepath.Join(dir, "tree", "link")))
	repo := filepath.Join(dir, "repo")
	git := []string{"git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}
	haveGit := false
	if _, err := exec.LookPath("git"); err == nil {
		for _, argv := range [][]string{
			{"git", "init", "-q", repo},
			append(slices.Clone(git), "commit", "-q", "--allow-empty", "-m", "first"),
		} {
			out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
			require.NoError(t, err, "%q: %s", argv, out)
		}
		haveGit = true
	}

	// Both loaders set TSYNC (NewFilter does for libseccomp), so the
	// filter covers every thread of the process; locking the thread keeps
	// the rest of the test on the one that loaded.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := load(); err != nil {
		t.Skipf("the kernel refused the filter: %v", err)
	}
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	require.Contains(t, string(status), "Seccomp:\t2", "filter mode")

	t.Run("denied", func(t *testing.T) {
		missing := cstring(t, "/nonexistent-corral-seccomp-test")
		missingChild := cstring(t, "/nonexistent-corral-seccomp-test/x")
		atFDCWD := unix.AT_FDCWD
		for _, tc := range []struct {
			name string
			call func() error
			want syscall.Errno
		}{
			{"socket AF_INET", socketCall(unix.AF_INET), unix.EPERM},
			{"socket AF_INET6", socketCall(unix.AF_INET6), unix.EPERM},
			{"socket AF_NETLINK", socketCall(unix.AF_NETLINK), unix.EPERM},
			{"socket AF_PACKET", socketCall(unix.AF_PACKET), unix.EPERM},
			{"socket AF_VSOCK", socketCall(unix.AF_VSOCK), unix.EPERM},
			{"socket AF_UNIX|high bits", socketCall(1<<32 | unix.AF_UNIX), unix.EPERM},
			{"socketpair AF_INET", func() error {
				_, err := unix.Socketpair(unix.AF_INET, unix.SOCK_STREAM, 0)
				return err
			}, unix.EPERM},
			// Unfiltered, these would succeed: the filter is all that
			// stops them, which is the point.
			{"unshare CLONE_NEWUSER", func() error { return unix.Unshare(unix.CLONE_NEWUSER) }, unix.EPERM},
			{"unshare CLONE_NEWNS", func() error { return unix.Unshare(unix.CLONE_NEWNS) }, unix.EPERM},
			{"keyctl", func() error {
				_, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
				return err
			}, unix.EPERM},
			// Unfiltered, these fail with ENOENT, ESRCH, EBADF, EFAULT
			// or EINVAL.
			{"mount", raw(unix.SYS_MOUNT, missing, missing, missing, 0, 0), unix.EPERM},
			{"umount2", raw(unix.SYS_UMOUNT2, missing, 0, 0, 0, 0), unix.EPERM},
			{"pivot_root", raw(unix.SYS_PIVOT_ROOT, missing, missing, 0, 0, 0), unix.EPERM},
			{"chroot", raw(unix.SYS_CHROOT, missing, 0, 0, 0, 0), unix.EPERM},
			{"setns", raw(unix.SYS_SETNS, ^uintptr(0), 0, 0, 0, 0), unix.EPERM},
			{"mknodat", raw(unix.SYS_MKNODAT, uintptr(atFDCWD), missing, unix.S_IFCHR, 0, 0), unix.EPERM},
			{"ptrace", raw(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, 0x7fffffff, 0, 0, 0), unix.EPERM},
			{"process_vm_readv", raw(unix.SYS_PROCESS_VM_READV, 0x7fffffff, 0, 0, 0, 0), unix.EPERM},
			{"bpf", raw(unix.SYS_BPF, 0, 0, 0, 0, 0), unix.EPERM},
			{"perf_event_open", raw(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0), unix.EPERM},
			{"io_uring_setup", raw(unix.SYS_IO_URING_SETUP, 0, 0, 0, 0, 0), unix.EPERM},
			{"userfaultfd", raw(unix.SYS_USERFAULTFD, 0xffff, 0, 0, 0, 0), unix.EPERM},
			{"open_by_handle_at", raw(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), 0, 0, 0, 0), unix.EPERM},
			{"reboot", raw(unix.SYS_REBOOT, 0, 0, 0, 0, 0), unix.EPERM},
			{"init_module", raw(unix.SYS_INIT_MODULE, 0, 0, 0, 0, 0), unix.EPERM},
			{"personality", raw(unix.SYS_PERSONALITY, 0xffffffff, 0, 0, 0, 0), unix.EPERM},
			{"clone3 falls back", raw(unix.SYS_CLONE3, 0, 0, 0, 0, 0), unix.ENOSYS},
			{"clone CLONE_NEWUSER", cloneCall(unix.CLONE_NEWUSER), unix.EPERM},
			{"clone CLONE_NEWNET", cloneCall(unix.CLONE_NEWNET), unix.EPERM},
			// No links: unfiltered, these fail with ENOENT.
			{"link", raw(unix.SYS_LINK, missing, missing, 0, 0, 0), unix.EPERM},
			{"linkat", raw(unix.SYS_LINKAT, uintptr(atFDCWD), missing, uintptr(atFDCWD), missing, 0), unix.EPERM},
			{"symlink", raw(unix.SYS_SYMLINK, missing, missingChild, 0, 0, 0), unix.EPERM},
			{"symlinkat", raw(unix.SYS_SYMLINKAT, missing, uintptr(atFDCWD), missingChild, 0, 0), unix.EPERM},
			// Nothing runs past noexec. Unfiltered, memfd_create succeeds
			// (the descriptor is closed) and execveat fails with EBADF.
			{"memfd_create", func() error {
				fd, err := unix.MemfdCreate("corral-seccomp-test", unix.MFD_CLOEXEC)
				if err == nil {
					unix.Close(fd)
				}
				return err
			}, unix.EPERM},
			{"execveat", raw(unix.SYS_EXECVEAT, ^uintptr(0), missing, 0, 0, unix.AT_EMPTY_PATH), unix.EPERM},
			// No sockets at all; unfiltered these succeed (closed at once).
			{"socket AF_UNIX", socketCall(unix.AF_UNIX), unix.EPERM},
			{"socketpair AF_UNIX", func() error {
				fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
				if err == nil {
					unix.Close(fds[0])
					unix.Close(fds[1])
				}
				return err
			}, unix.EPERM},
			// ioctl only with the four requests of the tools: unfiltered,
			// TIOCGPGRP on a bad descriptor fails with EBADF.
			{"ioctl TIOCGPGRP", raw(unix.SYS_IOCTL, ^uintptr(0), unix.TIOCGPGRP, 0, 0, 0), unix.EPERM},
			{"ioctl TCGETS with high bits", raw(unix.SYS_IOCTL, ^uintptr(0), 1<<32|unix.TCGETS, 0, 0, 0), unix.EPERM},
			// prlimit64 only on the caller: unfiltered, reading the
			// parent's limits succeeds (as root) and changes nothing.
			{"prlimit64 of another process", func() error {
				var old unix.Rlimit
				return unix.Prlimit(os.Getppid(), unix.RLIMIT_NOFILE, nil, &old)
			}, unix.EPERM},
			// Ids never change: unfiltered, setting one's own uid succeeds.
			{"setuid", raw(unix.SYS_SETUID, uintptr(os.Getuid()), 0, 0, 0, 0), unix.EPERM},
		} {
			t.Run(tc.name, func(t *testing.T) {
				require.ErrorIs(t, tc.call(), tc.want)
			})
		}
	})

	t.Run("allowed", func(t *testing.T) {
		var fds [2]int
		require.NoError(t, unix.Pipe2(fds[:], unix.O_CLOEXEC))
		_, err := unix.Write(fds[1], []byte("x"))
		require.NoError(t, err)
		// isatty(3) on a pipe: the ioctl runs and says ENOTTY.
		_, err = unix.IoctlGetTermios(fds[0], unix.TCGETS)
		require.ErrorIs(t, err, unix.ENOTTY)
		n, err := unix.IoctlGetInt(fds[0], unix.TIOCINQ) // FIONREAD
		require.NoError(t, err)
		require.Equal(t, 1, n)
		unix.Close(fds[0])
		unix.Close(fds[1])
		var lim unix.Rlimit
		require.NoError(t, unix.Prlimit(0, unix.RLIMIT_NOFILE, nil, &lim))
		// A plain clone (fork + exec of a Go binary: the runtime's
		// start-up under the filter).
		out, err := exec.Command(os.Args[0], "-test.run=^$").CombinedOutput()
		require.NoError(t, err, "%s", out)
	})

	t.Run("tools", func(t *testing.T) {
		for _, argv := range [][]string{
			{"ls", "-laR", dir},
			{"cat", filepath.Join(dir, "a.txt")},
			{"grep", "-rn", "needle", dir},
			{"find", "-P", dir, "-name", "*.txt", "-newer", "/"},
			{"sed", "--sandbox", "-n", "s/beta/gamma/p", filepath.Join(dir, "a.txt")},
			{"sort", filepath.Join(dir, "a.txt")},
			{"diff", "--no-dereference", "-u", filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")},
			{"cp", "-p", filepath.Join(dir, "a.txt"), filepath.Join(dir, "c.txt")},
			{"mv", filepath.Join(dir, "c.txt"), filepath.Join(dir, "d.txt")},
			{"mkdir", "-p", filepath.Join(dir, "x", "y")},
			{"touch", filepath.Join(dir, "x", "y", "z")},
			{"rm", "-r", filepath.Join(dir, "x")},
			{"stat", filepath.Join(dir, "a.txt")},
			{"file", filepath.Join(dir, "a.txt")},
			{"rg", "needle", dir},
			{"busybox", "ls", "-l", dir},
			{"busybox", "sh", "-c", "echo hi | busybox wc -c"},
			{"sh", "-c", "ls " + dir + " | sort | head -1"},
			append(slices.Clone(git), "log", "--oneline"),
			append(slices.Clone(git), "status", "--short"),
		} {
			t.Run(argv[0], func(t *testing.T) {
				if _, err := exec.LookPath(argv[0]); err != nil {
					t.Skipf("%s not installed", argv[0])
				}
				if argv[0] == "git" && !haveGit {
					t.Skip("git not installed")
				}
				cmd := exec.Command(argv[0], argv[1:]...)
				cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C")
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "%q under the filter:\n%s", argv, out)
			})
		}
		// cp -r copies a link as a link; under the filter that fails
		// cleanly and makes nothing.
		t.Run("cp -r of a link", func(t *testing.T) {
			copy := filepath.Join(dir, "copy")
			out, err := exec.Command("cp", "-r", filepath.Join(dir, "tree"), copy).CombinedOutput()
			require.Error(t, err)
			require.Contains(t, string(out), "Operation not permitted")
			_, err = os.Lstat(filepath.Join(copy, "link"))
			require.ErrorIs(t, err, os.ErrNotExist)
		})
	})
}

func socketCall(domain int) func() error {
	return func() error {
		fd, err := unix.Socket(domain, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
}

// cloneCall starts /bin/true in new namespaces; Go's fork uses clone(2).
func cloneCall(flags uintptr) func() error {
	return func() error {
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
		return cmd.Run()
	}
}

func raw(nr uintptr, a1, a2, a3, a4, a5 uintptr) func() error {
	return func() error {
		_, _, errno := unix.Syscall6(nr, a1, a2, a3, a4, a5, 0)
		if errno == 0 {
			return nil
		}
		return errno
	}
}

// cstring returns a pointer to a NUL-terminated copy of s that stays alive
// for the test.
func cstring(t *testing.T, s string) uintptr {
	p, err := unix.BytePtrFromString(s)
	require.NoError(t, err)
	t.Cleanup(func() { runtime.KeepAlive(p) })
	return uintptr(unsafe.Pointer(p))
}
