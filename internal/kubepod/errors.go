package kubepod

import "errors"

// ErrNoPod is a process whose cgroup names no Kubernetes Pod.
var ErrNoPod = errors.New("in no Kubernetes Pod (its cgroup names none)")

// ErrGone is a caller that exited before its Pod could be read: its pid
// may already be another process's.
var ErrGone = errors.New("the calling process exited before its Pod could be read")
