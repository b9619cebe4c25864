//go:build !linux

package landlock

import "errors"

// ErrUnavailable: Landlock is a Linux LSM.
var ErrUnavailable = errors.New("landlock unavailable")

// ABI reports that there is no Landlock off Linux.
func ABI() (int, error) { return 0, ErrUnavailable }
