// Command probe is a static test program placed in the integration tests'
// image (never in the default one). Each subcommand tries one thing from
// inside the container and prints what happened, so tests can assert that
// the kernel boundary holds where the policy might have a hole.
package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func errno(err error) string {
	if err == nil {
		return "ok"
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return errnoName(en)
	}
	return err.Error()
}

func errnoName(en syscall.Errno) string {
	switch en {
	case 0:
		return "ok"
	case syscall.EPERM:
		return "EPERM"
	case syscall.EACCES:
		return "EACCES"
	case syscall.EROFS:
		return "EROFS"
	case syscall.ENOENT:
		return "ENOENT"
	case syscall.ENOSYS:
		return "ENOSYS"
	case syscall.ENOSPC:
		return "ENOSPC"
	case syscall.EXDEV:
		return "EXDEV"
	case syscall.EBUSY:
		return "EBUSY"
	case syscall.EINVAL:
		return "EINVAL"
	case syscall.ENETUNREACH:
		return "ENETUNREACH"
	case syscall.ECONNREFUSED:
		return "ECONNREFUSED"
	case syscall.EAGAIN:
		return "EAGAIN"
	case syscall.ENOTDIR:
		return "ENOTDIR"
	case syscall.EEXIST:
		return "EEXIST"
	case syscall.EISDIR:
		return "EISDIR"
	case syscall.ELOOP:
		return "ELOOP"
	case syscall.ENAMETOOLONG:
		return "ENAMETOOLONG"
	case syscall.EFAULT:
		return "EFAULT"
	case syscall.EBADF:
		return "EBADF"
	}
	return fmt.Sprintf("errno%d", int(en))
}

// cstrings is a NULL-terminated array of C strings, as execve(2) takes.
func cstrings(ss []string) []*byte {
	out := make([]*byte, 0, len(ss)+1)
	for _, s := range ss {
		p, _ := unix.BytePtrFromString(s)
		out = append(out, p)
	}
	return append(out, nil)
}

func raw(trap uintptr, a ...uintptr) string {
	var args [6]uintptr
	copy(args[:], a)
	_, _, en := syscall.Syscall6(trap, args[0], args[1], args[2], args[3], args[4], args[5])
	return errnoName(en)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe CMD ARGS")
		os.Exit(2)
	}
	arg := func(i int) string {
		if len(os.Args) > i {
			return os.Args[i]
		}
		return ""
	}
	switch os.Args[1] {
	case "socket-inet":
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		if err == nil {
			syscall.Close(fd)
		}
		fmt.Println(errno(err))
	case "socket-inet6":
		_, err := syscall.Socket(syscall.AF_INET6, syscall.SOCK_STREAM, 0)
		fmt.Println(errno(err))
	case "socket-netlink":
		_, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW, 0)
		fmt.Println(errno(err))
	case "socket-unix":
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err == nil {
			syscall.Close(fd)
		}
		fmt.Println(errno(err))
	case "connect":
		c, err := net.DialTimeout("tcp", arg(2), 2*time.Second)
		if err == nil {
			c.Close()
		}
		fmt.Println(errno(err))
	case "ifaces":
		entries, err := os.ReadDir("/sys/class/net")
		if err != nil {
			fmt.Println(err)
			return
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		fmt.Println(strings.Join(names, " "))
	case "status":
		data, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(data), "\n") {
			for _, k := range []string{"Uid:", "Gid:", "Seccomp:", "CapEff:", "CapPrm:", "CapBnd:", "CapAmb:", "NoNewPrivs:"} {
				if strings.HasPrefix(l, k) {
					fmt.Println(strings.Join(strings.Fields(l), " "))
				}
			}
		}
	case "env":
		for _, e := range os.Environ() {
			fmt.Println(e)
		}
	case "write":
		err := os.WriteFile(arg(2), []byte(arg(3)), 0o644)
		fmt.Println(errno(err))
	case "create":
		// mkdir -p of the parent, then write: what an agent's "write P"
		// would try, so a refusal reads EROFS even where P's directory
		// does not exist yet.
		err := os.MkdirAll(filepath.Dir(arg(2)), 0o755)
		if err == nil {
			err = os.WriteFile(arg(2), []byte(arg(3)), 0o644)
		}
		fmt.Println(errno(err))
	case "mkdir":
		fmt.Println(errno(os.Mkdir(arg(2), 0o755)))
	case "link":
		fmt.Println(errno(os.Link(arg(2), arg(3))))
	case "bind-unix":
		// A unix socket left at the path (as a server would leave it).
		l, err := net.Listen("unix", arg(2))
		if err == nil {
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			err = l.Close()
		}
		fmt.Println(errno(err))
	case "rename":
		fmt.Println(errno(os.Rename(arg(2), arg(3))))
	case "remove":
		fmt.Println(errno(os.Remove(arg(2))))
	case "symlink":
		fmt.Println(errno(os.Symlink(arg(2), arg(3))))
	case "memfd":
		// An anonymous file: with execveat, a way to run bytes past noexec.
		fd, err := unix.MemfdCreate("probe", unix.MFD_CLOEXEC)
		if err == nil {
			unix.Close(fd)
		}
		fmt.Println(errno(err))
	case "execveat":
		// exec(2) of an open descriptor (fexecve(3)); on success the
		// program at PATH runs instead and prints what it prints.
		fd, err := unix.Open(arg(2), unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			fmt.Println(errno(err))
			return
		}
		empty, _ := unix.BytePtrFromString("")
		argv, envv := cstrings(os.Args[2:]), cstrings(os.Environ())
		_, _, en := unix.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
			uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])), unix.AT_EMPTY_PATH, 0)
		fmt.Println(errnoName(en))
	case "clone3":
		// clone3(2) with no arguments: EFAULT or EINVAL from the kernel,
		// ENOSYS from the filter (so libcs fall back to clone(2)).
		fmt.Println(raw(unix.SYS_CLONE3, 0, 0))
	case "read":
		data, err := os.ReadFile(arg(2))
		if err != nil {
			fmt.Println(errno(err))
			return
		}
		os.Stdout.Write(data)
	case "open-each":
		// One line per path: the errno of opening and reading it, or "ok"
		// and the sha256 of its bytes (never the bytes themselves).
		for _, p := range os.Args[2:] {
			data, err := os.ReadFile(p)
			if err != nil {
				fmt.Printf("%s\t%s\n", p, errno(err))
				continue
			}
			fmt.Printf("%s\tok %x\n", p, sha256.Sum256(data))
		}
	case "exec":
		err := syscall.Exec(arg(2), os.Args[2:], nil)
		fmt.Println(errno(err))
	case "unshare-user":
		fmt.Println(errno(syscall.Unshare(syscall.CLONE_NEWUSER)))
	case "unshare-mount":
		fmt.Println(errno(syscall.Unshare(syscall.CLONE_NEWNS)))
	case "clone-newuser":
		// clone(2) with a namespace flag, as glibc's fallback would issue it.
		pid, _, en := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.CLONE_NEWUSER|syscall.SIGCHLD), 0, 0, 0, 0, 0)
		if en == 0 && pid == 0 {
			os.Exit(0)
		}
		fmt.Println(errnoName(en))
	case "mount":
		fmt.Println(errno(syscall.Mount("x", "/tmp", "tmpfs", 0, "")))
	case "ptrace":
		fmt.Println(raw(syscall.SYS_PTRACE, syscall.PTRACE_TRACEME))
	case "bpf":
		fmt.Println(raw(321, 0, 0, 0)) // bpf(2) on x86_64
	case "io_uring_setup":
		var params [120]byte
		fmt.Println(raw(425, 1, uintptr(unsafe.Pointer(&params[0]))))
	case "keyctl":
		fmt.Println(raw(250, 0, 0)) // keyctl(KEYCTL_GET_KEYRING_ID)
	case "userfaultfd":
		fmt.Println(raw(323, 0))
	case "mknod":
		fmt.Println(errno(syscall.Mknod("/tmp/n", syscall.S_IFCHR|0o600, 0x0103)))
	case "mkfifo":
		fmt.Println(errno(syscall.Mknod(arg(2), syscall.S_IFIFO|0o600, 0)))
	case "sleep":
		d, _ := time.ParseDuration(arg(2))
		time.Sleep(d)
		fmt.Println("woke")
	case "spew":
		line := []byte(strings.Repeat("x", 1023) + "\n")
		for {
			if _, err := os.Stdout.Write(line); err != nil {
				return
			}
		}
	case "rlimit-cpu":
		// RLIMIT_CPU as getrlimit(2) reports it: "soft hard" in seconds.
		var r syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_CPU, &r); err != nil {
			fmt.Println(errno(err))
			return
		}
		fmt.Println(r.Cur, r.Max)
	case "forkbomb":
		// Start children until fork fails; report how it failed.
		var kids []*exec.Cmd
		for i := 0; i < 10000; i++ {
			c := exec.Command("/usr/bin/probe", "sleep", "20s")
			if err := c.Start(); err != nil {
				fmt.Printf("fork failed after %d: %v\n", i, errno(err))
				for _, k := range kids {
					k.Process.Kill()
				}
				os.Exit(3)
			}
			kids = append(kids, c)
		}
		fmt.Println("no limit")
	case "oom":
		var hog [][]byte
		for {
			b := make([]byte, 16<<20)
			for i := range b {
				b[i] = 1
			}
			hog = append(hog, b)
		}
	default:
		fmt.Fprintln(os.Stderr, "probe: unknown command", os.Args[1])
		os.Exit(2)
	}
}
