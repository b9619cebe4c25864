package changeset

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/names"
)

// Kind says what a Change does to its path: "create", "modify" or
// "delete".
type Kind string

// The kinds of Change. A type change (a directory replaced by a file or the
// reverse) is never a kind of its own: it is a delete of every old file plus a
// create of every new one.
const (
	Create Kind = "create"
	Modify Kind = "modify"
	Delete Kind = "delete"
)

// Change is one regular file that the sandbox created, modified or deleted.
//
// Path is repo-relative, slash-separated and clean ("openwiki/pages/a.md").
// BeforeSHA256 and AfterSHA256 are lower-case hex sha256 digests of the
// content before and after, "" where that side is absent (create, delete).
// Size is the after size in bytes and Mode the after permission bits
// (0o777 mask); both are 0 for a delete. Before and After hold the content
// itself; they are not serialised, so a Set read back from JSON cannot
// be turned into a Patch (the digests no longer match).
type Change struct {
	Path         string      `json:"path"`
	Kind         Kind        `json:"kind"`
	BeforeSHA256 string      `json:"before_sha256"`
	AfterSHA256  string      `json:"after_sha256"`
	Size         int64       `json:"size"`
	Mode         os.FileMode `json:"mode"`
	Before       []byte      `json:"-"`
	After        []byte      `json:"-"`
}

// Problem is one path and the reason it stops a change set: a violation
// found at collection (any one rejects the whole Set), a line of a patch
// that does not parse, or (in package review) a refusal or conflict at
// apply.
//
// Path is the repo-relative path of the offending entry ("patch line N"
// for a patch). When that path is not
// safe to print (control characters, bidi marks, invalid UTF-8) it is given
// Go-quoted (strconv.QuoteToASCII) and so starts with a double quote, which a
// valid path never does.
type Problem struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Set is what a sandbox left in its write area: the Changes sorted by
// Path, and the Violations sorted by Path. Any violation rejects the whole
// set; see Err.
type Set struct {
	Changes    []Change  `json:"changes"`
	Violations []Problem `json:"violations"`
}

// Err returns nil when the set has no violations, else a *RejectedError
// listing every violation; it unwraps to errdefs.ErrPermissionDenied.
func (cs *Set) Err() error {
	if cs == nil || len(cs.Violations) == 0 {
		return nil
	}
	return &RejectedError{Violations: slices.Clone(cs.Violations)}
}

// RejectedError is the error of a Set with violations. Nothing of such
// a set may be applied.
type RejectedError struct {
	Violations []Problem
}

func (e *RejectedError) Error() string { return "change set rejected: " + Join(e.Violations) }

// Join writes problems as one line: "path: reason; path: reason".
func Join(problems []Problem) string {
	var b strings.Builder
	for i, p := range problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Path)
		b.WriteString(": ")
		b.WriteString(p.Reason)
	}
	return b.String()
}

// Unwrap returns errdefs.ErrPermissionDenied.
func (e *RejectedError) Unwrap() error { return errdefs.ErrPermissionDenied }

// Limits caps what Collect and CollectPage read. A zero or negative field
// takes its value from DefaultLimits: a limit cannot be switched off.
type Limits struct {
	// MaxFileBytes caps one file, in bytes (after content, and before content
	// of a changed or deleted file). Larger files are rejected from their
	// size without being read.
	MaxFileBytes int64
	// MaxTotalBytes caps the bytes held in memory: the content of every
	// regular file in the upper dir plus the before content of every changed
	// or deleted file.
	MaxTotalBytes int64
	// MaxFiles caps the entries examined: every entry of the upper dir plus
	// every base file that a whiteout or an opaque directory covers.
	MaxFiles int
	// MaxDepth caps the number of path components below the write area.
	MaxDepth int
}

// DefaultLimits returns 8 MiB per file, 64 MiB in total, 10,000 entries and
// a depth of 32.
func DefaultLimits() Limits {
	return Limits{
		MaxFileBytes:  8 << 20,
		MaxTotalBytes: 64 << 20,
		MaxFiles:      10000,
		MaxDepth:      32,
	}
}

// WithDefaults returns l with every zero or negative field taken from
// DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	return l
}

// SHA256 returns the lower-case hex sha256 digest of b, the form of
// Change.BeforeSHA256 and AfterSHA256.
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// IsBinary reports content a text patch cannot carry: a NUL byte or invalid
// UTF-8.
func IsBinary(b []byte) bool {
	return bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b)
}

// CheckPath validates a repo-relative path: clean, relative, not
// leaving the repository, and every component valid for checkName. It returns
// "" or the reason it is refused.
func CheckPath(p string) string {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." {
		return "not a clean relative path"
	}
	for _, name := range strings.Split(p, "/") {
		if reason := checkName(name); reason != "" {
			return reason
		}
	}
	return ""
}

// CheckName validates one path component of a change set and returns ""
// or the reason it is refused: no control, format (bidi, invisible) or line
// separator characters, no '"' or '\\', and no name the name table
// reserves (names.Reserved: .git, git~1, .claims, ignore files, git control
// files, compared folded, so ".Git.", "．claims" and ".claims " are
// reserved too), e.g. ".claims is owned by corral". The write policy
// (allowlist) and review apply the same table, so a name is refused where
// it is first written.
func CheckName(name string) string { return checkName(name) }

func checkName(name string) string {
	switch name {
	case "", ".", "..":
		return "path leaves the write area"
	}
	if !utf8.ValidString(name) {
		return "name is not valid UTF-8"
	}
	for _, r := range name {
		switch {
		case r == '/':
			return "path leaves the write area"
		case r == '"' || r == '\\':
			return fmt.Sprintf("name contains %q", r)
		case unicode.Is(unicode.Cc, r):
			return fmt.Sprintf("name contains control character %U", r)
		case unicode.Is(unicode.Cf, r):
			return fmt.Sprintf("name contains format character %U (bidi or invisible)", r)
		case r == '\u2028' || r == '\u2029':
			return fmt.Sprintf("name contains line separator %U", r)
		}
	}
	if reason := names.Reserved(name); reason != "" {
		return name + " " + reason
	}
	return ""
}

// Printable returns p, or p Go-quoted when it is not safe to print.
func Printable(p string) string {
	if !utf8.ValidString(p) || strings.HasPrefix(p, `"`) {
		return strconv.QuoteToASCII(p)
	}
	for _, r := range p {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return strconv.QuoteToASCII(p)
		}
	}
	return p
}
