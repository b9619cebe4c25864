package review

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/corral-sandbox/corral/mounts/changeset"
)

// checkScope validates the trusted write scope for review: canonical
// (allowlist.Scope.Validate), exactly one of Dir and Page, not read-only.
func checkScope(scope allowlist.Scope) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	if (scope.Dir == "") == (scope.Page == "") && !scope.ReadOnly {
		return fmt.Errorf("write scope must set exactly one of a directory and a page: %w", errdefs.ErrInvalidArgument)
	}
	if !scope.Writable() {
		return &RefusedError{Problems: []Problem{{Path: ".", Reason: "the session is read-only: nothing can be applied"}}}
	}
	return nil
}

// pathChecks are the write policy for one repo-relative path taken from a
// change set or patch, in order; the first that fails names the reason.
// They are the same rules as every write of the sandbox: the
// canonicalisation of allowlist.CleanPath, the name table's reserved names
// (folded) and the collector's character rules for each component, the
// scope by whole components, and, with a view, allowlist.CheckWrite
// (hidden paths, links the view resolves out of scope).
var pathChecks = []func(p string, scope allowlist.Scope, view allowlist.View) string{
	checkCanonical,
	checkNames,
	checkInScope,
	checkView,
}

// checkPath runs pathChecks and returns "" or the first reason.
func checkPath(p string, scope allowlist.Scope, view allowlist.View) string {
	for _, check := range pathChecks {
		if reason := check(p, scope, view); reason != "" {
			return reason
		}
	}
	return ""
}

// ruleOf is the rule of a *allowlist.Refusal, or the error's text.
func ruleOf(err error) string {
	var r *allowlist.Refusal
	if errors.As(err, &r) {
		return r.Rule
	}
	return err.Error()
}

func checkCanonical(p string, _ allowlist.Scope, _ allowlist.View) string {
	c, err := allowlist.CleanPath(p)
	switch {
	case err != nil:
		return ruleOf(err)
	case c != p:
		return fmt.Sprintf("path is not in canonical form (it means %q)", c)
	case c == ".":
		return "the repository root is not a file"
	}
	return ""
}

func checkNames(p string, _ allowlist.Scope, _ allowlist.View) string {
	if rule := names.ReservedPath(p); rule != "" {
		return rule
	}
	for _, name := range strings.Split(p, "/") {
		if reason := changeset.CheckName(name); reason != "" {
			return reason
		}
	}
	return ""
}

func checkInScope(p string, scope allowlist.Scope, _ allowlist.View) string {
	if err := scope.Check(p); err != nil {
		return ruleOf(err)
	}
	if scope.Dir != "" && p == scope.Dir {
		return "the write scope's directory itself is not a file"
	}
	return ""
}

func checkView(p string, scope allowlist.Scope, view allowlist.View) string {
	if view == nil {
		return ""
	}
	if _, err := allowlist.CheckWrite(view, scope, p); err != nil {
		return ruleOf(err)
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

// validation is the state the checks of validate share.
type validation struct {
	scope    allowlist.Scope
	view     allowlist.View
	lim      changeset.Limits
	cs       *changeset.Set
	changes  []changeset.Change // cs.Changes in path order
	out      []checked
	total    int64
	problems []Problem
}

func (v *validation) refuse(p, format string, args ...any) {
	v.problems = append(v.problems, Problem{Path: changeset.Printable(p), Reason: fmt.Sprintf(format, args...)})
}

// setChecks judge the change set as a whole before its changes, in order.
// An error stops validation (with what was found so far).
var setChecks = []func(*validation) error{
	func(v *validation) error { return checkScope(v.scope) },
	func(v *validation) error {
		if v.cs == nil {
			return fmt.Errorf("nil change set: %w", errdefs.ErrInvalidArgument)
		}
		return nil
	},
	func(v *validation) error {
		for _, x := range v.cs.Violations {
			v.problems = append(v.problems, Problem{Path: x.Path, Reason: "rejected at collection: " + x.Reason})
		}
		return nil
	},
	func(v *validation) error {
		if len(v.cs.Changes) > v.lim.MaxFiles {
			v.refuse(".", "more than %d changes", v.lim.MaxFiles)
			return &RefusedError{Problems: v.problems}
		}
		return nil
	},
}

// changeChecks judge one change, in order; the first to return a reason
// refuses the change, and the next change is judged. They may fill in c
// (digests) for the checks after them.
var changeChecks = []func(v *validation, i int, c *checked) string{
	checkUnique,
	checkChangePath,
	checkDepth,
	checkKind,
	checkContent,
	checkContentChanged,
	checkMode,
	checkSize,
}

// totalChecks judge the changes that passed, together, in order; each
// records its problems.
var totalChecks = []func(*validation){
	checkTotalBytes,
	checkFileAndDirectory,
}

// validate checks cs against the write policy, the collection rules and
// lim, trusting none of its metadata, and returns each change with its
// digests and risk recomputed from the bytes, in path order. Every problem
// found is listed in one *RefusedError. The checks are data: setChecks,
// then changeChecks for each change, then totalChecks.
func validate(cs *changeset.Set, scope allowlist.Scope, view allowlist.View, lim changeset.Limits) ([]checked, error) {
	v := &validation{scope: scope, view: view, lim: lim.WithDefaults(), cs: cs}
	for _, check := range setChecks {
		if err := check(v); err != nil {
			return nil, err
		}
	}
	v.changes = slices.Clone(cs.Changes)
	slices.SortStableFunc(v.changes, func(a, b changeset.Change) int { return strings.Compare(a.Path, b.Path) })
	v.out = make([]checked, 0, len(v.changes))
next:
	for i := range v.changes {
		c := checked{ch: v.changes[i]}
		for _, check := range changeChecks {
			if reason := check(v, i, &c); reason != "" {
				v.refuse(c.ch.Path, "%s", reason)
				continue next
			}
		}
		c.risk = Classify(c.ch, scope)
		c.token = tokenOf(c.ch.Path, c.ch.Kind, c.before, c.after, c.risk.Level)
		v.total += int64(len(c.ch.Before)) + int64(len(c.ch.After))
		v.out = append(v.out, c)
	}
	for _, check := range totalChecks {
		check(v)
	}
	if len(v.problems) > 0 {
		return nil, &RefusedError{Problems: v.problems}
	}
	return v.out, nil
}

func checkUnique(v *validation, i int, c *checked) string {
	if i > 0 && v.changes[i-1].Path == c.ch.Path {
		return "more than one change for the same path"
	}
	return ""
}

func checkChangePath(v *validation, _ int, c *checked) string {
	return checkPath(c.ch.Path, v.scope, v.view)
}

func checkDepth(v *validation, _ int, c *checked) string {
	if d := depthBelow(c.ch.Path, v.scope); d > v.lim.MaxDepth {
		return fmt.Sprintf("deeper than %d path components", v.lim.MaxDepth)
	}
	return ""
}

func checkKind(v *validation, _ int, c *checked) string {
	switch c.ch.Kind {
	case changeset.Create, changeset.Modify:
	case changeset.Delete:
		if v.scope.Page != "" {
			return "page mode cannot delete the page"
		}
	default:
		return fmt.Sprintf("unknown change kind %q", c.ch.Kind)
	}
	return ""
}

// checkContent checks each side the kind has (before for a modify or a
// delete, after for a create or a modify) against the limit, its claimed
// digest and text-ness, and records the digests; a side the kind does
// not have must be empty.
func checkContent(v *validation, _ int, c *checked) string {
	ch := c.ch
	hasBefore := ch.Kind != changeset.Create
	hasAfter := ch.Kind != changeset.Delete
	side := func(name string, present bool, claimed string, data []byte) (string, string) {
		switch {
		case !present && (claimed != "" || len(data) > 0):
			return "", fmt.Sprintf("a %s carries %s content", ch.Kind, name)
		case !present:
			return "", ""
		case int64(len(data)) > v.lim.MaxFileBytes:
			return "", fmt.Sprintf("%s content of %d bytes exceeds the limit of %d bytes", name, len(data), v.lim.MaxFileBytes)
		case claimed != changeset.SHA256(data):
			return "", fmt.Sprintf("%s sha256 %q does not match its bytes", name, claimed)
		case changeset.IsBinary(data):
			return "", fmt.Sprintf("%s content is binary (a NUL byte or invalid UTF-8)", name)
		}
		return changeset.SHA256(data), ""
	}
	var reason string
	if c.before, reason = side("before", hasBefore, ch.BeforeSHA256, ch.Before); reason != "" {
		return reason
	}
	c.after, reason = side("after", hasAfter, ch.AfterSHA256, ch.After)
	return reason
}

func checkContentChanged(_ *validation, _ int, c *checked) string {
	if c.ch.Kind == changeset.Modify && bytes.Equal(c.ch.Before, c.ch.After) {
		return "a modify without a content change"
	}
	return ""
}

func checkMode(_ *validation, _ int, c *checked) string {
	if c.ch.Mode&^0o777 != 0 || c.ch.Mode&0o111 != 0 {
		return fmt.Sprintf("mode %v: only regular files without executable bits can be applied", c.ch.Mode)
	}
	return ""
}

func checkSize(_ *validation, _ int, c *checked) string {
	if c.ch.Size != int64(len(c.ch.After)) {
		return fmt.Sprintf("size %d does not match the %d bytes it carries", c.ch.Size, len(c.ch.After))
	}
	return ""
}

func checkTotalBytes(v *validation) {
	if v.total > v.lim.MaxTotalBytes {
		v.refuse(".", "change set holds %d bytes, over the limit of %d bytes", v.total, v.lim.MaxTotalBytes)
	}
}

// checkFileAndDirectory: a path cannot be both a file that is written and
// the directory of another written file. (A deleted file may become a
// directory and a deleted directory a file: those are type changes.)
func checkFileAndDirectory(v *validation) {
	written := map[string]bool{}
	for _, c := range v.out {
		if c.ch.Kind != changeset.Delete {
			written[c.ch.Path] = true
		}
	}
	for _, c := range v.out {
		if c.ch.Kind == changeset.Delete {
			continue
		}
		for d := path.Dir(c.ch.Path); d != "." && d != "/"; d = path.Dir(d) {
			if written[d] {
				v.refuse(c.ch.Path, "its directory %s is written as a file in the same change set", d)
			}
		}
	}
}

// depthBelow counts the components of p below the scope's directory (or
// the page's directory).
func depthBelow(p string, scope allowlist.Scope) int {
	base := scope.Base()
	n := strings.Count(p, "/") + 1
	if base != "." && base != "" {
		n -= strings.Count(base, "/") + 1
	}
	return n
}
