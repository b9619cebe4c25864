package review

import (
	"bytes"
	"crypto/sha1" //nolint:gosec // git blob ids are sha1 by definition
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/mounts"
)

// MaxPatchBytes caps the size of a patch ParsePatch reads.
const MaxPatchBytes = 64 << 20

// gitRegular is git's mode of a regular, non-executable file.
const gitRegular = 0o100644

// ParsePatch turns a patch artifact (from `corral run --diff-out`, CI, or
// `git diff`) into the change set it makes to the repository at repo as it
// is now, so that it goes through the same validation, review and approval
// as a sandbox's own change set: ParsePatch writes nothing, and its
// result can only reach the repository through Apply.
//
// Only git-style unified text diffs of regular files (mode 100644) are
// accepted, each path exactly once, and the whole patch is refused
// (nothing partial) with a *RefusedError naming the line or path when:
//   - it is anything else: an ed script, a context diff, a traditional
//     diff without "diff --git", a preamble, a binary patch, a mode
//     change, a symbolic link (120000) or submodule (160000), a rename or
//     copy, or nothing at all;
//   - a hunk header's counts do not match its lines, hunks overlap, or the
//     two parsers (the strict scanner here and go-gitdiff) disagree on it;
//   - a path is not canonical, leaves the repository, falls outside scope
//     (by whole components; exactly the page in page mode) or breaks the
//     name rules of collection (.git, .claims, ignore files, control and
//     bidi characters, …);
//   - the result breaks the rules Apply checks (binary content, limits).
//
// The patch is applied in memory, strictly (no fuzz, no offset), to the
// repository's current bytes, read without following links: a hunk that
// does not match, an index line whose blob id differs, a created file that
// exists or a modified or deleted file that does not is a *ConflictError.
// Changes carry Before from the repository and After from the patch; a
// created or modified file gets mode 0644.
//
// view (may be nil only in tests of the format) is the session's view:
// every path is checked against it — hidden paths refused by their rule —
// before any file of the repository is opened, so a patch can never serve
// as an oracle for hidden content, existence or blob ids.
func ParsePatch(repo string, data []byte, scope allowlist.Scope, view allowlist.View) (*mounts.ChangeSet, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	if len(data) > MaxPatchBytes {
		return nil, refuseLine(0, "the patch is larger than %d bytes", MaxPatchBytes)
	}
	frames, err := scanPatch(data)
	if err != nil {
		return nil, err
	}
	files, preamble, err := gitdiff.Parse(bytes.NewReader(data))
	if err != nil {
		return nil, refuseLine(0, "the patch does not parse: %v", err)
	}
	if preamble != "" || len(files) != len(frames) {
		return nil, refuseLine(0, "the patch holds text outside its files (%d files read strictly, %d by the parser)", len(frames), len(files))
	}
	var problems []Problem
	refuse := func(p, format string, args ...any) {
		problems = append(problems, Problem{Path: printable(p), Reason: fmt.Sprintf(format, args...)})
	}
	seen := map[string]bool{}
	for i, f := range files {
		fr := &frames[i]
		if reason := checkPath(fr.path, scope, view); reason != "" {
			refuse(fr.path, "%s", reason)
			continue
		}
		if reason := checkFrame(f, fr); reason != "" {
			refuse(fr.path, "%s", reason)
			continue
		}
		if seen[fr.path] {
			refuse(fr.path, "the patch changes this path more than once")
			continue
		}
		seen[fr.path] = true
	}
	if len(problems) > 0 {
		return nil, &RefusedError{Problems: problems}
	}

	r, err := openRepo(repo)
	if err != nil {
		return nil, err
	}
	defer r.close()
	lim := withDefaults(mounts.Limits{})
	cs := &mounts.ChangeSet{Changes: []mounts.Change{}, Violations: []mounts.Violation{}}
	var conflicts []Problem
	conflict := func(p, format string, args ...any) {
		conflicts = append(conflicts, Problem{Path: printable(p), Reason: fmt.Sprintf(format, args...)})
	}
	for i, f := range files {
		fr := &frames[i]
		var before []byte
		if fr.kind == mounts.ChangeCreate {
			n, err := r.lstat(fr.path)
			if err != nil {
				if e := asProblem(err); e != err {
					return nil, e
				}
				return nil, err
			}
			if n.exists {
				conflict(fr.path, "the patch creates it, but it exists in the repository")
				continue
			}
		} else {
			data, _, exists, err := r.readFile(fr.path, lim.MaxFileBytes)
			if err != nil {
				if e := asProblem(err); e != err {
					return nil, e
				}
				return nil, err
			}
			if !exists {
				conflict(fr.path, "the patch changes it, but it does not exist in the repository")
				continue
			}
			if int64(len(data)) > lim.MaxFileBytes {
				refuse(fr.path, "the repository's file is larger than %d bytes", lim.MaxFileBytes)
				continue
			}
			before = data
		}
		if fr.oldOID != "" && !blobMatches(fr.oldOID, before, fr.kind == mounts.ChangeCreate) {
			conflict(fr.path, "the index line names blob %s, the repository holds %s", fr.oldOID, blobID(sha1.New(), before, false))
			continue
		}
		var out bytes.Buffer
		if err := gitdiff.Apply(&out, bytes.NewReader(before), f); err != nil {
			if errors.Is(err, &gitdiff.Conflict{}) {
				conflict(fr.path, "a hunk does not apply to the repository's bytes: %v", err)
			} else {
				refuse(fr.path, "the patch cannot be applied: %v", err)
			}
			continue
		}
		after := out.Bytes()
		if fr.newOID != "" && !blobMatches(fr.newOID, after, fr.kind == mounts.ChangeDelete) {
			refuse(fr.path, "the index line names result blob %s, applying the hunks gives %s", fr.newOID, blobID(sha1.New(), after, false))
			continue
		}
		ch := mounts.Change{Path: fr.path, Kind: fr.kind}
		switch fr.kind {
		case mounts.ChangeCreate:
			ch.After, ch.AfterSHA256, ch.Size, ch.Mode = after, sha256Hex(after), int64(len(after)), 0o644
		case mounts.ChangeModify:
			if bytes.Equal(before, after) {
				refuse(fr.path, "the patch does not change the file")
				continue
			}
			ch.Before, ch.BeforeSHA256 = before, sha256Hex(before)
			ch.After, ch.AfterSHA256, ch.Size, ch.Mode = after, sha256Hex(after), int64(len(after)), 0o644
		case mounts.ChangeDelete:
			if len(after) != 0 {
				refuse(fr.path, "a deletion must remove every line of the file")
				continue
			}
			ch.Before, ch.BeforeSHA256 = before, sha256Hex(before)
		}
		cs.Changes = append(cs.Changes, ch)
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

// checkFrame compares what go-gitdiff parsed with the strict scanner's
// frame and the accepted kinds of file; it returns "" or the reason.
func checkFrame(f *gitdiff.File, fr *frame) string {
	switch {
	case f.IsRename || f.IsCopy:
		return "renames and copies are not accepted"
	case f.IsBinary || f.BinaryFragment != nil || f.ReverseBinaryFragment != nil:
		return "binary patches are not accepted"
	}
	switch fr.kind {
	case mounts.ChangeCreate:
		if !f.IsNew || f.IsDelete || f.NewName != fr.path || f.OldName != "" || f.NewMode != gitRegular {
			return "the file header does not read as the creation of a regular file"
		}
	case mounts.ChangeDelete:
		if !f.IsDelete || f.IsNew || f.OldName != fr.path || f.NewName != "" || f.OldMode != gitRegular {
			return "the file header does not read as the deletion of a regular file"
		}
	default:
		if f.IsNew || f.IsDelete || f.OldName != fr.path || f.NewName != fr.path ||
			(f.OldMode != 0 && f.OldMode != gitRegular) || f.NewMode != 0 {
			return "the file header does not read as the modification of a regular file"
		}
	}
	if len(f.TextFragments) != len(fr.hunks) {
		return fmt.Sprintf("the hunks do not read the same (%d strictly, %d by the parser)", len(fr.hunks), len(f.TextFragments))
	}
	for i, tf := range f.TextFragments {
		h := fr.hunks[i]
		if tf.OldPosition != h.oldPos || tf.OldLines != h.oldLines || tf.NewPosition != h.newPos || tf.NewLines != h.newLines {
			return fmt.Sprintf("hunk %d does not read the same to both parsers", i+1)
		}
		if err := tf.Validate(); err != nil {
			return fmt.Sprintf("hunk %d: %v", i+1, err)
		}
	}
	return ""
}

// blobMatches reports whether oid (possibly abbreviated) names a blob
// holding b, in a sha1 or a sha256 repository, or the null id for an absent
// side.
func blobMatches(oid string, b []byte, absent bool) bool {
	if absent {
		return strings.Trim(oid, "0") == ""
	}
	return strings.HasPrefix(blobID(sha1.New(), b, false), oid) || //nolint:gosec // git's object id
		strings.HasPrefix(blobID(sha256.New(), b, false), oid)
}

// blobID returns git's object id of a blob holding b with hash h, or the
// null id for an absent side.
func blobID(h hash.Hash, b []byte, absent bool) string {
	if absent {
		return strings.Repeat("0", 2*h.Size())
	}
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}
