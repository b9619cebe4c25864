package review

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/corral-sandbox/corral/mounts/changeset"
)

// Level is a risk class. The zero value is invalid; Low < Medium < High.
type Level int

// The risk classes.
const (
	Low Level = iota + 1
	Medium
	High
)

func (l Level) String() string {
	switch l {
	case Low:
		return "low"
	case Medium:
		return "medium"
	case High:
		return "high"
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// MarshalText writes the level's name.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads "low", "medium" or "high".
func (l *Level) UnmarshalText(b []byte) error {
	v, err := ParseLevel(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// ParseLevel reads "low", "medium" or "high" (any letter case).
func ParseLevel(s string) (Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "low":
		return Low, nil
	case "medium":
		return Medium, nil
	case "high":
		return High, nil
	}
	return 0, fmt.Errorf("unknown risk class %q (low, medium, high)", s)
}

// Risk is a change's class and every reason that raised it.
type Risk struct {
	Level   Level    `json:"level"`
	Reasons []string `json:"reasons"`
}

// riskBuilder collects reasons with their levels.
type riskBuilder struct {
	reasons []reason
}

type reason struct {
	level Level
	text  string
}

func (b *riskBuilder) add(l Level, format string, args ...any) {
	b.reasons = append(b.reasons, reason{l, fmt.Sprintf(format, args...)})
}

func (b *riskBuilder) level() Level {
	var l Level
	for _, r := range b.reasons {
		l = max(l, r.level)
	}
	return l
}

// risk returns the level and the reasons, highest first, stable within a
// level, without duplicates.
func (b *riskBuilder) risk() Risk {
	rs := slices.Clone(b.reasons)
	slices.SortStableFunc(rs, func(x, y reason) int { return int(y.level) - int(x.level) })
	out := Risk{Level: b.level(), Reasons: make([]string, 0, len(rs))}
	for _, r := range rs {
		if !slices.Contains(out.Reasons, r.text) {
			out.Reasons = append(out.Reasons, r.text)
		}
	}
	return out
}

// docExtensions are the file types a documentation agent is expected to
// write; anything else is at least Medium.
var docExtensions = map[string]bool{
	".md": true, ".markdown": true, ".mdx": true, ".txt": true, ".rst": true,
	".adoc": true, ".asciidoc": true, ".org": true, ".textile": true,
}

// scriptExtensions are files that some tool may execute or import.
var scriptExtensions = map[string]bool{
	".sh": true, ".bash": true, ".zsh": true, ".fish": true, ".ps1": true, ".bat": true, ".cmd": true,
	".py": true, ".js": true, ".mjs": true, ".cjs": true, ".ts": true, ".mts": true, ".tsx": true,
	".jsx": true, ".rb": true, ".pl": true, ".php": true, ".lua": true, ".go": true,
	".exe": true, ".so": true, ".dll": true, ".jar": true, ".wasm": true,
}

// largeChange is the after size above which a change is at least Medium.
const largeChange = 256 << 10

// Classify computes the risk of ch in scope from its path, its kind and its
// bytes (Before, After); it never reads a class or flag from metadata. The
// kind is only as true as the repository says: Apply checks it against the
// repository (a create must find nothing, a modify or delete the exact
// before bytes) before a classified change is written.
//
// Rules, the highest one winning:
//   - High: a deletion (a rename is a deletion plus a creation); any path
//     the name table (internal/names) gives a risk: agent instructions
//     and configuration such as AGENTS.md, .mcp.json, .claude/; secrets
//     such as .env and *.pem; package manifests such as package.json;
//     build scripts, CI definitions such as .github/workflows/; any other
//     dotfile or dot-directory, ignore files included; content with
//     bidirectional or invisible format characters (Trojan Source) or
//     terminal control characters; in page mode, any path but the page.
//   - Medium: a new file outside page mode; a file type other than text
//     documentation (.md, .txt, .rst, …), scripts and extension-less files
//     included; a file larger than 256 KiB.
//   - Low: editing an existing documentation file, or writing the
//     assigned page in page mode.
//
// Reasons lists every rule that matched, in the order above, and is never
// empty.
func Classify(ch changeset.Change, scope allowlist.Scope) Risk {
	var r riskBuilder
	p := ch.Path
	inPage := scope.Page != "" && p == scope.Page
	if scope.Page != "" && !inPage {
		r.add(High, "outside the assigned page %s", scope.Page)
	}
	switch ch.Kind {
	case changeset.Delete:
		r.add(High, "deletes a file")
	case changeset.Create, changeset.Modify:
	default:
		r.add(High, "unknown change kind %q", ch.Kind)
	}
	// Names tools and agents act on by themselves: the name table's risk
	// column, compared folded (any letter case, width or trailing dot).
	parts := strings.Split(p, "/")
	covered := make([]bool, len(parts))
	for _, h := range names.Match(p, false) {
		if h.Risk == "" {
			continue
		}
		r.add(High, "%s", h.Reason())
		for k := h.First; k <= h.Last; k++ {
			covered[k] = true
		}
	}
	// Any other dotfile or dot-directory.
	for i, c := range parts {
		if covered[i] || !strings.HasPrefix(c, ".") {
			continue
		}
		last := i == len(parts)-1
		switch {
		case last && strings.HasSuffix(names.Fold(c), "ignore"):
			r.add(High, "%s is an ignore file: it changes what tools see", c)
		case last:
			r.add(High, "%s is a dotfile: tools read dotfiles as configuration", c)
		default:
			r.add(High, "%s/ is a dot-directory: tools read them as configuration", strings.Join(parts[:i+1], "/"))
		}
	}
	if why := suspiciousText(ch.After); why != "" {
		r.add(High, "new content %s", why)
	}

	if ch.Kind == changeset.Create && !inPage {
		r.add(Medium, "creates a new file")
	}
	ext := strings.ToLower(path.Ext(p))
	switch {
	case scriptExtensions[ext]:
		r.add(Medium, "%s files are code that tools may run or import", ext)
	case ext == "" && ch.Kind != changeset.Delete:
		r.add(Medium, "no file extension: not recognisably documentation")
	case !docExtensions[ext] && ch.Kind != changeset.Delete:
		r.add(Medium, "%s is not a documentation file type", ext)
	}
	if len(ch.After) > largeChange {
		r.add(Medium, "large file (%d bytes)", len(ch.After))
	}

	if r.level() == 0 {
		if inPage {
			r.add(Low, "writes the assigned page")
		} else {
			r.add(Low, "edits an existing documentation file")
		}
	}
	return r.risk()
}

// suspiciousText describes characters in b that make text look other than
// it is, or "": bidirectional controls and invisible format characters
// (Trojan Source, hidden prompt text), and terminal control characters
// other than tab, newline, carriage return and form feed (escape sequences
// that rewrite what a reviewer's terminal shows).
func suspiciousText(b []byte) string {
	s := string(b)
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n' || r == '\r' || r == '\f':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			return fmt.Sprintf("holds control character %U (terminal escape sequences)", r)
		case unicode.Is(unicode.Cf, r) && r != 0xad && r != 0x200d:
			// Soft hyphens and zero-width joiners (emoji sequences) are
			// common in prose; every other format character hides text
			// or reorders it.
			return fmt.Sprintf("holds invisible or bidirectional format character %U", r)
		case r == 0x2028 || r == 0x2029:
			return fmt.Sprintf("holds line separator %U", r)
		}
	}
	return ""
}
