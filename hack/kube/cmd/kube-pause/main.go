//go:build linux

// Command kube-pause is the test cluster's Pod sandbox ("pause") image
// program: it holds the Pod's namespaces by sleeping until SIGINT or SIGTERM
// (then exits 0) and, being PID 1 of a Pod that shares its PID namespace,
// reaps the children orphaned to it on SIGCHLD.
package main

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGCHLD)
	for s := range sigs {
		if s != unix.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
