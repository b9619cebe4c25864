// Command corral-init is the first process of every container corral
// creates, and stays its PID 1. It is static (CGO_ENABLED=0) and bound
// read-only into each container at /.corral/init from a content-addressed
// copy in corral's state directory, so it works with any image and never
// needs one rebuilt.
//
// Usage (fixed when the container is created): corral-init CTLFILE
//
// CTLFILE, in the session's control directory (bound read-only at
// /.corral/ctl), holds one initctl.Request: a regular file the
// supervisor wrote after the container was created and before it
// started it, or a FIFO, for a container started ahead of its call:
// corral-init then waits (at most initctl.MaxWait) in its open until the
// supervisor opens it to write the request, and reads to its end.
// corral-init reads it and, by its mode:
//   - exec: resolves argv[0] against PATH (a bare name only; the allowlist
//     refused anything else), starts the tool as its child with the
//     environment the spec fixed and the standard streams it was given,
//     reaps every process of the container (orphans are re-parented to
//     PID 1) and exits when the tool does: with the tool's exit code, or
//     128+N when a signal N ended it, as a shell reports it. Its exit, as
//     PID 1 of the pid namespace, makes the kernel kill whatever the tool
//     left running (pid_namespaces(7));
//   - fs: runs one file-tool operation in-process (sandbox/fsop) against
//     its working directory, the repository view, and prints the answer.
//
// In both modes corral-init holds the request's deadline itself: when it
// passes, it kills every process of the container (kill(-1, SIGKILL) from
// PID 1 of the pid namespace signals every other process in it,
// kill(2)) and exits 137, so a tool never outlives its timeout even when
// the supervisor that should have killed it is dead. The supervisor's
// deadline is a little earlier (the request's carries a grace), so its
// own kill, which reports "timeout", normally comes first.
//
// Signals: corral-init catches every catchable signal and forwards none.
// From inside the container only a process with a handler can be
// signalled as PID 1, so without this a tool could end corral-init (and
// with it the container) by `kill 1`; from outside, the supervisor only
// ever sends SIGKILL, which no process can catch. The tool starts with
// every signal at its default disposition (handled signals are reset at
// exec, execve(2)).
//
// Exit codes when it cannot run the tool: 127 (not found), 126 (exec
// failed), 125 (bad control file); 137 when the deadline passed.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corral-sandbox/corral/internal/initctl"
	"github.com/corral-sandbox/corral/internal/rootfs"
	"github.com/corral-sandbox/corral/sandbox/fsop"
	"golang.org/x/sys/unix"
)

// exitDeadline is corral-init's exit code when the deadline passed: that
// of a process killed by SIGKILL.
const exitDeadline = 128 + int(syscall.SIGKILL)

func fail(code int, s string) {
	os.Stderr.WriteString("corral-init: " + s + "\n")
	os.Exit(code)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == stageArg {
		// The tool's own process, between fork and the tool's exec.
		os.Exit(confineAndExec(os.Args[2:]))
	}
	// Before anything else: no signal from inside the container ends
	// PID 1, and none is forwarded.
	signal.Notify(make(chan os.Signal, 1))
	if len(os.Args) != 2 {
		fail(125, "usage: corral-init CTLFILE")
	}
	// Started ahead, corral-init may wait here for a call that never
	// comes (its supervisor died): it ends itself, nothing run.
	idle := time.AfterFunc(initctl.MaxWait, func() {
		fail(125, "no request within "+initctl.MaxWait.String())
	})
	data, err := readFile(os.Args[1])
	if err != nil || !idle.Stop() {
		if err == nil {
			select {} // the idle timer is ending the process
		}
		fail(125, "cannot read control file "+os.Args[1]+": "+err.Error())
	}
	req, err := initctl.Decode(data)
	if err != nil {
		fail(125, err.Error())
	}
	holdDeadline(req.Deadline())
	switch req.Mode {
	case initctl.FS:
		os.Exit(fsop.Main(req.Argv, os.Stdout, os.Stderr))
	default:
		os.Exit(supervise(req.Argv))
	}
}

// toolPid is the tool's pid once started (exec mode).
var toolPid atomic.Int64

// holdDeadline kills every process of the container and exits once d has
// passed. kill(-1) is only used as PID 1 of a pid namespace, where it
// reaches exactly the container's processes; anywhere else (never the
// case in a corral container) corral-init kills only the tool.
func holdDeadline(d time.Duration) {
	time.AfterFunc(d, func() {
		// The message first: once the tool is dead, supervise may exit.
		os.Stderr.WriteString("corral-init: deadline of " + d.String() + " passed: every process of the container was killed\n")
		if os.Getpid() == 1 {
			_ = syscall.Kill(-1, syscall.SIGKILL)
		} else if pid := toolPid.Load(); pid > 0 {
			_ = syscall.Kill(int(pid), syscall.SIGKILL)
		}
		os.Exit(exitDeadline)
	})
}

// supervise starts argv as a child and reaps every process until the
// child exits; it returns the exit code corral-init exits with.
func supervise(argv []string) int {
	pid := start(argv)
	toolPid.Store(int64(pid))
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			fail(125, "waiting for "+argv[0]+": "+err.Error())
		case got != pid:
			continue // an orphan the tool left, re-parented to PID 1
		case ws.Signaled():
			return 128 + int(ws.Signal())
		case ws.Exited():
			return ws.ExitStatus()
		}
	}
}

// start starts the tool's process: corral-init again, from the same file
// (/proc/self/exe), in its confining stage (confineAndExec), which execs
// argv with corral-init's environment, working directory and standard
// streams. It returns the child's pid, which stays the tool's; the stage
// exits 127 (not found) or 126 (not runnable, or not confined) itself.
func start(argv []string) int {
	attr := &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}}
	pid, err := syscall.ForkExec(selfExe, append([]string{"corral-init", stageArg}, argv...), attr)
	if err != nil {
		fail(126, "start "+argv[0]+": "+err.Error())
	}
	return pid
}

// execTool resolves argv[0] against PATH and execs it in place of the
// calling process; it returns only when it cannot: 127 when no PATH
// directory holds argv[0], 126 when one does and the exec failed.
func execTool(argv []string) int {
	env := os.Environ()
	path := ""
	for _, kv := range env {
		if len(kv) > 5 && kv[:5] == "PATH=" {
			path = kv[5:]
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		full := dir + "/" + argv[0]
		err := syscall.Exec(full, argv, env)
		if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTDIR) {
			os.Stderr.WriteString("corral-init: exec " + full + ": " + err.Error() + "\n")
			return 126
		}
	}
	os.Stderr.WriteString("corral-init: " + argv[0] + ": command not found\n")
	return 127
}

// readFile reads the control file (a regular file or a FIFO, no link on
// the way below its directory) at most initctl.MaxBytes. A FIFO is opened
// blocking, through the descriptor its resolution gave, so the open
// returns once the supervisor opened it for writing; it is read to its
// end (the supervisor's close).
func readFile(p string) ([]byte, error) {
	d, err := rootfs.OpenRoot(filepath.Dir(p))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	pf, err := d.Open(filepath.Base(p), rootfs.NoSymlinks, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(pf.Fd()), &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return rootfs.ReadFileInRoot(filepath.Dir(p), filepath.Base(p), rootfs.NoSymlinks, initctl.MaxBytes)
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", pf.Fd()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for errors.Is(err, unix.EINTR) {
		fd, err = unix.Open(fmt.Sprintf("/proc/self/fd/%d", pf.Fd()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	data, err := rootfs.ReadAtMost(f, 0, initctl.MaxBytes)
	if err == nil && len(data) > initctl.MaxBytes {
		err = fmt.Errorf("more than %d bytes", initctl.MaxBytes)
	}
	return data, err
}
