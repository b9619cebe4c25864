package review

import (
	"errors"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/mounts/changeset"
)

// ErrNoApproval is returned by Apply when no change of the set is approved:
// nothing is written. It wraps errdefs.ErrPermissionDenied.
var ErrNoApproval = errors.Join(errors.New("no approved change"), errdefs.ErrPermissionDenied)

// Problem is one path and the reason it stops an apply: the change set's
// own problem type.
type Problem = changeset.Problem

// RefusedError is a change set, patch or approval refused by policy: a path
// outside the scope or with a forbidden name, a violation from collection, a
// symbolic link in the repository, an approval that matches no change, a
// change of a class the options keep dry-run only. Nothing was written. It
// unwraps to errdefs.ErrPermissionDenied.
type RefusedError struct {
	Problems []Problem
}

func (e *RefusedError) Error() string { return "refused: " + changeset.Join(e.Problems) }

// Unwrap returns errdefs.ErrPermissionDenied.
func (e *RefusedError) Unwrap() error { return errdefs.ErrPermissionDenied }

// ConflictError is a change whose base no longer matches the repository (a
// modified or deleted file whose bytes changed, a created file that now
// exists, a hunk that does not apply). Nothing was written. It unwraps to
// errdefs.ErrFailedPrecondition.
type ConflictError struct {
	Problems []Problem
}

func (e *ConflictError) Error() string { return "conflict: " + changeset.Join(e.Problems) }

// Unwrap returns errdefs.ErrFailedPrecondition.
func (e *ConflictError) Unwrap() error { return errdefs.ErrFailedPrecondition }

// RollbackError is a write that failed part-way and whose undo failed too:
// the repository may hold part of the change set. Left lists the paths the
// reviewer must restore by hand; their originals are kept in the apply's
// staging directory (.corral-apply-<id> in the write scope), as the
// reasons say, and Recover reports the transaction until they are.
type RollbackError struct {
	Err  error
	Left []Problem
}

func (e *RollbackError) Error() string {
	return "apply failed (" + e.Err.Error() + ") and could not be fully undone; restore by hand: " + changeset.Join(e.Left)
}

// Unwrap returns the error that stopped the apply.
func (e *RollbackError) Unwrap() error { return e.Err }
