package review

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/mounts/changeset"
)

// checkScope validates the trusted write scope: exactly one of Dir and Page,
// canonical, not read-only.
func checkScope(scope allowlist.Scope) error {
	if scope.ReadOnly {
		return &RefusedError{Problems: []Problem{{Path: ".", Reason: "the session is read-only: nothing can be applied"}}}
	}
	if (scope.Dir == "") == (scope.Page == "") {
		return fmt.Errorf("write scope must set exactly one of a directory and a page: %w", errdefs.ErrInvalidArgument)
	}
	for _, p := range []string{scope.Dir, scope.Page} {
		if p == "" {
			continue
		}
		if c, err := allowlist.CleanPath(p); err != nil || c != p {
			return fmt.Errorf("write scope %q is not a canonical repository path: %w", p, errdefs.ErrInvalidArgument)
		}
	}
	if scope.Page == "." {
		return fmt.Errorf("write scope page cannot be the repository root: %w", errdefs.ErrInvalidArgument)
	}
	return nil
}

// checkPath applies the write policy to one repo-relative path taken from a
// change set or patch and returns "" or the reason it is refused: the same
// canonicalisation as every write (allowlist.CleanPath, and the path must
// already be in canonical spelling), the name rules of changeset.Collect for
// each component, the scope by whole components (exactly the page in page
// mode), and, when view is not nil, allowlist.CheckWrite (hidden paths,
// .git and .claims at any depth, symlinks the view resolves out of scope).
func checkPath(p string, scope allowlist.Scope, view allowlist.View) string {
	c, err := allowlist.CleanPath(p)
	if err != nil {
		if r, ok := err.(*allowlist.Refusal); ok {
			return r.Rule
		}
		return err.Error()
	}
	if c != p {
		return fmt.Sprintf("path is not in canonical form (it means %q)", c)
	}
	if c == "." {
		return "the repository root is not a file"
	}
	for _, name := range strings.Split(p, "/") {
		if reason := changeset.CheckName(name); reason != "" {
			return reason
		}
	}
	switch {
	case scope.Page != "" && p != scope.Page:
		return "outside the write scope: only the assigned page " + scope.Page + " is writable"
	case scope.Dir != "" && scope.Dir != "." && p != scope.Dir && !strings.HasPrefix(p, scope.Dir+"/"):
		return "outside the write scope " + scope.Dir + "/"
	case scope.Dir != "" && p == scope.Dir:
		return "the write scope's directory itself is not a file"
	}
	if view != nil {
		if _, err := allowlist.CheckWrite(view, scope, p); err != nil {
			if r, ok := err.(*allowlist.Refusal); ok {
				return r.Rule
			}
			return err.Error()
		}
	}
	return ""
}

// checked is a change that passed validation, with its digests recomputed
// from its bytes.
type checked struct {
	ch     changeset.Change
	before string // sha256 of ch.Before, "" for a create
	after  string // sha256 of ch.After, "" for a delete
	risk   Risk
	token  string
}

// validate checks cs against the write policy, the collection rules and
// lim, trusting none of its metadata, and returns each change with its
// digests and risk recomputed from the bytes, in path order. Every problem
// found is listed in one *RefusedError.
func validate(cs *changeset.Set, scope allowlist.Scope, view allowlist.View, lim changeset.Limits) ([]checked, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	if cs == nil {
		return nil, fmt.Errorf("nil change set: %w", errdefs.ErrInvalidArgument)
	}
	var problems []Problem
	refuse := func(p, format string, args ...any) {
		problems = append(problems, Problem{Path: changeset.Printable(p), Reason: fmt.Sprintf(format, args...)})
	}
	for _, v := range cs.Violations {
		problems = append(problems, Problem{Path: v.Path, Reason: "rejected at collection: " + v.Reason})
	}
	lim = lim.WithDefaults()
	if len(cs.Changes) > lim.MaxFiles {
		refuse(".", "more than %d changes", lim.MaxFiles)
		return nil, &RefusedError{Problems: problems}
	}
	changes := slices.Clone(cs.Changes)
	slices.SortStableFunc(changes, func(a, b changeset.Change) int { return strings.Compare(a.Path, b.Path) })
	out := make([]checked, 0, len(changes))
	var total int64
	for i, ch := range changes {
		p := ch.Path
		if i > 0 && changes[i-1].Path == p {
			refuse(p, "more than one change for the same path")
			continue
		}
		if reason := checkPath(p, scope, view); reason != "" {
			refuse(p, "%s", reason)
			continue
		}
		if d := depthBelow(p, scope); d > lim.MaxDepth {
			refuse(p, "deeper than %d path components", lim.MaxDepth)
			continue
		}
		c := checked{ch: ch}
		hasBefore, hasAfter := false, false
		switch ch.Kind {
		case changeset.Create:
			hasAfter = true
		case changeset.Modify:
			hasBefore, hasAfter = true, true
		case changeset.Delete:
			hasBefore = true
			if scope.Page != "" {
				refuse(p, "page mode cannot delete the page")
				continue
			}
		default:
			refuse(p, "unknown change kind %q", ch.Kind)
			continue
		}
		bad := false
		side := func(name string, present bool, claimed string, data []byte) string {
			switch {
			case !present && (claimed != "" || len(data) > 0):
				refuse(p, "a %s carries %s content", ch.Kind, name)
				bad = true
			case !present:
			case int64(len(data)) > lim.MaxFileBytes:
				refuse(p, "%s content of %d bytes exceeds the limit of %d bytes", name, len(data), lim.MaxFileBytes)
				bad = true
			case claimed != changeset.SHA256(data):
				refuse(p, "%s sha256 %q does not match its bytes", name, claimed)
				bad = true
			case changeset.IsBinary(data):
				refuse(p, "%s content is binary (a NUL byte or invalid UTF-8)", name)
				bad = true
			default:
				total += int64(len(data))
				return changeset.SHA256(data)
			}
			return ""
		}
		c.before = side("before", hasBefore, ch.BeforeSHA256, ch.Before)
		c.after = side("after", hasAfter, ch.AfterSHA256, ch.After)
		switch {
		case bad:
			continue
		case ch.Kind == changeset.Modify && bytes.Equal(ch.Before, ch.After):
			refuse(p, "a modify without a content change")
			continue
		case ch.Mode&^0o777 != 0 || ch.Mode&0o111 != 0:
			refuse(p, "mode %v: only regular files without executable bits can be applied", ch.Mode)
			continue
		case ch.Size != int64(len(ch.After)):
			refuse(p, "size %d does not match the %d bytes it carries", ch.Size, len(ch.After))
			continue
		}
		c.risk = Classify(ch, scope)
		c.token = tokenOf(p, ch.Kind, c.before, c.after, c.risk.Level)
		out = append(out, c)
	}
	if total > lim.MaxTotalBytes {
		refuse(".", "change set holds %d bytes, over the limit of %d bytes", total, lim.MaxTotalBytes)
	}
	// A path cannot be both a file that is written and the directory of
	// another written file. (A deleted file may become a directory and a
	// deleted directory a file: those are type changes.)
	written := map[string]bool{}
	for _, c := range out {
		if c.ch.Kind != changeset.Delete {
			written[c.ch.Path] = true
		}
	}
	for _, c := range out {
		if c.ch.Kind == changeset.Delete {
			continue
		}
		for d := path.Dir(c.ch.Path); d != "." && d != "/"; d = path.Dir(d) {
			if written[d] {
				refuse(c.ch.Path, "its directory %s is written as a file in the same change set", d)
			}
		}
	}
	if len(problems) > 0 {
		return nil, &RefusedError{Problems: problems}
	}
	return out, nil
}

// depthBelow counts the components of p below the scope's directory (or
// the page's directory).
func depthBelow(p string, scope allowlist.Scope) int {
	base := scope.Dir
	if scope.Page != "" {
		base = path.Dir(scope.Page)
	}
	n := strings.Count(p, "/") + 1
	if base != "." && base != "" {
		n -= strings.Count(base, "/") + 1
	}
	return n
}
