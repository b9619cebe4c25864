package rootfs

import (
	"errors"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// ReadAtMost reads f from its current offset to its end, but never more
// than limit+1 bytes, so that a caller can tell a file of exactly limit
// bytes from a larger one without reading the rest. size (the fstat size,
// 0 when unknown) only sizes the first buffer: a file that grows or
// shrinks after its fstat is read as it is. EINTR and EAGAIN (an
// O_NONBLOCK descriptor) are retried.
func ReadAtMost(f *os.File, size, limit int64) ([]byte, error) {
	fd := int(f.Fd())
	end := int(limit + 1)
	buf := make([]byte, 0, min(max(size, 0), limit)+1)
	for len(buf) < end {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), end-len(buf)))
		}
		n, err := unix.Read(fd, buf[len(buf):min(cap(buf), end)])
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: f.Name(), Err: err}
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	return buf, nil
}
