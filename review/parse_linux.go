package review

import (
	"errors"
	"fmt"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/mounts/changeset"
)

// ParsePatch turns a patch artifact (from `corral run --diff-out`, CI, or
// `git diff`) into the change set it makes to the repository at repo as it
// is now, so that it goes through the same validation, review and approval
// as a sandbox's own change set: ParsePatch writes nothing, and its
// result can only reach the repository through Apply.
//
// The format is changeset.ParsePatch's (git-style unified text diffs of
// regular files, read strictly by two parsers), with every path put to the
// write policy as it is read: a path that is not canonical, leaves the
// repository, falls outside scope (by whole components; exactly the page in
// page mode) or breaks the name rules of collection (.git, .claims, ignore
// files, control and bidi characters, …) refuses the patch as a whole with
// a *RefusedError naming the line or path, as does a result that breaks
// the rules Apply checks (binary content, limits).
//
// The patch is applied in memory, strictly (no fuzz, no offset), to the
// repository's current bytes, read without following links: a hunk that
// does not match, an index line whose blob id differs, a created file that
// exists or a modified or deleted file that does not is a *ConflictError.
//
// view (may be nil only in tests of the format) is the session's view:
// every path is checked against it — hidden paths refused by their rule —
// before any file of the repository is opened, so a patch can never serve
// as an oracle for hidden content, existence or blob ids.
func ParsePatch(repo string, data []byte, scope allowlist.Scope, view allowlist.View) (*changeset.Set, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	files, err := changeset.ParsePatch(data, func(p string) string { return checkPath(p, scope, view) })
	if err != nil {
		var pe *changeset.PatchError
		if errors.As(err, &pe) {
			return nil, &RefusedError{Problems: pe.Problems}
		}
		return nil, err
	}
	var problems []Problem

	r, err := openRepo(repo)
	if err != nil {
		return nil, err
	}
	defer r.close()
	lim := changeset.DefaultLimits()
	cs := &changeset.Set{Changes: []changeset.Change{}, Violations: []changeset.Problem{}}
	var conflicts []Problem
	for _, fp := range files {
		var before []byte
		if fp.Kind == changeset.Create {
			n, err := r.lstat(fp.Path)
			if err != nil {
				return nil, asProblem(err)
			}
			if n.exists {
				conflicts = append(conflicts, Problem{Path: changeset.Printable(fp.Path), Reason: "the patch creates it, but it exists in the repository"})
				continue
			}
		} else {
			data, _, exists, err := r.readFile(fp.Path, lim.MaxFileBytes)
			if err != nil {
				return nil, asProblem(err)
			}
			if !exists {
				conflicts = append(conflicts, Problem{Path: changeset.Printable(fp.Path), Reason: "the patch changes it, but it does not exist in the repository"})
				continue
			}
			if int64(len(data)) > lim.MaxFileBytes {
				problems = append(problems, Problem{Path: changeset.Printable(fp.Path), Reason: fmt.Sprintf("the repository's file is larger than %d bytes", lim.MaxFileBytes)})
				continue
			}
			before = data
		}
		ch, err := fp.Apply(before)
		var ae *changeset.ApplyError
		switch {
		case errors.As(err, &ae) && ae.Conflict:
			conflicts = append(conflicts, Problem{Path: changeset.Printable(fp.Path), Reason: ae.Reason})
		case errors.As(err, &ae):
			problems = append(problems, Problem{Path: changeset.Printable(fp.Path), Reason: ae.Reason})
		case err != nil:
			return nil, err
		default:
			cs.Changes = append(cs.Changes, ch)
		}
	}
	switch {
	case len(problems) > 0:
		return nil, &RefusedError{Problems: problems}
	case len(conflicts) > 0:
		return nil, &ConflictError{Problems: conflicts}
	}
	// The same rules as Apply (binary content, limits, type changes).
	if _, err := validate(cs, scope, nil, lim); err != nil {
		return nil, err
	}
	return cs, nil
}
