// Package initctl is the protocol between corral and corral-init, the
// static helper bound read-only into every container at InitPath.
//
// Every container's process is `InitPath CtlDir/<container id>`, fixed
// when the container is created (possibly long before the call). Just
// before the start, corral writes one Request to that control file, in
// the session's control directory, which the container sees read-only at
// CtlDir. corral-init reads it and, by its Mode, execs the tool (Exec) or
// runs one file-tool operation in-process (FS, package sandbox/fsop).
//
// A Request is one JSON object, decoded strictly (unknown fields refused)
// so that adding a field, such as a wall-clock deadline corral-init
// enforces itself, is a new Version both sides agree on. The package is
// cgo-free: corral-init is linked statically.
package initctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Paths inside every container.
const (
	// InitPath is where corral-init is bound, read-only.
	InitPath = "/.corral/init"
	// CtlDir is where the session's control directory is bound,
	// read-only: control files and staged file-tool content.
	CtlDir = "/.corral/ctl"
)

// Version is the protocol version a Request carries.
const Version = 1

// MaxBytes bounds a control file.
const MaxBytes = 4 << 20

// Mode says what corral-init does with a Request.
type Mode string

const (
	// Exec resolves Argv[0], a bare name, against the fixed PATH and
	// execve(2)s it: the tool becomes the container's PID 1.
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
}

// Encode returns r as a control file, after the checks Decode makes.
func Encode(r Request) ([]byte, error) {
	r.Version = Version
	if err := r.check(); err != nil {
		return nil, err
	}
	return json.Marshal(r)
}

// Decode reads a control file written by Encode: one JSON object of this
// Version with no unknown field, a known Mode and a non-empty Argv
// without NUL bytes; for Exec, Argv[0] is a bare name.
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
