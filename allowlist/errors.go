package allowlist

import (
	"fmt"

	"github.com/containerd/errdefs"
)

// Kind classifies a refusal, matching the outcome words of the hostile
// cases: CMD (argv[0] not allowed), ARG (an option or argument not
// allowed), PATH (a path invalid or out of scope after canonicalization).
type Kind string

const (
	KindCmd  Kind = "CMD"
	KindArg  Kind = "ARG"
	KindPath Kind = "PATH"
)

// Refusal is a policy decision against an invocation. It unwraps to
// errdefs.ErrPermissionDenied. Index is the argv index of the offending
// token (-1 when the refusal concerns the whole argv); Rule names what
// refused, e.g. ".openwikiignore:3 hides secrets/" or
// "outside the write scope openwiki/".
type Refusal struct {
	Kind  Kind
	Index int
	Token string
	Rule  string
}

func (r *Refusal) Error() string {
	if r.Index < 0 {
		return fmt.Sprintf("refused (%s): %s", r.Kind, r.Rule)
	}
	return fmt.Sprintf("refused (%s): argv[%d] %q: %s", r.Kind, r.Index, r.Token, r.Rule)
}

func (r *Refusal) Unwrap() error { return errdefs.ErrPermissionDenied }
