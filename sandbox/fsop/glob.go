package fsop

import (
	"path"
	"strings"

	"github.com/corral-sandbox/corral/internal/names"
)

// Glob syntax (the same on the host, which checks a glob, and in the
// container, which runs it): a relative, slash-separated pattern whose
// components are matched against one name each with path.Match ('*', '?',
// '[...]'), except a component that is exactly "**", which matches zero
// or more directories (at the end: everything below). A '*' matches a
// leading dot too. Symbolic links are matched but never followed.

// SplitGlob returns the components of pattern and how many of them, from
// the start, are literal (no '*', '?' or '['): the directory the walk
// starts in. It does not judge the pattern; see CheckGlobSyntax.
func SplitGlob(pattern string) (comps []string, literal int) {
	comps = strings.Split(pattern, "/")
	for literal < len(comps) && !hasMeta(comps[literal]) {
		literal++
	}
	return comps, literal
}

func hasMeta(c string) bool { return strings.ContainsAny(c, `*?[`) }

// CheckGlobSyntax reports why pattern is malformed, or "": it must be
// non-empty, at most MaxPatternBytes, with no empty, "." or ".."
// component, no leading '/' and no backslash (nothing is escaped), and
// every component a valid path.Match pattern.
func CheckGlobSyntax(pattern string) string {
	switch {
	case pattern == "":
		return "empty glob"
	case len(pattern) > MaxPatternBytes:
		return "glob longer than 4096 bytes"
	case strings.HasPrefix(pattern, "/"):
		return "absolute globs are not allowed; globs are relative to the repository root"
	case strings.ContainsAny(pattern, "\\\x00"):
		return "glob contains a backslash or NUL (nothing is escaped)"
	}
	for _, c := range strings.Split(pattern, "/") {
		switch c {
		case "", ".", "..":
			return "glob has an empty, '.' or '..' component"
		}
		if _, err := path.Match(c, ""); err != nil {
			return "malformed glob component " + c
		}
	}
	return ""
}

// RootWide reports whether pattern walks the whole tree without naming
// anything: it has a "**" component and, once bracket expressions are
// removed, no component holds a letter or a digit. Refused, for example:
// "**", "**/*", "*/**", "**/**", "**/*.*", "**/.*", "**/[a-z]*".
// Allowed: "**/*.md", "src/**", "docs/*", "*", "*.md".
func RootWide(pattern string) bool {
	comps := strings.Split(pattern, "/")
	deep := false
	for _, c := range comps {
		if c == "**" {
			deep = true
			continue
		}
		if hasWord(stripBrackets(c)) {
			return false
		}
	}
	return deep
}

func hasWord(s string) bool {
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r > 0x7f {
			return true
		}
	}
	return false
}

// stripBrackets removes the [...] expressions of a path.Match pattern.
func stripBrackets(c string) string {
	var b strings.Builder
	for i := 0; i < len(c); i++ {
		if c[i] != '[' {
			b.WriteByte(c[i])
			continue
		}
		j := i + 1
		if j < len(c) && c[j] == '^' {
			j++
		}
		if j < len(c) && c[j] == ']' {
			j++
		}
		for j < len(c) && c[j] != ']' {
			j++
		}
		i = j
	}
	return b.String()
}

// TargetsGit reports whether a component of pattern is aimed at ".git":
// a literal component that folds onto ".git" (names.Fold: ".GIT",
// ".git.", ".ｇｉｔ", ".git::$INDEX_ALLOCATION"), or a wildcard one that
// matches ".git" in some letter case but neither of the ordinary names
// "xgit" and "x.git", so it depends on the leading dot (".g*", ".*",
// ".[Gg]it"; not "*", "*.*", "?git"). Such globs are refused: .git is
// hidden at any depth.
func TargetsGit(pattern string) bool {
	for _, c := range strings.Split(pattern, "/") {
		if c == "**" {
			continue
		}
		if !hasMeta(c) {
			if names.Fold(c) == ".git" {
				return true
			}
			continue
		}
		// A wildcard component is tried as written and folded (".ｇ*").
		for _, c := range []string{c, names.Fold(c)} {
			if wildGit(c) {
				return true
			}
		}
	}
	return false
}

// wildGit reports whether the wildcard component c matches ".git" in some
// letter case and neither "xgit" nor "x.git".
func wildGit(c string) bool {
	if m, _ := path.Match(c, "xgit"); m {
		return false
	}
	if m, _ := path.Match(c, "x.git"); m {
		return false
	}
	for _, g := range gitSpellings {
		if m, _ := path.Match(c, g); m {
			return true
		}
	}
	return false
}

var gitSpellings = func() []string {
	var out []string
	for i := 0; i < 8; i++ {
		b := []byte(".git")
		for k := 0; k < 3; k++ {
			if i&(1<<k) != 0 {
				b[k+1] -= 'a' - 'A'
			}
		}
		out = append(out, string(b))
	}
	return out
}()
