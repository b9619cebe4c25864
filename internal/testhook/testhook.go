// Package testhook is the seam through which corral's own tests reach
// what its exported API withholds: running an argv in a session with no
// policy check at all, to prove that the kernel boundary (mounts,
// seccomp, namespaces, limits) holds where the policy has a hole — the
// hostile cases' in_box steps; and named points (Point) where a test
// acts between two steps of corral's code, as a racing attacker would. It is internal (only this module can
// import it) and answers only in a test binary (testing.Testing); the
// typed wrapper tests call is internal/testutil.ExecWithoutPolicy.
package testhook

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
)

// ExecFunc runs argv in session (a *sandbox.Session) without the policy
// and returns its *sandbox.Result.
type ExecFunc func(ctx context.Context, session any, argv []string, stdout, stderr io.Writer) (any, error)

var execWithoutPolicy ExecFunc

// SetExecWithoutPolicy is called once, by package sandbox's init.
func SetExecWithoutPolicy(f ExecFunc) { execWithoutPolicy = f }

// ErrNotTest is returned outside a test binary.
var ErrNotTest = errors.New("testhook: only test binaries may run a command without the policy")

// ExecWithoutPolicy runs argv in session with no allowlist check; outside
// a test binary it refuses with ErrNotTest.
func ExecWithoutPolicy(ctx context.Context, session any, argv []string, stdout, stderr io.Writer) (any, error) {
	if !testing.Testing() || execWithoutPolicy == nil {
		return nil, ErrNotTest
	}
	return execWithoutPolicy(ctx, session, argv, stdout, stderr)
}

// points are the functions tests registered at named points (Point).
var points sync.Map

// SetPoint registers f to run at the point name (nil removes it); it
// panics outside a test binary.
func SetPoint(name string, f func() error) {
	if !testing.Testing() {
		panic("testhook: points are for test binaries")
	}
	if f == nil {
		points.Delete(name)
		return
	}
	points.Store(name, f)
}

// Point runs the function a test registered at name and returns its
// error: a test's way to act between two steps of corral's code (a swap
// of a file between a check and its use). Outside a test binary, or with
// nothing registered, it does nothing.
func Point(name string) error {
	if !testing.Testing() {
		return nil
	}
	if f, ok := points.Load(name); ok {
		return f.(func() error)()
	}
	return nil
}
