// Command corral runs each tool call of an AI agent in its own short-lived,
// locked-down OCI container through containerd, and collects what it wrote
// as a reviewable change set. See README.md.
//
// Exit codes of `corral run`: the tool's own exit code when it ran;
// 123 the change set was rejected (the tool ran); 124 a limit killed the
// tool (timeout, memory, output cap); 125 corral itself failed (bad flags,
// no containerd, a layout it will not start on); 126 the invocation was
// refused by policy and nothing started.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/corral-sandbox/corral/allowlist"
)

// Exit codes (documented in the package comment and README.md).
const (
	exitRejected = 123
	exitLimit    = 124
	exitFailed   = 125
	exitRefused  = 126
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := newRootCommand()
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(os.Stderr, "corral: %v\n", ee.err)
		}
		os.Exit(ee.code)
	}
	var r *allowlist.Refusal
	if errors.As(err, &r) {
		fmt.Fprintf(os.Stderr, "corral: %v\n", r)
		os.Exit(exitRefused)
	}
	fmt.Fprintf(os.Stderr, "corral: %v\n", err)
	os.Exit(exitFailed)
}
