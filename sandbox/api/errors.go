package api

import "net/http"

// Kinds of Error, one per HTTP status; stable names a client may match on.
const (
	KindInvalid     = "invalid"     // 400: a malformed request or argument
	KindRefused     = "refused"     // 403: refused by policy; nothing ran or was written
	KindRejected    = "rejected"    // 403: the change set has violations; no patch is made of it
	KindNotFound    = "not_found"   // 404: no such session (or not the caller's), route or file
	KindConflict    = "conflict"    // 409: a stale revision, a base that no longer matches
	KindDataLoss    = "data_loss"   // 410: the session's writes are gone (its mounts vanished)
	KindLimit       = "limit"       // 422: a limit ended a file tool (timeout, output cap)
	KindBusy        = "busy"        // 429: the host-wide call cap stayed full for the queue wait
	KindFailed      = "failed"      // 500: corral failed
	KindUnavailable = "unavailable" // 503: containerd does not answer, or the daemon is stopping
)

// Status returns the HTTP status of kind (500 for an unknown one).
func Status(kind string) int {
	switch kind {
	case KindInvalid:
		return http.StatusBadRequest
	case KindRefused, KindRejected:
		return http.StatusForbidden
	case KindNotFound:
		return http.StatusNotFound
	case KindConflict:
		return http.StatusConflict
	case KindDataLoss:
		return http.StatusGone
	case KindLimit:
		return http.StatusUnprocessableEntity
	case KindBusy:
		return http.StatusTooManyRequests
	case KindUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// ErrorBody is every error answer: {"error": {...}}, and for an apply
// refused or in conflict the report that shows each change's status.
type ErrorBody struct {
	Error  Error   `json:"error"`
	Report *Report `json:"report,omitempty"`
}

// Error is what went wrong. Message is the line corral's CLI prints for
// the same failure (without its "corral: " prefix).
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Rule is the policy rule that refused the request, when one did.
	Rule string `json:"rule,omitempty"`
	// Refusal is the policy's refusal of an argv or a path.
	Refusal *Refusal `json:"refusal,omitempty"`
	// Problems list each path that stopped an apply, a patch or a change
	// set (kinds refused, rejected, conflict); Class says which of
	// corral's errors they came from: "refused", "conflict", "rejected".
	Problems []Problem `json:"problems,omitempty"`
	Class    string    `json:"class,omitempty"`
	// File is a file tool's failure inside the container.
	File *FileError `json:"file,omitempty"`
	// Limits are the limits that ended a call (kind limit).
	Limits []string `json:"limits,omitempty"`
}

// Refusal is the allowlist's refusal: Kind "CMD" (the command), "ARG" (an
// option, operand or limit) or "PATH" (a hidden, invalid or out-of-scope
// path); Index is the argv element (-1 when none), Token its text (cut at
// 256 bytes), Rule the rule that refused it.
type Refusal struct {
	Kind  string `json:"kind"`
	Index int    `json:"index"`
	Token string `json:"token"`
	Rule  string `json:"rule"`
}

// FileError is a file tool that ran and failed: Op ("read", "write", …),
// the canonical Path, and Code, one of not_found, is_a_directory,
// not_a_directory, not_a_file, symlink, read_only, permission, no_space,
// conflict, no_match, ambiguous, too_large, binary, invalid, escapes, io.
type FileError struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	Code string `json:"code"`
}
