package sandbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
)

// ErrContainerdGone is wrapped (with errdefs.ErrUnavailable) by the error
// of a call during which containerd stopped answering.
var ErrContainerdGone = errors.New("containerd stopped answering")

// errNotStarted is wrapped by the error of a call whose container made
// ahead had died before its start (its init killed while it waited —
// the kernel's OOM killer in a tight memory cgroup, a killed shim — so
// the runtime answers "cannot start a container that has stopped", or
// containerd no longer knows the task): the tool never ran.
var errNotStarted = errors.New("the container died before it was started")

// ErrShimSilent is wrapped (with errdefs.ErrUnavailable) by the error of
// a call whose container's shim did not report the exit within killWait
// of the kill, or did not end the output within ioWait of the exit (the
// shim stopped, or starved of the CPU). The tool was killed (on runc and
// crun the supervisor also killed its cgroups' processes itself); its
// result is lost, and the container is destroyed.
var ErrShimSilent = errors.New("the container's shim did not answer")

// shimSilentError is an error wrapping ErrShimSilent and
// errdefs.ErrUnavailable whose text is msg alone.
type shimSilentError struct{ msg string }

func (e *shimSilentError) Error() string   { return e.msg }
func (e *shimSilentError) Unwrap() []error { return []error{ErrShimSilent, errdefs.ErrUnavailable} }

// errStatusLost is wrapped (with errNotStarted) by the error of a call
// whose container made ahead lost the stream of its task's status before
// the call (containerd restarted while it waited): so did every other
// container made ahead before the restart.
var errStatusLost = errors.New("its status stream broke")

// errRequestCut is wrapped (with the context's cause) by the error of a
// call whose context ended while its request was written to a container
// started ahead: the container is killed and reaped before the call
// returns, as its init may have read part of the request.
var errRequestCut = errors.New("the call ended while its request was written")

// notStartedError is a start's error, its text unchanged, that also
// wraps errNotStarted.
type notStartedError struct{ err error }

func (e *notStartedError) Error() string   { return e.err.Error() }
func (e *notStartedError) Unwrap() []error { return []error{errNotStarted, e.err} }

// wrapContainerd returns err with context: when containerd stopped
// answering (the gRPC connection broke: codes.Unavailable), one line
// saying what happened and what to do, wrapping ErrContainerdGone and
// errdefs.ErrUnavailable; else "what: err".
func (e *Executor) wrapContainerd(what string, err error) error {
	if err == nil {
		return nil
	}
	if errdefs.IsUnavailable(errgrpc.ToNative(err)) || errdefs.IsUnavailable(err) {
		return &goneError{address: e.cfg.Address, what: what}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// goneError is ErrContainerdGone's error: one line, no gRPC text.
type goneError struct{ address, what string }

func (g *goneError) Error() string {
	return fmt.Sprintf("containerd at %s stopped answering while %s; the container is reaped at the next corral start: start containerd again, then repeat the call", g.address, g.what)
}

func (g *goneError) Unwrap() []error { return []error{ErrContainerdGone, errdefs.ErrUnavailable} }

// oneLine folds err's message onto one line.
func oneLine(err error) string {
	if err == nil {
		return ""
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
