// Package testhook is the seam through which corral's own tests reach
// what its exported API withholds: running an argv in a session with no
// policy check at all, to prove that the kernel boundary (mounts,
// seccomp, namespaces, limits) holds where the policy has a hole — the
// hostile cases' in_box steps. It is internal (only this module can
// import it) and answers only in a test binary (testing.Testing); the
// typed wrapper tests call is internal/testutil.ExecWithoutPolicy.
package testhook

import (
	"context"
	"errors"
	"io"
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
