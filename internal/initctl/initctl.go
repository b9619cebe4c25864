// Package initctl is the protocol between corral and corral-init, the
// static helper bound read-only into every container at InitPath.
//
// Every container's process is `InitPath RequestFile`, fixed when the
// container is created (possibly long before the call). corral hands it
// one Request through that control file, in a directory of the
// container's own that it alone sees, read-only, at ReqDir (so no other
// container of the session can reach it, even where no Landlock keeps a
// tool out of /.corral): either
// a regular file written just before the start, or, for a container
// started ahead of its call, a FIFO that corral-init, started, waits on
// (at most MaxWait) until corral opens it, writes the Request and closes
// it. corral-init reads it and, by its Mode, runs the tool as its
// child (Exec) or one file-tool operation in-process (FS, package
// sandbox/fsop), in both cases under the Request's wall-clock deadline,
// which corral-init holds itself as the container's PID 1: a supervisor
// that dies never leaves a tool running.
//
// A Request is one JSON object, decoded strictly (unknown fields refused):
// a new field is a new Version both sides agree on (corral-init is bound
// from the host as a content-addressed copy of the corral build that
// writes the requests, so both sides always share one version). The
// package is cgo-free: corral-init is linked statically.
package initctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Paths inside every container.
const (
	// InitPath is where corral-init is bound, read-only.
	InitPath = "/.corral/init"
	// CtlDir is where the session's control directory is bound,
	// read-only: staged file-tool content.
	CtlDir = "/.corral/ctl"
	// ReqDir is where the container's own request directory is bound,
	// read-only; it holds RequestFile and nothing else.
	ReqDir = "/.corral/req"
	// RequestFile is the container's control file, corral-init's one
	// argument.
	RequestFile = ReqDir + "/request"
)

// Version is the protocol version a Request carries. Version 2 added
// DeadlineMS.
const Version = 2

// MaxDeadline bounds a Request's deadline (a profile's timeout is at most
// 24 hours; the rest is room for the grace).
const MaxDeadline = 25 * time.Hour

// MaxBytes bounds a control file.
const MaxBytes = 4 << 20

// MaxWait bounds how long a corral-init started ahead waits for its
// Request on a FIFO; then it exits 125 without running anything. corral
// never hands a container that waited longer than its own bound (29
// minutes) to a call, whose request then comes within 10 seconds, so
// this only ends the idle containers of a supervisor that died.
const MaxWait = 35 * time.Minute

// Mode says what corral-init does with a Request.
type Mode string

const (
	// Exec resolves Argv[0], a bare name, against the fixed PATH and
	// runs it as corral-init's child, corral-init staying PID 1 (it
	// reaps every process and holds the deadline).
	Exec Mode = "exec"
	// FS runs one file-tool operation, Argv being its command line
	// after `corral fs` (see sandbox/fsop.Usage), and prints its answer.
	FS Mode = "fs"
)

// Request is one control file.
type Request struct {
	Version int      `json:"version"`
	Mode    Mode     `json:"mode"`
	Argv    []string `json:"argv"`
	// DeadlineMS is the wall-clock time, in milliseconds from corral-init's
	// start, after which it kills every process of the container
	// (kill(-1, SIGKILL) from PID 1 of the pid namespace) and exits. The
	// supervisor sets it to the profile's timeout plus a grace, so that its
	// own kill, which reports the timeout, normally comes first. 1 to
	// MaxDeadline.
	DeadlineMS int64 `json:"deadline_ms"`
}

// Deadline returns DeadlineMS as a duration.
func (r Request) Deadline() time.Duration { return time.Duration(r.DeadlineMS) * time.Millisecond }

// Encode returns r as a control file, after the checks Decode makes; a
// request whose encoding is larger than MaxBytes is an error.
func Encode(r Request) ([]byte, error) {
	r.Version = Version
	if err := r.check(); err != nil {
		return nil, err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	// corral-init refuses it anyway (Decode); refused here, it costs no
	// container (one started ahead would read MaxBytes of it first).
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("request of %d bytes, more than %d", len(data), MaxBytes)
	}
	return data, nil
}

// Decode reads a control file written by Encode: one JSON object of this
// Version with no unknown field, a known Mode, a deadline from 1 ms to
// MaxDeadline and a non-empty Argv without NUL bytes; for Exec, Argv[0] is
// a bare name.
func Decode(data []byte) (Request, error) {
	var r Request
	if len(data) > MaxBytes {
		return r, fmt.Errorf("control file larger than %d bytes", MaxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("control file: %w", err)
	}
	if dec.More() {
		return r, errors.New("control file: more than one request")
	}
	if r.Version != Version {
		return r, fmt.Errorf("control file: version %d, want %d", r.Version, Version)
	}
	return r, r.check()
}

func (r Request) check() error {
	switch r.Mode {
	case Exec, FS:
	default:
		return fmt.Errorf("control file: unknown mode %q", r.Mode)
	}
	if r.DeadlineMS < 1 || r.Deadline() > MaxDeadline {
		return fmt.Errorf("control file: deadline %d ms, want 1 to %d", r.DeadlineMS, MaxDeadline.Milliseconds())
	}
	if len(r.Argv) == 0 {
		return errors.New("control file: empty argv")
	}
	for _, a := range r.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return errors.New("control file: NUL byte in argv")
		}
	}
	if r.Mode == Exec && (r.Argv[0] == "" || strings.ContainsRune(r.Argv[0], '/')) {
		return fmt.Errorf("control file: argv[0] must be a bare name: %q", r.Argv[0])
	}
	return nil
}
