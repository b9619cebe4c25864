// Command corral runs each tool call of an AI agent in its own short-lived,
// locked-down OCI container through containerd, and collects what it wrote
// as a reviewable change set. See README.md.
//
// Exit codes of `corral run` and `corral session exec`: the tool's own
// exit code when it ran; 123 this call made the change set rejected (the
// tool ran; a later call that leaves the violation alone exits with its
// own code); 124 a limit killed the tool (timeout, memory, output cap);
// 125 corral itself failed (bad flags, no containerd, a layout it will
// not start on); 126 the invocation was refused by policy and nothing
// started; 141 corral's standard output or error was closed (a reader
// such as `head -c 10` went away): corral stopped forwarding, killed the
// tool as a shell pipeline would, cleaned up and exits 128+SIGPIPE.
//
// With --json (or --format json) every outcome is JSON on stdout, errors
// included: {"error": {"kind": ..., "message": ...}, "exit_code": N}, where
// N is the process's exit code (see execute).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes (documented in the package comment and README.md).
const (
	exitRejected = 123
	exitLimit    = 124
	exitFailed   = 125
	exitRefused  = 126
	exitPipe     = 128 + int(syscall.SIGPIPE)
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
	// kind overrides the JSON error kind of code (kindUsage).
	kind string
	// flagErr is set when the command's flags did not parse.
	flagErr bool
	// printed is set when the command printed its JSON result already.
	printed bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

func main() {
	// A closed standard output must not kill corral before it cleaned up:
	// with SIGPIPE notified, a write to a closed pipe fails with EPIPE
	// (os/signal: SIGPIPE), which the commands turn into exit 141.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
