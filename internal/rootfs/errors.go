package rootfs

import (
	"fmt"

	"github.com/containerd/errdefs"
)

var (
	// ErrNotRegular is returned when a file to be read is not a regular
	// file (a directory, link, fifo, socket or device is never opened for
	// reading). It wraps errdefs.ErrFailedPrecondition.
	ErrNotRegular = fmt.Errorf("not a regular file: %w", errdefs.ErrFailedPrecondition)
	// ErrTooLarge is returned when a file is larger than the reader's
	// limit. It wraps errdefs.ErrFailedPrecondition.
	ErrTooLarge = fmt.Errorf("file too large: %w", errdefs.ErrFailedPrecondition)
	// ErrChanged is returned when what was opened is not the inode that
	// was examined before (a rename raced the caller). It wraps
	// errdefs.ErrFailedPrecondition.
	ErrChanged = fmt.Errorf("changed while being opened: %w", errdefs.ErrFailedPrecondition)
	// ErrBadName is returned for a name that is not one path component
	// ("", ".", "..", or holding '/' or NUL), and for an unsafePath with a
	// ".." component where only descending is allowed. It wraps
	// errdefs.ErrInvalidArgument.
	ErrBadName = fmt.Errorf("not a path component: %w", errdefs.ErrInvalidArgument)
)
