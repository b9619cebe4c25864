package ignore

import (
	"bytes"
	"fmt"
	"strings"
)

// MaxFileSize bounds one ignore file. Git warns about and skips larger
// files; corral refuses to start the session instead (fail closed).
const MaxFileSize = 100 << 20

// Pattern is one line of an ignore file.
type Pattern struct {
	Line     int    // 1-based line number in its file
	Text     string // the line after trailing-space trimming, e.g. "!d/sub/*"
	glob     string // what is matched: no "!", no trailing "/"
	negate   bool   // "!pat": re-include
	dirOnly  bool   // "pat/": directories only
	basename bool   // no "/" in glob: matched against the last component
	literal  bool   // glob has no wildcard or escape: plain comparison
	prefix   int    // length of glob's leading literal part (see match)
}

// File is one parsed ignore file and the directory it applies to.
type File struct {
	Dir      string // canonical directory, "." for the root
	Source   string // canonical path of the file, e.g. "sub/.openwikiignore"
	Patterns []Pattern
}

// Result is the outcome of matching a path against an ignore file.
type Result int

const (
	NoMatch Result = iota
	Excluded
	Included
)

var utf8BOM = []byte("\xef\xbb\xbf")

// Parse parses the contents of an ignore file as git's
// add_patterns_from_buffer does: a UTF-8 BOM is skipped; lines are split
// on "\n" and one "\r" before it is dropped; empty lines and lines
// starting with "#" are skipped (the check is on the raw line, so " #x"
// is a pattern); a NUL ends the line; unescaped trailing spaces (not
// tabs) are trimmed. Line numbers count every line.
func Parse(dir, source string, data []byte) *File {
	f := &File{Dir: dir, Source: source}
	data = bytes.TrimPrefix(data, utf8BOM)
	line := 0
	for len(data) > 0 {
		line++
		var entry []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			entry, data = data[:i], data[i+1:]
		} else {
			entry, data = data, nil
		}
		if len(entry) == 0 || entry[0] == '#' {
			continue
		}
		entry = bytes.TrimSuffix(entry, []byte("\r"))
		if i := bytes.IndexByte(entry, 0); i >= 0 {
			entry = entry[:i]
		}
		f.Patterns = append(f.Patterns, ParsePattern(TrimTrailingSpaces(string(entry)), line))
	}
	return f
}

// TrimTrailingSpaces drops the trailing run of spaces unless it starts
// with an escaped one: "a  " is "a", `a\ ` stays `a\ `, `a\  ` is `a\ `.
// (git's trim_trailing_spaces; go-git trims all spaces unless the line
// ends in `\ `, which breaks `a\  `.)
func TrimTrailingSpaces(s string) string {
	lastSpace := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if lastSpace < 0 {
				lastSpace = i
			}
		case '\\':
			i++
			if i == len(s) {
				return s
			}
			lastSpace = -1
		default:
			lastSpace = -1
		}
	}
	if lastSpace >= 0 {
		return s[:lastSpace]
	}
	return s
}

// ParsePattern is git's parse_path_pattern.
func ParsePattern(text string, line int) Pattern {
	p := Pattern{Line: line, Text: text}
	g := text
	if strings.HasPrefix(g, "!") {
		p.negate = true
		g = g[1:]
	}
	if strings.HasSuffix(g, "/") {
		p.dirOnly = true
		g = g[:len(g)-1]
	}
	p.basename = !strings.Contains(g, "/")
	if !p.basename {
		// match_pathname: a leading slash only anchors, and every
		// pattern with a slash is anchored to the file's directory.
		g = strings.TrimPrefix(g, "/")
	}
	p.glob = g
	p.prefix = strings.IndexAny(g, `*?[\`)
	p.literal = p.prefix < 0
	if p.literal {
		p.prefix = len(g)
	}
	return p
}

// match reports whether the pattern matches p (canonical, relative to the
// repository root, inside the ignore file's directory dir) whose type is
// isDir.
func (p *Pattern) match(dir, path string, isDir bool) bool {
	if p.dirOnly && !isDir {
		return false
	}
	if p.basename {
		name := path[strings.LastIndexByte(path, '/')+1:]
		if p.literal {
			return name == p.glob
		}
		return wildmatch(p.glob, name, false)
	}
	rel := path
	if dir != "." {
		rel = path[len(dir)+1:]
	}
	// As git's match_pathname does, compare the literal prefix first and
	// wildmatch only the rest. This is not just an optimization: a "**"
	// right after the prefix is then at the start of what wildmatch sees,
	// so git treats "d/a**/b" as "d/a" + "**/b" (matching d/a/x/b) and
	// "d/a**" as matching d/a/b/c.
	if len(rel) < p.prefix || rel[:p.prefix] != p.glob[:p.prefix] {
		return false
	}
	if p.literal {
		return len(rel) == p.prefix
	}
	return wildmatch(p.glob[p.prefix:], rel[p.prefix:], true)
}

// Match returns the outcome of the file's last matching pattern for path,
// which must lie inside the file's directory, and that pattern.
func (f *File) Match(path string, isDir bool) (Result, *Pattern) {
	for i := len(f.Patterns) - 1; i >= 0; i-- {
		p := &f.Patterns[i]
		if p.match(f.Dir, path, isDir) {
			if p.negate {
				return Included, p
			}
			return Excluded, p
		}
	}
	return NoMatch, nil
}

// Stack is the ignore files that apply to one directory's entries,
// shallowest first. Deeper files take precedence, as in git.
type Stack []*File

// Match judges path by the last matching pattern of the deepest file
// that has one, and returns the refusal rule when it is Excluded, e.g.
// ".openwikiignore:3 hides secrets/".
func (s Stack) Match(path string, isDir bool) (rule string, hidden bool) {
	for i := len(s) - 1; i >= 0; i-- {
		switch res, p := s[i].Match(path, isDir); res {
		case Excluded:
			return fmt.Sprintf("%s:%d hides %s", s[i].Source, p.Line, displayPath(path, isDir)), true
		case Included:
			return "", false
		}
	}
	return "", false
}

// displayPath writes directories with a trailing slash, as gitignore does.
func displayPath(path string, isDir bool) string {
	if isDir {
		return path + "/"
	}
	return path
}

// wildmatch results, as in git's wildmatch.h.
const (
	wmMatch = iota
	wmNoMatch
	wmAbortAll
	wmAbortToStarStar
)

// wildmatch matches text against a gitignore glob. With pathname ("/" in
// the pattern, git's WM_PATHNAME) "*", "?" and brackets never match "/",
// and "**" between slashes matches any number of directories; without it
// (basename patterns) "*" matches anything. "*" matches a leading dot.
//
// Results are memoized per (pattern suffix, text suffix): git's recursion
// is exponential in the number of "**/" of a pattern (twenty of them
// against a path forty directories deep run for minutes), and a
// repository chooses its own ignore files. dowild is a pure function of
// the two suffixes, so the memo changes no answer.
func wildmatch(pattern, text string, pathname bool) bool {
	var w wildMemo
	return w.dowild(pattern, text, pathname) == wmMatch
}

// wildMemo remembers dowild's results by the lengths of the pattern and
// text suffixes it was called with (both always suffixes of one call's
// pattern and text). The map is made on the first recursive call only.
type wildMemo struct {
	seen map[[2]int]int
}

// rec is dowild's recursive call, answered from the memo when it can be.
func (w *wildMemo) rec(p, text string, pathname bool) int {
	if w.seen == nil {
		w.seen = make(map[[2]int]int)
	}
	key := [2]int{len(p), len(text)}
	if m, ok := w.seen[key]; ok {
		return m
	}
	m := w.dowild(p, text, pathname)
	w.seen[key] = m
	return m
}

// byteAt returns s[i], or 0 past the end (the C code's NUL terminator).
func byteAt(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func isGlobSpecial(c byte) bool {
	return c == '*' || c == '?' || c == '[' || c == '\\'
}

// dowild is a line-by-line port of git's wildmatch.c dowild (without
// WM_CASEFOLD, which git only uses with core.ignoreCase); its recursive
// calls go through the memo.
func (w *wildMemo) dowild(p, text string, pathname bool) int {
	pi, ti := 0, 0
	for ; pi < len(p); pi, ti = pi+1, ti+1 {
		pch := p[pi]
		tch := byteAt(text, ti)
		if tch == 0 && pch != '*' {
			return wmAbortAll
		}
		switch pch {
		case '\\':
			// Literal match with the following character; a trailing
			// backslash matches nothing.
			pi++
			if tch != byteAt(p, pi) {
				return wmNoMatch
			}
		default:
			if tch != pch {
				return wmNoMatch
			}
		case '?':
			if pathname && tch == '/' {
				return wmNoMatch
			}
		case '*':
			var matchSlash bool
			pi++
			if byteAt(p, pi) == '*' {
				prev := pi - 2
				for pi++; byteAt(p, pi) == '*'; pi++ {
				}
				if (prev < 0 || p[prev] == '/') &&
					(pi == len(p) || p[pi] == '/' || (p[pi] == '\\' && byteAt(p, pi+1) == '/')) {
					// "**/" may match nothing: try the rest here first.
					if byteAt(p, pi) == '/' && w.rec(p[pi+1:], text[ti:], pathname) == wmMatch {
						return wmMatch
					}
					matchSlash = true
				} else {
					// "**" not between slashes is a plain "*".
					matchSlash = false
				}
			} else {
				matchSlash = !pathname
			}
			if pi == len(p) {
				// Trailing "**" matches everything, trailing "*" only
				// when no slash is left.
				if !matchSlash && strings.IndexByte(text[ti:], '/') >= 0 {
					return wmNoMatch
				}
				return wmMatch
			} else if !matchSlash && p[pi] == '/' {
				// One "*" followed by a slash matches up to the next
				// slash, which the loop then consumes.
				slash := strings.IndexByte(text[ti:], '/')
				if slash < 0 {
					return wmNoMatch
				}
				ti += slash
				continue
			}
			for tch != 0 {
				if !isGlobSpecial(p[pi]) {
					// Skip ahead to the literal that follows the star.
					pch = p[pi]
					for {
						tch = byteAt(text, ti)
						if tch == 0 || (!matchSlash && tch == '/') || tch == pch {
							break
						}
						ti++
					}
					if tch != pch {
						return wmNoMatch
					}
				}
				if m := w.rec(p[pi:], text[ti:], pathname); m != wmNoMatch {
					if !matchSlash || m != wmAbortToStarStar {
						return m
					}
				} else if !matchSlash && tch == '/' {
					return wmAbortToStarStar
				}
				ti++
				tch = byteAt(text, ti)
			}
			return wmAbortAll
		case '[':
			pi++
			pch = byteAt(p, pi)
			if pch == '^' {
				pch = '!'
			}
			negated := pch == '!'
			if negated {
				pi++
				pch = byteAt(p, pi)
			}
			var prevCh byte
			matched := false
			for {
				if pch == 0 {
					return wmAbortAll
				}
				switch {
				case pch == '\\':
					pi++
					pch = byteAt(p, pi)
					if pch == 0 {
						return wmAbortAll
					}
					if tch == pch {
						matched = true
					}
				case pch == '-' && prevCh != 0 && byteAt(p, pi+1) != 0 && byteAt(p, pi+1) != ']':
					pi++
					pch = p[pi]
					if pch == '\\' {
						pi++
						pch = byteAt(p, pi)
						if pch == 0 {
							return wmAbortAll
						}
					}
					if tch <= pch && tch >= prevCh {
						matched = true
					}
					pch = 0 // so that prevCh becomes 0
				case pch == '[' && byteAt(p, pi+1) == ':':
					pi += 2
					s := pi
					for pch = byteAt(p, pi); pch != 0 && pch != ']'; pch = byteAt(p, pi) {
						pi++
					}
					if pch == 0 {
						return wmAbortAll
					}
					if n := pi - s - 1; n < 0 || p[pi-1] != ':' {
						// No ":]": a plain "[" in the set.
						pi = s - 2
						pch = '['
						if tch == pch {
							matched = true
						}
					} else {
						in, ok := inClass(p[s:s+n], tch)
						if !ok {
							return wmAbortAll // malformed [:class:]
						}
						if in {
							matched = true
						}
						pch = 0
					}
				default:
					if tch == pch {
						matched = true
					}
				}
				prevCh = pch
				pi++
				pch = byteAt(p, pi)
				if pch == ']' {
					break
				}
			}
			if matched == negated || (pathname && tch == '/') {
				return wmNoMatch
			}
		}
	}
	if ti < len(text) {
		return wmNoMatch
	}
	return wmMatch
}

// inClass reports whether c is in the named POSIX class, with git's
// ASCII-only ctype (its isspace is " \t\n\r", without \v and \f); ok is
// false for an unknown class name.
func inClass(class string, c byte) (in, ok bool) {
	upper := 'A' <= c && c <= 'Z'
	lower := 'a' <= c && c <= 'z'
	digit := '0' <= c && c <= '9'
	graph := 0x21 <= c && c <= 0x7e
	switch class {
	case "alnum":
		return upper || lower || digit, true
	case "alpha":
		return upper || lower, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 0x20 || c == 0x7f, true
	case "digit":
		return digit, true
	case "graph":
		return graph, true
	case "lower":
		return lower, true
	case "print":
		return 0x20 <= c && c <= 0x7e, true
	case "punct":
		return graph && !upper && !lower && !digit, true
	case "space":
		return c == ' ' || c == '\t' || c == '\n' || c == '\r', true
	case "upper":
		return upper, true
	case "xdigit":
		return digit || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F'), true
	}
	return false, false
}
