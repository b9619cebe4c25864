package daemon

import (
	"context"
	"errors"
	"net/http"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/review"
	"github.com/corral-sandbox/corral/sandbox/api"
)

// LimitFailure is a call a limit ended (a file tool past its timeout or
// output cap). It wraps errdefs.ErrResourceExhausted.
type LimitFailure struct {
	Message string
	Limits  []string
}

func (e *LimitFailure) Error() string { return e.Message }

// Unwrap returns errdefs.ErrResourceExhausted.
func (e *LimitFailure) Unwrap() error { return errdefs.ErrResourceExhausted }

// apiError maps err to the API's error object. The message is err's own
// text: the line corral's CLI prints for the same failure.
func apiError(err error) api.Error {
	e := api.Error{Kind: api.KindFailed, Message: err.Error()}
	var (
		refusal  *allowlist.Refusal
		refused  *review.RefusedError
		conflict *review.ConflictError
		rejected *changeset.RejectedError
		rollback *review.RollbackError
		file     *FileFailure
		limit    *LimitFailure
		busy     *ErrBusy
	)
	switch {
	case errors.As(err, &rollback):
		e.Kind, e.Problems, e.Class = api.KindFailed, problems(rollback.Left), "rollback"
	case errors.As(err, &refusal):
		e.Kind, e.Rule = api.KindRefused, refusal.Rule
		e.Refusal = &api.Refusal{Kind: string(refusal.Kind), Index: refusal.Index, Token: refusal.Token, Rule: refusal.Rule}
	case errors.As(err, &refused):
		e.Kind, e.Problems, e.Class = api.KindRefused, problems(refused.Problems), "refused"
	case errors.As(err, &rejected):
		e.Kind, e.Problems, e.Class = api.KindRejected, problems(rejected.Violations), "rejected"
	case errors.As(err, &conflict):
		e.Kind, e.Problems, e.Class = api.KindConflict, problems(conflict.Problems), "conflict"
	case errors.Is(err, review.ErrNoApproval):
		e.Kind, e.Class = api.KindRefused, "no_approval"
	case errors.As(err, &file):
		fe := file.FileError
		e.File = &fe
		e.Kind = kindOf(file.Category)
	case errors.As(err, &limit):
		e.Kind, e.Limits = api.KindLimit, limit.Limits
	case errors.As(err, &busy):
		e.Kind = api.KindBusy
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		e.Kind = api.KindUnavailable
	default:
		e.Kind = kindOf(err)
	}
	return e
}

// kindOf maps an errdefs category to an error kind.
func kindOf(err error) string {
	switch {
	case errdefs.IsInvalidArgument(err):
		return api.KindInvalid
	case errdefs.IsPermissionDenied(err):
		return api.KindRefused
	case errdefs.IsNotFound(err):
		return api.KindNotFound
	case errdefs.IsConflict(err), errdefs.IsFailedPrecondition(err), errdefs.IsAlreadyExists(err):
		return api.KindConflict
	case errdefs.IsDataLoss(err):
		return api.KindDataLoss
	case errdefs.IsResourceExhausted(err):
		return api.KindLimit
	case errdefs.IsUnavailable(err):
		return api.KindUnavailable
	}
	return api.KindFailed
}

func problems(ps []changeset.Problem) []api.Problem {
	out := make([]api.Problem, len(ps))
	for i, p := range ps {
		out[i] = api.Problem{Path: p.Path, Reason: p.Reason}
	}
	return out
}

// statusOf is the HTTP status of an error object.
func statusOf(e api.Error) int {
	if e.Kind == "" {
		return http.StatusInternalServerError
	}
	return api.Status(e.Kind)
}
