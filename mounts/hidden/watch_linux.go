package hidden

import (
	"fmt"
	"path"
	"strings"

	"github.com/containerd/errdefs"
)

// Uncovered returns the first path of fresh (a hidden set computed now
// from the same repository and options) that old does not hide, itself
// or through an ancestor: a file that appeared after the session started
// and that the session's whiteouts therefore do not cover. "" when every
// hidden path is covered.
func Uncovered(old, fresh *Set) (Hide, bool) {
	for _, h := range fresh.Hides() {
		if !covered(old, h.Path) {
			return h, true
		}
	}
	return Hide{}, false
}

func covered(old *Set, p string) bool {
	for q := p; ; q = path.Dir(q) {
		if _, ok := old.Lookup(q); ok {
			return true
		}
		if q == "." || !strings.Contains(q, "/") {
			return false
		}
	}
}

func changedError(h Hide) error {
	return fmt.Errorf("%w: the repository changed under the session: %s appeared after it started (%s), and the running view cannot hide it; start a new session",
		errdefs.ErrFailedPrecondition, h.Path, h.Rule)
}

// Rescan computes the hidden set of the repository now and fails
// (errdefs.ErrFailedPrecondition, naming the path and its rule) when it
// holds a path old does not cover: a file that appeared under a hidden
// name after the session started. Every process that opens a session
// rescans; a long-lived one also watches the repository and rescans when
// an entry is created (package sandbox).
func Rescan(root string, old *Set) error {
	fresh, err := Compute(root, old.Options())
	if err != nil {
		return fmt.Errorf("rescanning the repository: %w", err)
	}
	if h, bad := Uncovered(old, fresh); bad {
		return changedError(h)
	}
	return nil
}
