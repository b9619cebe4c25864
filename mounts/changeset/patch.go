package changeset

import (
	"bytes"
	"crypto/sha1" //nolint:gosec // git blob ids are sha1 by definition
	"fmt"
	"io"
	"slices"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"
	"github.com/containerd/errdefs"
)

// patchContext is the number of context lines around each hunk, as git's
// default.
const patchContext = 3

// nullBlob is the all-zero object id git writes for an absent side.
const nullBlob = "0000000000000000000000000000000000000000"

// Patch renders cs as a git-style unified patch that `git apply` (and
// `git apply --check`) accepts at the repository root, in the format of
// `git diff --full-index`: for each change, sorted by path,
//
//	diff --git a/P b/P
//	new file mode 100644 | deleted file mode 100644
//	index <blob sha1 before>..<blob sha1 after>[ 100644]
//	--- a/P | /dev/null
//	+++ b/P | /dev/null
//	@@ hunks (go-udiff, 3 lines of context) @@
//
// with "\ No newline at end of file" after a last line without one. An empty
// file created or deleted has no ---/+++ lines and no hunk, as in git. Paths
// are quoted as git does (core.quotePath): non-ASCII bytes become octal
// escapes inside double quotes; a name holding a space gets a tab after it on
// the ---/+++ lines. Every file is mode 100644: Collect refuses executable
// bits and binary content, so neither mode changes nor binary patches exist.
//
// The writer is corral's own rather than go-gitdiff's formatter
// (gitdiff.File.String), which the module already uses to read patches:
// go-gitdiff writes every hunk header with both counts ("@@ -1,1 +1,1 @@"),
// where git leaves out a count of one, and no tab after a name that holds a
// space, which git writes so that GNU patch keeps trailing spaces in names.
// corral's patches are byte for byte what `git diff --full-index
// --no-renames` writes for the same change (TestPatchMatchesGit), so that a
// reviewer's git shows exactly what corral shows. Hunks come from go-udiff.
//
// Patch re-validates what it renders rather than trusting the set: a set with
// violations is refused with its *RejectedError (errdefs.ErrPermissionDenied);
// a change whose path fails the name rules of Collect, whose digests do not
// match its Before/After bytes (as in a set decoded from JSON), with binary
// content, special mode bits, an unknown kind or a duplicate path is refused
// with errdefs.ErrInvalidArgument. An empty set gives an empty patch.
func Patch(cs *Set) ([]byte, error) {
	var out bytes.Buffer
	if _, err := WritePatch(&out, cs); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// WritePatch writes the patch Patch renders of cs to w, one file's patch
// at a time, and returns the bytes written: the whole patch is never held
// in memory, so a caller sizes it with a counting writer (io.Discard
// wrapped) or streams it to a client. Every change is checked before the
// first byte is written, so a refusal (the errors Patch returns) writes
// nothing; an error after that is w's.
func WritePatch(w io.Writer, cs *Set) (int64, error) {
	if cs == nil {
		return 0, fmt.Errorf("rendering patch: nil change set: %w", errdefs.ErrInvalidArgument)
	}
	if err := cs.Err(); err != nil {
		return 0, fmt.Errorf("rendering patch: %w", err)
	}
	changes := slices.Clone(cs.Changes)
	slices.SortFunc(changes, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	for i := range changes {
		ch := &changes[i]
		if i > 0 && changes[i-1].Path == ch.Path {
			return 0, fmt.Errorf("rendering patch: %s: duplicate path: %w", Printable(ch.Path), errdefs.ErrInvalidArgument)
		}
		if err := checkChange(ch); err != nil {
			return 0, fmt.Errorf("rendering patch: %s: %w", Printable(ch.Path), err)
		}
	}
	var n int64
	var file bytes.Buffer
	for i := range changes {
		ch := &changes[i]
		file.Reset()
		if err := writeFilePatch(&file, ch); err != nil {
			return n, fmt.Errorf("rendering patch: %s: %w", Printable(ch.Path), err)
		}
		m, err := w.Write(file.Bytes())
		n += int64(m)
		if err != nil {
			return n, fmt.Errorf("writing patch: %w", err)
		}
	}
	return n, nil
}

// checkChange verifies that ch is consistent and renderable.
func checkChange(ch *Change) error {
	if reason := CheckPath(ch.Path); reason != "" {
		return fmt.Errorf("%s: %w", reason, errdefs.ErrInvalidArgument)
	}
	if ch.Mode&0o111 != 0 || ch.Mode&^0o777 != 0 {
		return fmt.Errorf("mode %v cannot be rendered as 100644: %w", ch.Mode, errdefs.ErrInvalidArgument)
	}
	hasBefore, hasAfter := false, false
	switch ch.Kind {
	case Create:
		hasAfter = true
	case Modify:
		hasBefore, hasAfter = true, true
	case Delete:
		hasBefore = true
	default:
		return fmt.Errorf("unknown change kind %q: %w", ch.Kind, errdefs.ErrInvalidArgument)
	}
	side := func(name string, present bool, digest string, data []byte) error {
		switch {
		case !present && (digest != "" || len(data) > 0):
			return fmt.Errorf("a %s has %s content: %w", ch.Kind, name, errdefs.ErrInvalidArgument)
		case present && digest != SHA256(data):
			return fmt.Errorf("%s content does not match its sha256 %q: %w", name, digest, errdefs.ErrInvalidArgument)
		case present && IsBinary(data):
			return fmt.Errorf("%s content is binary: %w", name, errdefs.ErrInvalidArgument)
		}
		return nil
	}
	if err := side("before", hasBefore, ch.BeforeSHA256, ch.Before); err != nil {
		return err
	}
	if err := side("after", hasAfter, ch.AfterSHA256, ch.After); err != nil {
		return err
	}
	if ch.Kind == Modify && bytes.Equal(ch.Before, ch.After) {
		return fmt.Errorf("a modify without a content change: %w", errdefs.ErrInvalidArgument)
	}
	return nil
}

// writeFilePatch writes the git patch of one checked change.
func writeFilePatch(out *bytes.Buffer, ch *Change) error {
	a, b := gitQuote("a/"+ch.Path), gitQuote("b/"+ch.Path)
	fmt.Fprintf(out, "diff --git %s %s\n", a, b)
	// git puts a tab after a name with a space on the ---/+++ lines, so that
	// trailing spaces survive.
	if strings.Contains(ch.Path, " ") {
		a, b = a+"\t", b+"\t"
	}
	before, after := ch.Before, ch.After
	switch ch.Kind {
	case Create:
		fmt.Fprintf(out, "new file mode 100644\nindex %s..%s\n", nullBlob, gitBlobID(after))
		a = "/dev/null"
	case Delete:
		fmt.Fprintf(out, "deleted file mode 100644\nindex %s..%s\n", gitBlobID(before), nullBlob)
		b = "/dev/null"
	default:
		fmt.Fprintf(out, "index %s..%s 100644\n", gitBlobID(before), gitBlobID(after))
	}
	var edits []udiff.Edit
	if !bytes.Equal(before, after) {
		edits = udiff.Lines(string(before), string(after))
	}
	hunks, err := udiff.ToUnified(a, b, string(before), edits, patchContext)
	if err != nil {
		return fmt.Errorf("computing hunks: %w", err)
	}
	if hunks == "" && ch.Kind == Modify {
		return fmt.Errorf("no hunks for a modify: %w", errdefs.ErrInvalidArgument)
	}
	out.WriteString(hunks)
	return nil
}

// gitBlobID returns the hex sha1 object id git gives a blob with content b.
func gitBlobID(b []byte) string {
	return blobID(sha1.New(), b) //nolint:gosec // git's object id
}

// gitQuote quotes a patch path as git does (quote_c_style with
// core.quotePath on): unchanged unless it holds '"', '\', a control byte or a
// byte >= 0x80, else in double quotes with C escapes and octal for the rest.
func gitQuote(p string) string {
	needs := false
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			needs = true
			break
		}
	}
	if !needs {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Stat summarises cs for a reviewer, one line per change in path order and a
// total, then one line per violation:
//
//	create openwiki/pages/new.md (+12 -0)
//	modify openwiki/index.md (+3 -1)
//	delete openwiki/old.md (+0 -20)
//	3 files changed, 15 insertions(+), 21 deletions(-)
//	rejected openwiki/r: symbolic link
//
// Counts are lines; a last line without a newline counts as a line. Paths
// unsafe to print are Go-quoted.
func (cs *Set) Stat() string {
	if cs == nil {
		return "0 files changed, 0 insertions(+), 0 deletions(-)\n"
	}
	changes := slices.Clone(cs.Changes)
	slices.SortFunc(changes, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	var b strings.Builder
	var adds, dels int
	for _, ch := range changes {
		add, del := lineCounts(&ch)
		adds += add
		dels += del
		fmt.Fprintf(&b, "%s %s (+%d -%d)\n", ch.Kind, Printable(ch.Path), add, del)
	}
	files := "files"
	if len(changes) == 1 {
		files = "file"
	}
	fmt.Fprintf(&b, "%d %s changed, %d insertions(+), %d deletions(-)\n", len(changes), files, adds, dels)
	for _, v := range cs.Violations {
		fmt.Fprintf(&b, "rejected %s: %s\n", v.Path, v.Reason)
	}
	return b.String()
}

// lineCounts returns the lines a change adds and removes.
func lineCounts(ch *Change) (add, del int) {
	switch ch.Kind {
	case Create:
		return countLines(string(ch.After)), 0
	case Delete:
		return 0, countLines(string(ch.Before))
	}
	before := string(ch.Before)
	for _, e := range udiff.Lines(before, string(ch.After)) {
		del += countLines(before[e.Start:e.End])
		add += countLines(e.New)
	}
	return add, del
}

// countLines counts lines, a final line without a newline included.
func countLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}
