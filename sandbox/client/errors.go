package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/review"
	"github.com/corral-sandbox/corral/sandbox/api"
)

// Error is an error answer of the daemon. Error() is its message: the
// line corral's CLI prints for the same failure. It unwraps to its
// errdefs category and, where the answer says, to the error corral's
// packages return in-process (see the package comment).
type Error struct {
	// Status is the HTTP status (0 for an error at the end of a stream).
	Status int
	// API is the error object as the daemon sent it.
	API api.Error
	// Report is an apply's report, when the daemon sent one with the
	// error (a refused apply, a conflict).
	Report *api.Report

	typed error
}

func (e *Error) Error() string { return e.API.Message }

// Unwrap returns the typed error when the answer named one, so that
// errors.Is and errors.As answer as for the error in-process (and a
// message prints the same); otherwise the errdefs category of the kind.
func (e *Error) Unwrap() error {
	if e.typed != nil {
		return e.typed
	}
	return category(e.API.Kind)
}

// FileError is a file tool that ran and failed inside the container
// (api.FileError); it unwraps to its errdefs category.
type FileError struct {
	api.FileError
	Message  string
	category error
}

func (e *FileError) Error() string { return e.Message }

// Unwrap returns the errdefs category.
func (e *FileError) Unwrap() error { return e.category }

// category maps an error kind to its errdefs category.
func category(kind string) error {
	switch kind {
	case api.KindInvalid:
		return errdefs.ErrInvalidArgument
	case api.KindRefused, api.KindRejected:
		return errdefs.ErrPermissionDenied
	case api.KindNotFound:
		return errdefs.ErrNotFound
	case api.KindConflict:
		return errdefs.ErrConflict
	case api.KindDataLoss:
		return errdefs.ErrDataLoss
	case api.KindLimit, api.KindBusy:
		return errdefs.ErrResourceExhausted
	case api.KindUnavailable:
		return errdefs.ErrUnavailable
	}
	return errdefs.ErrUnknown
}

func problems(ps []api.Problem) []changeset.Problem {
	out := make([]changeset.Problem, len(ps))
	for i, p := range ps {
		out[i] = changeset.Problem{Path: p.Path, Reason: p.Reason}
	}
	return out
}

// newError rebuilds the typed error an answer describes.
func newError(status int, e api.Error, rep *api.Report) *Error {
	out := &Error{Status: status, API: e, Report: rep}
	switch {
	case e.Refusal != nil:
		out.typed = &allowlist.Refusal{Kind: allowlist.Kind(e.Refusal.Kind), Index: e.Refusal.Index, Token: e.Refusal.Token, Rule: e.Refusal.Rule}
	case e.Class == "refused":
		out.typed = &review.RefusedError{Problems: problems(e.Problems)}
	case e.Class == "conflict":
		out.typed = &review.ConflictError{Problems: problems(e.Problems)}
	case e.Class == "rejected":
		out.typed = &changeset.RejectedError{Violations: problems(e.Problems)}
	case e.Class == "rollback":
		out.typed = &review.RollbackError{Err: errors.New(e.Message), Left: problems(e.Problems)}
	case e.Class == "no_approval":
		out.typed = review.ErrNoApproval
	case e.File != nil:
		out.typed = &FileError{FileError: *e.File, Message: e.Message, category: fileCategory(e.File.Code, e.Kind)}
	}
	return out
}

// fileCategory is sandbox.FileError's category of a code.
func fileCategory(code, kind string) error {
	switch code {
	case "not_found":
		return errdefs.ErrNotFound
	case "conflict":
		return errdefs.ErrConflict
	case "read_only", "permission", "symlink", "escapes", "not_container":
		return errdefs.ErrPermissionDenied
	case "no_space":
		return errdefs.ErrResourceExhausted
	case "no_match", "ambiguous":
		return errdefs.ErrFailedPrecondition
	case "io":
		return errdefs.ErrUnknown
	}
	return category(kind)
}

// decodeError reads an error answer.
func decodeError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb api.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Kind == "" {
		return &Error{Status: resp.StatusCode, API: api.Error{Kind: api.KindFailed,
			Message: fmt.Sprintf("corral daemon: %s: %.200s", resp.Status, body)}}
	}
	return newError(resp.StatusCode, eb.Error, eb.Report)
}
