package seccomp

import "errors"

// Sentinels for the ways a profile fails validation. Validate wraps each
// together with errdefs.ErrInvalidArgument, so callers may test either.
var (
	// ErrUnknownSyscall: a rule names a syscall libseccomp does not know
	// for the target architecture (a typo, or a syscall newer than the
	// host's libseccomp).
	ErrUnknownSyscall = errors.New("unknown syscall")
	// ErrUnknownAction: an action that is not one of KnownActions.
	ErrUnknownAction = errors.New("unknown or unsupported action")
	// ErrUnknownOperator: an argument operator that is not one of
	// KnownOperators.
	ErrUnknownOperator = errors.New("unknown operator")
	// ErrUnknownArchitecture: an architecture that is not one of
	// KnownArchitectures, or one the host's libseccomp cannot handle.
	ErrUnknownArchitecture = errors.New("unknown or unsupported architecture")
)
