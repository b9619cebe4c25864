package changeset

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
	"github.com/containerd/errdefs"
)

// MaxPatchBytes caps the size of a patch ParsePatch reads.
const MaxPatchBytes = 64 << 20

// gitRegular is git's mode of a regular, non-executable file.
const gitRegular = 0o100644

// PatchError is a patch refused as a whole by ParsePatch: each Problem
// names the line at fault ("patch line 12", or "patch" for the whole) or
// the file's path, and the reason. It unwraps to errdefs.ErrInvalidArgument.
type PatchError struct {
	Problems []Problem
}

func (e *PatchError) Error() string { return "patch refused: " + Join(e.Problems) }

// Unwrap returns errdefs.ErrInvalidArgument.
func (e *PatchError) Unwrap() error { return errdefs.ErrInvalidArgument }

// FilePatch is one file of a patch as ParsePatch read it. Path is the
// path exactly as the patch spells it (unquoted, not yet checked against
// any policy: that is the caller's).
type FilePatch struct {
	// Line is the line of its "diff --git".
	Line int
	Path string
	Kind Kind
	// OldOID and NewOID are the index line's blob ids, possibly
	// abbreviated; "" without an index line.
	OldOID, NewOID string

	file *gitdiff.File
}

// ParsePatch reads data as the only patch format corral accepts:
// git-style unified text diffs of regular files (mode 100644), each path
// exactly once, as Patch and `git diff` write them. Two parsers read it,
// the strict scanner of this package and go-gitdiff, and must agree on
// every file and hunk. Anything else refuses the whole patch with a
// *PatchError naming the line or path:
//   - an ed script, a context diff, a traditional diff without
//     "diff --git", a preamble, a binary patch, a mode change, a symbolic
//     link (120000) or submodule (160000), a rename or copy, or nothing;
//   - a hunk header whose counts do not match its lines, overlapping or
//     unordered hunks, a hunk without a change;
//   - a path changed twice;
//   - a path that check refuses: check is the caller's policy for the
//     paths a patch may touch (nil: any). It sees each file's path as the
//     patch spells it, before the file's header is judged, and returns ""
//     or the reason the path is refused.
//
// ParsePatch reads no file: applying a FilePatch to a base is Apply.
func ParsePatch(data []byte, check func(path string) (reason string)) ([]FilePatch, error) {
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
	seen := map[string]bool{}
	out := make([]FilePatch, 0, len(files))
	for i, f := range files {
		fr := &frames[i]
		if check != nil {
			if reason := check(fr.path); reason != "" {
				problems = append(problems, Problem{Path: Printable(fr.path), Reason: reason})
				continue
			}
		}
		if reason := checkFrame(f, fr); reason != "" {
			problems = append(problems, Problem{Path: Printable(fr.path), Reason: reason})
			continue
		}
		if seen[fr.path] {
			problems = append(problems, Problem{Path: Printable(fr.path), Reason: "the patch changes this path more than once"})
			continue
		}
		seen[fr.path] = true
		out = append(out, FilePatch{Line: fr.line, Path: fr.path, Kind: fr.kind, OldOID: fr.oldOID, NewOID: fr.newOID, file: f})
	}
	if len(problems) > 0 {
		return nil, &PatchError{Problems: problems}
	}
	return out, nil
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
	case Create:
		if !f.IsNew || f.IsDelete || f.NewName != fr.path || f.OldName != "" || f.NewMode != gitRegular {
			return "the file header does not read as the creation of a regular file"
		}
	case Delete:
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

// ApplyError is a FilePatch that does not apply to a base. With Conflict
// the base is not the one the patch was made from (its index line names
// another blob, or a hunk does not match its lines): it unwraps to
// errdefs.ErrFailedPrecondition. Otherwise the patch contradicts itself
// (the index line names another result, a deletion leaves lines, a
// modification changes nothing): errdefs.ErrInvalidArgument.
type ApplyError struct {
	Reason   string
	Conflict bool
}

func (e *ApplyError) Error() string { return e.Reason }

// Unwrap returns the error's errdefs category.
func (e *ApplyError) Unwrap() error {
	if e.Conflict {
		return errdefs.ErrFailedPrecondition
	}
	return errdefs.ErrInvalidArgument
}

// Apply applies the file's hunks strictly (no fuzz, no offset) to before,
// the base's bytes (nil for a create), and returns the Change they make:
// Before from the base, After from the patch, digests computed, mode
// 0644 for a created or modified file. It fails with an *ApplyError.
func (fp *FilePatch) Apply(before []byte) (Change, error) {
	conflict := func(format string, args ...any) (Change, error) {
		return Change{}, &ApplyError{Reason: fmt.Sprintf(format, args...), Conflict: true}
	}
	refuse := func(format string, args ...any) (Change, error) {
		return Change{}, &ApplyError{Reason: fmt.Sprintf(format, args...)}
	}
	if fp.OldOID != "" && !blobMatches(fp.OldOID, before, fp.Kind == Create) {
		return conflict("the index line names blob %s, the repository holds %s", fp.OldOID, blobID(sha1.New(), before)) //nolint:gosec // git's object id
	}
	var out bytes.Buffer
	if err := gitdiff.Apply(&out, bytes.NewReader(before), fp.file); err != nil {
		if errors.Is(err, &gitdiff.Conflict{}) {
			return conflict("a hunk does not apply to the repository's bytes: %v", err)
		}
		return refuse("the patch cannot be applied: %v", err)
	}
	after := out.Bytes()
	if fp.NewOID != "" && !blobMatches(fp.NewOID, after, fp.Kind == Delete) {
		return refuse("the index line names result blob %s, applying the hunks gives %s", fp.NewOID, blobID(sha1.New(), after)) //nolint:gosec // git's object id
	}
	ch := Change{Path: fp.Path, Kind: fp.Kind}
	switch fp.Kind {
	case Create:
		ch.After, ch.AfterSHA256, ch.Size, ch.Mode = after, SHA256(after), int64(len(after)), 0o644
	case Modify:
		if bytes.Equal(before, after) {
			return refuse("the patch does not change the file")
		}
		ch.Before, ch.BeforeSHA256 = before, SHA256(before)
		ch.After, ch.AfterSHA256, ch.Size, ch.Mode = after, SHA256(after), int64(len(after)), 0o644
	case Delete:
		if len(after) != 0 {
			return refuse("a deletion must remove every line of the file")
		}
		ch.Before, ch.BeforeSHA256 = before, SHA256(before)
	}
	return ch, nil
}

// blobMatches reports whether oid (possibly abbreviated) names a blob
// holding b, in a sha1 or a sha256 repository, or the null id for an absent
// side.
func blobMatches(oid string, b []byte, absent bool) bool {
	if absent {
		return strings.Trim(oid, "0") == ""
	}
	return strings.HasPrefix(blobID(sha1.New(), b), oid) || //nolint:gosec // git's object id
		strings.HasPrefix(blobID(sha256.New(), b), oid)
}

// blobID returns git's object id, with hash h, of a blob holding b.
func blobID(h hash.Hash, b []byte) string {
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}
