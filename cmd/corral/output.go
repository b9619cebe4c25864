package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/review"
	"github.com/spf13/cobra"
)

// Kinds of the JSON error object, one per exit class; stable names that
// scripts may match on.
const (
	kindUsage    = "usage"    // bad flags or arguments; exit 125
	kindFailed   = "failed"   // corral failed; exit 125
	kindRefused  = "refused"  // refused by policy, nothing started; exit 126
	kindLimit    = "limit"    // a limit killed the tool; exit 124
	kindRejected = "rejected" // the change set is rejected; exit 123
	kindConflict = "conflict" // apply: a base no longer matches; exit 3
)

// jsonError is the "error" member of every JSON output that reports one.
type jsonError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// errorOutput is what a command run with --json (or --format json)
// prints on standard output when it ends in an error and has no result
// of its own to print: {"error": {"kind", "message"}, "exit_code": N},
// plus the refusal's parts for a refusal. exit_code is the process's
// exit code.
type errorOutput struct {
	Error    jsonError      `json:"error"`
	Refusal  *refusalOutput `json:"refusal,omitempty"`
	ExitCode int            `json:"exit_code"`
}

// usageError is a bad flag or argument: exit 125, kind usage.
func usageError(err error) *exitError {
	return &exitError{code: exitFailed, kind: kindUsage, err: err}
}

// errorKind returns the JSON kind of exit code code.
func errorKind(code int) string {
	switch code {
	case exitRejected:
		return kindRejected
	case exitLimit:
		return kindLimit
	case exitRefused:
		return kindRefused
	case exitConflict:
		return kindConflict
	}
	return kindFailed
}

// execute runs the command line args and returns the process's exit
// code. An error is printed on stderr as one "corral: ..." line and, when
// the command was asked for JSON, as an errorOutput on stdout unless the
// command already printed its JSON result for it.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitFailed, kind: kindUsage, err: err, flagErr: true}
	})
	// Errors cobra returns before a command's RunE starts (argument
	// counts, required flags, unknown commands) are usage errors.
	started := false
	markRun(root, &started)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	out := errorOutput{ExitCode: exitFailed, Error: jsonError{Kind: kindFailed, Message: errorLine(err)}}
	var (
		ee     *exitError
		r      *allowlist.Refusal
		asJSON bool
	)
	switch {
	case errors.As(err, &ee):
		out.ExitCode, out.Error.Kind = ee.code, errorKind(ee.code)
		if ee.kind != "" {
			out.Error.Kind = ee.kind
		}
		if errors.As(err, &r) {
			out.Refusal = refusalJSON(r)
		}
		asJSON = wantsJSON(cmd, args, ee.flagErr)
	case errors.As(err, &r):
		out.ExitCode, out.Error.Kind, out.Refusal = exitRefused, kindRefused, refusalJSON(r)
		asJSON = wantsJSON(cmd, args, false)
	case !started:
		out.Error.Kind = kindUsage
		asJSON = wantsJSON(cmd, args, true)
	default:
		asJSON = wantsJSON(cmd, args, false)
	}
	if ee == nil || ee.err != nil {
		fmt.Fprint(stderr, forTerminal(stderr, "corral: "+errorLine(err)+"\n"))
	}
	if asJSON && (ee == nil || !ee.printed) {
		_ = writeJSON(stdout, out)
	}
	return out.ExitCode
}

// markRun sets *started when any command's RunE starts.
func markRun(c *cobra.Command, started *bool) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*started = true
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markRun(sub, started)
	}
}

// wantsJSON reports whether cmd was asked for JSON output: --json, or
// --format json, where cmd has that flag. When its flags did not parse,
// the words before "--" are looked at instead.
func wantsJSON(cmd *cobra.Command, args []string, unparsed bool) bool {
	if cmd != nil && !unparsed {
		if f := cmd.Flags().Lookup("json"); f != nil && f.Value.String() == "true" {
			return true
		}
		if f := cmd.Flags().Lookup("format"); f != nil && f.Value.String() == "json" {
			return true
		}
		return false
	}
	if cmd == nil {
		return false
	}
	hasJSON, hasFormat := cmd.Flags().Lookup("json") != nil, cmd.Flags().Lookup("format") != nil
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case hasJSON && (a == "--json" || a == "--json=true"):
			return true
		case hasFormat && (a == "--format=json" || a == "--format" && i+1 < len(args) && args[i+1] == "json"):
			return true
		}
	}
	return false
}

// printedJSON marks err, an *exitError whose JSON result was printed, so
// that execute does not print a second JSON document.
func printedJSON(err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		ee.printed = true
	}
	return err
}

// jsonErrorOf returns the JSON error object of an error that ends with
// exit code code.
func jsonErrorOf(code int, err error) *jsonError {
	msg := fmt.Sprintf("exit %d", code)
	if err != nil {
		msg = errorLine(err)
	}
	return &jsonError{Kind: errorKind(code), Message: msg}
}

// applyOutput is the JSON result of apply and session apply: the review
// report, and the error and exit code when it did not end in 0.
type applyOutput struct {
	*review.Report
	Error    *jsonError `json:"error,omitempty"`
	ExitCode int        `json:"exit_code"`
}

// writeReport prints rep as JSON with the outcome of err (as applyExit
// maps it) and returns that outcome.
func writeReport(out io.Writer, rep *review.Report, err error) error {
	exit := applyExit(err)
	v := applyOutput{Report: rep}
	var ee *exitError
	if errors.As(exit, &ee) {
		v.ExitCode, v.Error = ee.code, jsonErrorOf(ee.code, err)
		ee.printed = true
	}
	if werr := writeJSON(out, v); werr != nil {
		return werr
	}
	return exit
}

// writeJSON prints v as indented JSON, safe for a terminal: besides the
// control characters encoding/json escapes, C1 controls and Unicode
// format characters (bidi controls, tag characters, zero-width ones) are
// written as \u escapes, so a string from the repository or the agent
// cannot rewrite what a reviewer's terminal shows. The JSON decodes to
// the same values.
func writeJSON(out io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := out.Write(escapeFormatChars(buf.Bytes()))
	return err
}

// escapeFormatChars rewrites C1 controls and format characters in JSON
// text (where they can only occur inside strings) as \u escapes.
func escapeFormatChars(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if !(r >= 0x80 && r <= 0x9f) && !unicode.Is(unicode.Cf, r) {
			if out != nil {
				out = append(out, b[i:i+n]...)
			}
			i += n
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(b)+32), b[:i]...)
		}
		if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
	}
	if out == nil {
		return b
	}
	return out
}

// isTerminalOut reports whether w is a terminal (see isTerminal).
func isTerminalOut(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}

// forTerminal returns text as it may be written to w: unchanged, or, when
// w is a terminal, each line with its control, bidi and invisible
// characters made visible (sanitize, the escaping of apply's review).
func forTerminal(w io.Writer, text string) string {
	if !isTerminalOut(w) {
		return text
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(text, "\n") {
		b.WriteString(sanitize(l))
	}
	return b.String()
}
