package rootfs

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// retryDeadline bounds how long one lookup retries. openat2 fails with
// EAGAIN when a rename or mount anywhere on the system raced a lookup
// that resolved ".." (openat2(2), RESOLVE_BENEATH); runc measured such
// races clearing within a millisecond under heavy rename load, so ten is
// generous on a loaded machine and still bounds a lookup that an attacker
// keeps racing.
const retryDeadline = 10 * time.Millisecond

// retryEAGAIN calls fn until it fails with something other than EAGAIN or
// EINTR, or until retryDeadline has passed; then the last error is
// returned, wrapped, so that errors.Is(err, unix.EAGAIN) still holds.
// It is the only retry loop of the package.
func retryEAGAIN[T any](fn func() (T, error)) (T, error) {
	deadline := time.Now().Add(retryDeadline)
	for {
		v, err := fn()
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return v, err
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("still racing after %v: %w", retryDeadline, err)
		}
	}
}
