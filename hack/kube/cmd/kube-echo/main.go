//go:build linux

// Command kube-echo is the smoke test's unix-socket server and client:
//
//	kube-echo serve SOCKET     listen on SOCKET (mode 0666), answer each line
//	kube-echo call SOCKET MSG  send MSG, print the answer; waits up to -wait
//	                           for SOCKET to accept
//	kube-echo tmpfs DIR        mount a tmpfs on DIR, write DIR/mounted, wait
//	                           for SIGTERM, unmount (checks mount propagation
//	                           from a Pod to the node)
//
// The server answers "echo MSG uid=U pid=P pod=UID" with the peer's
// credentials from SO_PEERCRED (pid is 0 when the client's PID namespace is
// not visible from the server's) and, when /proc/P/cgroup is readable, the
// Pod UID from the kubelet's cgroup path (.../pod<UID>/<container>) — the
// chain a node daemon uses to tell which Pod is calling.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral-sandbox/corral/internal/kubepod"
	"golang.org/x/sys/unix"
)

func main() {
	wait := flag.Duration("wait", 30*time.Second, "call: how long to retry connecting")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kube-echo serve SOCKET | kube-echo [-wait D] call SOCKET MSG | kube-echo tmpfs DIR")
	}
	flag.Parse()
	args := flag.Args()
	var err error
	switch {
	case len(args) == 2 && args[0] == "serve":
		err = serve(args[1])
	case len(args) == 3 && args[0] == "call":
		err = call(args[1], args[2], *wait)
	case len(args) == 2 && args[0] == "tmpfs":
		err = tmpfs(args[1])
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func serve(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	// connect(2) on a unix socket needs write permission on its file.
	if err := os.Chmod(path, 0o666); err != nil {
		return err
	}
	log.Printf("listening on %s", path)
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go handle(c.(*net.UnixConn))
	}
}

func handle(c *net.UnixConn) {
	defer c.Close()
	peer := "uid=? pid=?"
	if raw, err := c.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
				peer = fmt.Sprintf("uid=%d pid=%d pod=%s", cred.Uid, cred.Pid, podOf(cred.Pid))
			}
		})
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		log.Printf("%s: reading: %v", peer, err)
		return
	}
	msg := strings.TrimSpace(line)
	log.Printf("%s: %q", peer, msg)
	fmt.Fprintf(c, "echo %s %s\n", msg, peer)
}

// podOf returns the Pod UID in pid's cgroup path (package kubepod, as
// corral's daemon reads it), or "?".
func podOf(pid int32) string {
	if pid <= 0 {
		return "?"
	}
	pidfd, err := unix.PidfdOpen(int(pid), 0)
	if err != nil {
		return "?"
	}
	defer unix.Close(pidfd)
	uid, err := kubepod.Identify("/proc", pidfd)
	if err != nil {
		return "?"
	}
	return uid
}

func call(path, msg string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		c, err := net.Dial("unix", path)
		if err != nil {
			if time.Now().After(deadline) {
				return err
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
			return err
		}
		answer, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading answer: %w", err)
		}
		fmt.Print(answer)
		return nil
	}
}

func tmpfs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("kube-echo", dir, "tmpfs", 0, "size=1m"); err != nil {
		return fmt.Errorf("mounting tmpfs on %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mounted"), []byte("by kube-echo\n"), 0o644); err != nil {
		return err
	}
	log.Printf("tmpfs mounted on %s", dir)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT)
	<-sigs
	return unix.Unmount(dir, unix.MNT_DETACH)
}
