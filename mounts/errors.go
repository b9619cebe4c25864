package mounts

import (
	"fmt"

	"github.com/containerd/errdefs"
)

// ErrNotMounted is returned by Open when none of a layout's host mounts is
// present any more (the machine rebooted, or they were unmounted). The
// write area lived on a tmpfs: what the session wrote is gone with it.
var ErrNotMounted = fmt.Errorf("the session's host mounts are gone: %w", errdefs.ErrNotFound)
