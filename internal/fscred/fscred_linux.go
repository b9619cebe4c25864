// Package fscred runs file-system calls with another user's file-system
// credentials, so that a process running as root (the daemon) reaches
// only what that user could reach itself: every lookup, open and
// access check is judged by the kernel as for the user (its uid, gid and
// supplementary groups against modes, ACLs and LSM labels).
//
// How: on a goroutine locked to its OS thread, a per-thread setgroups
// and setfsgid/setfsuid (raw system calls: glibc and Go's syscall
// package would change every thread of the process) give the thread the
// user's credentials for file-system access; changing the fsuid from 0
// drops CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER and the other
// file-system capabilities from the thread's effective set
// (capabilities(7)). The thread is never unlocked: the Go runtime ends
// it with its goroutine, so the changed credentials can never serve
// another goroutine. A descriptor opened there is the process's: another
// goroutine, with root's credentials, may read or write through it.
package fscred

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Creds are the file-system credentials to act with.
type Creds struct {
	UID, GID int
	Groups   []int
}

// Do runs f on a fresh OS thread whose file-system credentials are c
// (see the package comment) and returns its error; an error setting the
// credentials is returned without running f.
func (c Creds) Do(f func() error) error {
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread dies with this goroutine.
		runtime.LockOSThread()
		if err := c.take(); err != nil {
			done <- err
			return
		}
		done <- f()
	}()
	return <-done
}

// take gives the calling (locked) thread c's file-system credentials.
func (c Creds) take() error {
	groups := make([]uint32, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = uint32(g)
	}
	var gp uintptr
	if len(groups) > 0 {
		gp = uintptr(unsafe.Pointer(&groups[0]))
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), gp, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	// setfsuid/setfsgid return the previous id and never fail visibly;
	// read back to be sure the change took.
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(c.GID), 0, 0)
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(c.UID), 0, 0)
	if cur, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0); int(cur) != c.UID {
		return fmt.Errorf("setfsuid(%d) did not take (fsuid %d)", c.UID, cur)
	}
	if cur, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0); int(cur) != c.GID {
		return fmt.Errorf("setfsgid(%d) did not take (fsgid %d)", c.GID, cur)
	}
	return nil
}

// Split runs work with c's credentials while the steps it hands to
// asRoot run on the calling goroutine, with the process's own
// credentials, one at a time (work waits for each): a copy whose
// sources are opened as c and whose destinations are written as the
// process. asRoot returns the step's error. A nil c runs work directly
// (asRoot then runs each step in place).
func Split(c *Creds, work func(asRoot func(func() error) error) error) error {
	if c == nil {
		return work(func(f func() error) error { return f() })
	}
	steps := make(chan func() error)
	results := make(chan error)
	done := make(chan error, 1)
	go func() {
		done <- c.Do(func() error {
			return work(func(f func() error) error {
				steps <- f
				return <-results
			})
		})
	}()
	for {
		select {
		case f := <-steps:
			results <- f()
		case err := <-done:
			return err
		}
	}
}
