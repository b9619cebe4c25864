package changeset

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// frame is one file of a patch as the strict scanner reads it.
type frame struct {
	line   int // line of its "diff --git"
	path   string
	kind   Kind
	oldOID string // from the index line, "" when absent
	newOID string
	hunks  []hunk
}

// hunk is one @@ header's numbers.
type hunk struct {
	oldPos, oldLines, newPos, newLines int64
}

var (
	hunkHeader = regexp.MustCompile(`^@@ -([0-9]{1,10})(?:,([0-9]{1,10}))? \+([0-9]{1,10})(?:,([0-9]{1,10}))? @@(?: [^\n]*)?$`)
	indexLine  = regexp.MustCompile(`^index ([0-9a-f]{7,64})\.\.([0-9a-f]{7,64})( 100644)?$`)
)

// scanPatch reads data as the only patch format corral accepts: git-style
// unified text diffs of regular files (mode 100644), as `git diff` and
// Patch write them. Every line must belong to it: a "diff --git a/P
// b/P" line with the same P twice; optional "new file mode 100644" or
// "deleted file mode 100644"; an optional index line; "--- a/P" (or
// /dev/null for a create) and "+++ b/P" (or /dev/null for a delete); hunks
// whose headers count exactly the lines that follow, in increasing order
// and with consistent new positions. Anything else — a preamble, renames,
// copies, mode changes, binary patches, ed scripts, context diffs, lines a
// hunk header does not count — refuses the whole patch with a *PatchError
// naming the line.
func scanPatch(data []byte) ([]frame, error) {
	if len(data) == 0 {
		return nil, refuseLine(0, "the patch is empty: no file to apply")
	}
	if data[len(data)-1] != '\n' {
		return nil, refuseLine(0, "the patch does not end with a newline (truncated?)")
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines = lines[:len(lines)-1] // SplitAfter leaves "" after the last "\n"
	var frames []frame
	i := 0
	text := func(i int) string { return strings.TrimSuffix(string(lines[i]), "\n") }
	for i < len(lines) {
		l := text(i)
		if len(frames) > 0 && len(frames[len(frames)-1].hunks) > 0 && len(l) > 0 && strings.ContainsRune(" +-\\", rune(l[0])) {
			return nil, refuseLine(i+1, "line not counted by the hunk header before it (the header's counts do not match the lines): %s", clipLine(l))
		}
		if !strings.HasPrefix(l, "diff --git ") {
			return nil, refuseLine(i+1, "not part of a git-style unified diff (only `diff --git` patches of regular files are accepted): %s", clipLine(l))
		}
		p, err := parseDiffGit(strings.TrimPrefix(l, "diff --git "))
		if err != nil {
			return nil, refuseLine(i+1, "%v", err)
		}
		f := frame{line: i + 1, path: p, kind: Modify}
		i++
		var sawMode, sawIndex, sawOld, sawNew bool
	headers:
		for ; i < len(lines); i++ {
			l := text(i)
			switch {
			case strings.HasPrefix(l, "@@ "), strings.HasPrefix(l, "diff --git "):
				break headers
			case strings.HasPrefix(l, "new file mode "), strings.HasPrefix(l, "deleted file mode "):
				if sawMode || sawIndex || sawOld {
					return nil, refuseLine(i+1, "file mode line out of place")
				}
				sawMode = true
				mode := l[strings.LastIndexByte(l, ' ')+1:]
				if mode != "100644" {
					return nil, refuseLine(i+1, "mode %s: only regular files (100644) are accepted; symbolic links (120000), submodules (160000) and executables are refused", clipLine(mode))
				}
				if strings.HasPrefix(l, "new") {
					f.kind = Create
				} else {
					f.kind = Delete
				}
			case strings.HasPrefix(l, "index "):
				if sawIndex || sawOld {
					return nil, refuseLine(i+1, "index line out of place")
				}
				sawIndex = true
				m := indexLine.FindStringSubmatch(l)
				if m == nil {
					return nil, refuseLine(i+1, "malformed index line (mode 100644 only): %s", clipLine(l))
				}
				if m[3] != "" && f.kind != Modify {
					return nil, refuseLine(i+1, "index line with a mode on a created or deleted file")
				}
				f.oldOID, f.newOID = m[1], m[2]
			case strings.HasPrefix(l, "--- "):
				if sawOld {
					return nil, refuseLine(i+1, "second --- line")
				}
				sawOld = true
				want := "a/" + p
				if f.kind == Create {
					want = "/dev/null"
				}
				if err := checkFileLine(strings.TrimPrefix(l, "--- "), want); err != nil {
					return nil, refuseLine(i+1, "%v", err)
				}
			case strings.HasPrefix(l, "+++ "):
				if !sawOld || sawNew {
					return nil, refuseLine(i+1, "+++ line out of place")
				}
				sawNew = true
				want := "b/" + p
				if f.kind == Delete {
					want = "/dev/null"
				}
				if err := checkFileLine(strings.TrimPrefix(l, "+++ "), want); err != nil {
					return nil, refuseLine(i+1, "%v", err)
				}
			case strings.HasPrefix(l, "old mode "), strings.HasPrefix(l, "new mode "):
				return nil, refuseLine(i+1, "mode changes are not accepted")
			case strings.HasPrefix(l, "rename "), strings.HasPrefix(l, "copy "),
				strings.HasPrefix(l, "similarity index "), strings.HasPrefix(l, "dissimilarity index "):
				return nil, refuseLine(i+1, "renames and copies are not accepted (a rename is a deletion and a creation: make the patch with git diff --no-renames)")
			case strings.HasPrefix(l, "GIT binary patch"), strings.HasPrefix(l, "Binary files "), strings.HasPrefix(l, "literal "), strings.HasPrefix(l, "delta "):
				return nil, refuseLine(i+1, "binary patches are not accepted")
			default:
				return nil, refuseLine(i+1, "unexpected line in a file header: %s", clipLine(l))
			}
		}
		if sawOld != sawNew {
			return nil, refuseLine(f.line, "--- without +++")
		}
		// Hunks.
		var oldEnd, delta int64 // first old line not yet covered; new - old so far
		for i < len(lines) && strings.HasPrefix(text(i), "@@ ") {
			if !sawOld {
				return nil, refuseLine(i+1, "hunk without ---/+++ lines")
			}
			m := hunkHeader.FindStringSubmatch(text(i))
			if m == nil {
				return nil, refuseLine(i+1, "malformed hunk header: %s", clipLine(text(i)))
			}
			h := hunk{oldPos: atoi(m[1]), oldLines: countOr1(m[2]), newPos: atoi(m[3]), newLines: countOr1(m[4])}
			oldIdx := h.oldPos - 1 // 0-based index of the hunk's first old line
			if h.oldLines == 0 {
				oldIdx = h.oldPos // a 0-line range names the line before
			}
			newIdx := oldIdx + delta
			wantNew := newIdx + 1
			if h.newLines == 0 {
				wantNew = newIdx
			}
			switch {
			case h.oldLines == 0 && h.newLines == 0:
				return nil, refuseLine(i+1, "hunk with no lines")
			case h.oldPos == 0 && h.oldLines != 0, h.newPos == 0 && h.newLines != 0:
				return nil, refuseLine(i+1, "hunk header counts lines from line 0")
			case oldIdx < oldEnd:
				return nil, refuseLine(i+1, "hunks overlap or are out of order")
			case h.newPos != wantNew:
				return nil, refuseLine(i+1, "hunk header's new position %d does not follow from the hunks before it (expected %d)", h.newPos, wantNew)
			case f.kind == Create && (h.oldPos != 0 || h.oldLines != 0):
				return nil, refuseLine(i+1, "a created file's hunk must start from nothing (-0,0)")
			case f.kind == Delete && (h.newPos != 0 || h.newLines != 0):
				return nil, refuseLine(i+1, "a deleted file's hunk must leave nothing (+0,0)")
			}
			oldEnd = oldIdx + h.oldLines
			delta += h.newLines - h.oldLines
			i++
			old, new := h.oldLines, h.newLines
			changed, lastContent := false, false
			for old > 0 || new > 0 || (i < len(lines) && lastContent && strings.HasPrefix(text(i), `\ `)) {
				if i >= len(lines) {
					return nil, refuseLine(len(lines), "the patch ends inside a hunk: its header counts more lines than follow")
				}
				l := string(lines[i])
				switch l[0] {
				case ' ':
					old--
					new--
					lastContent = true
				case '-':
					old--
					changed, lastContent = true, true
				case '+':
					new--
					changed, lastContent = true, true
				case '\\':
					if !lastContent || !strings.HasPrefix(l, `\ `) {
						return nil, refuseLine(i+1, "misplaced no-newline marker")
					}
					lastContent = false
				default:
					return nil, refuseLine(i+1, "line not counted by its hunk header (the header's counts do not match the lines): %s", clipLine(strings.TrimSuffix(l, "\n")))
				}
				if old < 0 || new < 0 {
					return nil, refuseLine(i+1, "hunk holds more lines than its header counts")
				}
				i++
			}
			if !changed {
				return nil, refuseLine(i, "hunk without a change")
			}
			f.hunks = append(f.hunks, h)
		}
		switch {
		case sawOld && len(f.hunks) == 0:
			return nil, refuseLine(f.line, "---/+++ lines without a hunk")
		case f.kind == Modify && len(f.hunks) == 0:
			return nil, refuseLine(f.line, "a modified file without a hunk (mode-only changes are not accepted)")
		}
		frames = append(frames, f)
	}
	return frames, nil
}

// parseDiffGit reads the "a/P b/P" of a diff --git line; both sides must
// name the same path, quoted as git quotes (both or neither).
func parseDiffGit(s string) (string, error) {
	if strings.HasPrefix(s, `"`) {
		a, rest, err := gitUnquote(s)
		if err != nil {
			return "", fmt.Errorf("diff --git line: %v", err)
		}
		if !strings.HasPrefix(rest, ` "`) {
			return "", fmt.Errorf("diff --git line: the two names must be quoted alike")
		}
		b, rest, err := gitUnquote(rest[1:])
		if err != nil || rest != "" {
			return "", fmt.Errorf("diff --git line: malformed second name")
		}
		return samePath(a, b)
	}
	if strings.Contains(s, `"`) {
		return "", fmt.Errorf("diff --git line: the two names must be quoted alike")
	}
	// "a/P b/P": the halves have the same length.
	if (len(s)-1)%2 != 0 {
		return "", fmt.Errorf("diff --git line: the old and new names differ (renames are not accepted)")
	}
	h := (len(s) - 1) / 2
	if s[h] != ' ' {
		return "", fmt.Errorf("diff --git line: the old and new names differ (renames are not accepted)")
	}
	return samePath(s[:h], s[h+1:])
}

func samePath(a, b string) (string, error) {
	if !strings.HasPrefix(a, "a/") || !strings.HasPrefix(b, "b/") {
		return "", fmt.Errorf("diff --git line: names must start with a/ and b/")
	}
	if a[2:] != b[2:] {
		return "", fmt.Errorf("diff --git line: the old and new names differ (%s, %s): renames are not accepted", clipLine(a), clipLine(b))
	}
	return a[2:], nil
}

// checkFileLine checks the name after "--- " or "+++ " against want (a
// prefixed path or /dev/null), quoted or not, with git's optional tab after
// a name.
func checkFileLine(s, want string) error {
	s = strings.TrimSuffix(s, "\t")
	got := s
	if strings.HasPrefix(s, `"`) {
		u, rest, err := gitUnquote(s)
		if err != nil || rest != "" {
			return fmt.Errorf("malformed quoted name: %s", clipLine(s))
		}
		got = u
	}
	if got != want {
		return fmt.Errorf("file name %s does not match the diff --git line (%s)", clipLine(s), clipLine(want))
	}
	return nil
}

// gitUnquote reads one C-quoted name as git writes it (\a \b \t \n \v \f
// \r \" \\ and three-digit octal escapes) from the start of s, and returns
// it and the rest of s.
func gitUnquote(s string) (string, string, error) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", fmt.Errorf("not a quoted name")
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			i++
			if i >= len(s) {
				return "", "", fmt.Errorf("unterminated escape")
			}
			switch e := s[i]; e {
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			case 'v':
				b.WriteByte('\v')
			case 'f':
				b.WriteByte('\f')
			case 'r':
				b.WriteByte('\r')
			case '"', '\\':
				b.WriteByte(e)
			case '0', '1', '2', '3':
				if i+2 >= len(s) {
					return "", "", fmt.Errorf("short octal escape")
				}
				v, err := strconv.ParseUint(s[i:i+3], 8, 8)
				if err != nil {
					return "", "", fmt.Errorf("bad octal escape")
				}
				b.WriteByte(byte(v))
				i += 2
			default:
				return "", "", fmt.Errorf("unknown escape \\%c", e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("unterminated quoted name")
}

func atoi(s string) int64 {
	v, _ := strconv.ParseInt(s, 10, 64)
	return v
}

func countOr1(s string) int64 {
	if s == "" {
		return 1
	}
	return atoi(s)
}

// refuseLine refuses the whole patch at line n (0: the patch as a whole).
func refuseLine(n int, format string, args ...any) error {
	where := "patch"
	if n > 0 {
		where = fmt.Sprintf("patch line %d", n)
	}
	return &PatchError{Problems: []Problem{{Path: where, Reason: fmt.Sprintf(format, args...)}}}
}

// clipLine bounds a patch excerpt quoted in a refusal and makes it safe to
// print.
func clipLine(s string) string {
	const max = 120
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strconv.QuoteToASCII(s)
}
