package allowlist

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/corral-sandbox/corral/internal/names"
)

const (
	// MaxPathBytes bounds a path as given (Linux PATH_MAX).
	MaxPathBytes = 4096
	// MaxComponentBytes bounds one component (Linux NAME_MAX).
	MaxComponentBytes = 255
)

// CleanPath canonicalizes an untrusted repository-relative path, component
// by component, without touching the file system: "." and empty components
// (repeated or trailing slashes) are dropped and ".." removes the previous
// component. The result is slash-separated with no ".", ".." or empty
// component; "." is the repository root.
//
// It fails closed, with a *Refusal of KindPath (Index -1), on: the empty
// path, absolute paths, "~" prefixes, URLs (any "scheme://" prefix), ".."
// that would leave the root, backslashes, NUL and other control
// characters, bidirectional and zero-width format characters, invalid
// UTF-8, and over-long paths or components. Nothing is decoded: "%2e%2e"
// is a literal name, and so is ".. " (a component with a trailing space).
//
// The same function serves Check and the host-side file tools, so both
// agree on what a path means.
func CleanPath(unsafePath string) (string, error) {
	return cleanPath(unsafePath, false)
}

// cleanOperand is CleanPath for a read-path operand of a command. To the
// tool such an operand is a file name, never a URL, so a URL-looking token
// ("http://x") is just a relative path and is canonicalized like any other
// ("http:/x"): the tool receives that spelling, which no program reads as
// a URL, and a path that does not exist is the tool's own "No such file".
// Everything else CleanPath refuses is refused. Option values, write paths
// and the host-side file tools keep refusing URLs (CleanPath).
func cleanOperand(unsafePath string) (string, error) {
	return cleanPath(unsafePath, true)
}

func cleanPath(unsafePath string, schemeIsPath bool) (string, error) {
	refuse := func(rule string) (string, error) {
		return "", &Refusal{Kind: KindPath, Index: -1, Token: clip(unsafePath), Rule: rule}
	}
	switch {
	case unsafePath == "":
		return refuse("empty path")
	case len(unsafePath) > MaxPathBytes:
		return refuse(fmt.Sprintf("path longer than %d bytes", MaxPathBytes))
	case !utf8.ValidString(unsafePath):
		return refuse("path is not valid UTF-8")
	}
	for _, r := range unsafePath {
		if rule := badRune(r); rule != "" {
			return refuse(rule)
		}
	}
	switch {
	case unsafePath[0] == '/':
		return refuse("absolute paths are not allowed; paths are relative to the repository root")
	case unsafePath[0] == '~':
		return refuse("home-directory paths (~) are not allowed")
	case !schemeIsPath && hasScheme(unsafePath):
		return refuse("URLs are not paths")
	}
	parts := make([]string, 0, strings.Count(unsafePath, "/")+1)
	for _, c := range strings.Split(unsafePath, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(parts) == 0 {
				return refuse("path leaves the repository (..)")
			}
			parts = parts[:len(parts)-1]
			continue
		}
		if len(c) > MaxComponentBytes {
			return refuse(fmt.Sprintf("path component longer than %d bytes", MaxComponentBytes))
		}
		parts = append(parts, c)
	}
	if len(parts) == 0 {
		return ".", nil
	}
	// Judge the canonical form too, so that CleanPath is idempotent:
	// "./~" must not become an accepted "~".
	if strings.HasPrefix(parts[0], "~") {
		return refuse("home-directory paths (~) are not allowed")
	}
	return strings.Join(parts, "/"), nil
}

// badRune names why r may not appear in a path, or returns "".
func badRune(r rune) string {
	switch {
	case r == 0:
		return "path contains NUL"
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return "path contains a control character"
	case r == '\\':
		return "path contains a backslash (separators are '/'; nothing is decoded)"
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
		r == 0x200e, r == 0x200f, r == 0x061c:
		return "path contains a bidirectional control character"
	case r >= 0x200b && r <= 0x200d, r == 0xfeff, r == 0x2060:
		return "path contains a zero-width character"
	case r == 0x2028, r == 0x2029:
		return "path contains a line or paragraph separator"
	case r == utf8.RuneError:
		return "path contains U+FFFD"
	}
	return ""
}

// hasScheme reports a "[a-z][a-z0-9+.-]*://" prefix, in any letter case.
func hasScheme(s string) bool {
	i := strings.Index(s, "://")
	if i < 1 {
		return false
	}
	for j := 0; j < i; j++ {
		c := s[j] | 0x20 // lower-case letters; digits and +.- are unchanged or fail below
		switch {
		case c >= 'a' && c <= 'z':
		case j > 0 && (s[j] >= '0' && s[j] <= '9' || s[j] == '+' || s[j] == '.' || s[j] == '-'):
		default:
			return false
		}
	}
	return true
}

// within reports whether canonical path p is dir or lies below it, by
// whole components ("openwiki-old" is not within "openwiki").
func within(p, dir string) bool {
	if dir == "." {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// CheckRead is the read-path policy of Check for one path, for the
// host-side file tools and the working directory of an invocation: the path
// is canonicalized, resolved in the view, and refused when either spelling
// is hidden or under .git. It returns the canonical path or a *Refusal of
// KindPath (Index -1).
func CheckRead(v View, unsafePath string) (string, error) {
	return pathChecker{v: v}.read(unsafePath)
}

// CheckWrite is the write-path policy of Check for one path: no component
// reserved by names.Reserved (.git, git~1, .claims, ignore files, git
// control files, in any spelling that folds onto them), CheckRead's
// checks, and both the lexical and the resolved path allowed by scope
// (Scope.CheckResolved). It returns the canonical path or a *Refusal of
// KindPath (Index -1).
func CheckWrite(v View, scope Scope, unsafePath string) (string, error) {
	if err := scope.Validate(); err != nil {
		return "", err
	}
	return pathChecker{v: v, scope: scope}.write(unsafePath)
}

// pathChecker applies the view and scope to path-typed values.
type pathChecker struct {
	v     View
	scope Scope
}

// resolve cleans p, resolves it in the view and checks both spellings
// against the hidden set. It returns the lexical and resolved paths.
func (pc pathChecker) resolve(unsafePath string) (string, string, error) {
	p, err := CleanPath(unsafePath)
	if err != nil {
		return "", "", err
	}
	return pc.resolveClean(unsafePath, p)
}

// resolveClean is resolve for p, the canonical spelling of unsafePath.
func (pc pathChecker) resolveClean(unsafePath, p string) (string, string, error) {
	if pc.v == nil {
		return "", "", &Refusal{Kind: KindPath, Index: -1, Token: clip(unsafePath), Rule: "no view to check paths against"}
	}
	r, err := pc.v.Resolve(p)
	if err != nil {
		var ref *Refusal
		if errors.As(err, &ref) {
			return "", "", err
		}
		return "", "", &Refusal{Kind: KindPath, Index: -1, Token: clip(unsafePath), Rule: "resolving " + p + ": " + err.Error()}
	}
	// The View contract says resolved paths are canonical; do not trust
	// a buggy one to be.
	if rr, err := CleanPath(r); err != nil || rr != r {
		return "", "", &Refusal{Kind: KindPath, Index: -1, Token: clip(unsafePath), Rule: "path resolves to a non-canonical location"}
	}
	for _, q := range []string{p, r} {
		// Hidden in every view whatever the profile (.git, folded).
		if rule, hidden := names.Hidden(q, false); hidden {
			return "", "", &Refusal{Kind: KindPath, Index: -1, Token: clip(unsafePath), Rule: rule}
		}
		if rule, hidden := pc.v.Hidden(q); hidden {
			if rule == "" {
				rule = "hidden"
			}
			return "", "", &Refusal{Kind: KindPath, Index: -1, Token: clip(unsafePath), Rule: rule}
		}
	}
	return p, r, nil
}

// read checks a read-path value and returns its canonical spelling.
func (pc pathChecker) read(unsafePath string) (string, error) {
	p, _, err := pc.resolve(unsafePath)
	return p, err
}

// readOperand is read for a read-path operand, canonicalized with
// cleanOperand (a URL-looking operand is a relative path).
func (pc pathChecker) readOperand(unsafePath string) (string, error) {
	p, err := cleanOperand(unsafePath)
	if err != nil {
		return "", err
	}
	p, _, err = pc.resolveClean(unsafePath, p)
	return p, err
}

// write checks a write-path value and returns its canonical spelling.
func (pc pathChecker) write(unsafePath string) (string, error) {
	refuse := func(rule string) (string, error) {
		return "", &Refusal{Kind: KindPath, Index: -1, Token: clip(unsafePath), Rule: rule}
	}
	p, err := CleanPath(unsafePath)
	if err != nil {
		return "", err
	}
	if rule := names.ReservedPath(p); rule != "" {
		return refuse(rule)
	}
	if !pc.scope.Writable() {
		return refuse(ruleReadOnly)
	}
	p, r, err := pc.resolve(unsafePath)
	if err != nil {
		return "", err
	}
	if rule := names.ReservedPath(r); rule != "" {
		return refuse(rule)
	}
	if err := pc.scope.CheckResolved(p, r); err != nil {
		return "", atToken(err, unsafePath)
	}
	return p, nil
}

// atToken gives a scope refusal the token as the caller spelled it.
func atToken(err error, unsafePath string) error {
	if r, ok := err.(*Refusal); ok {
		cp := *r
		cp.Token = clip(unsafePath)
		return &cp
	}
	return err
}

// clip bounds a token quoted in a refusal.
func clip(s string) string {
	const max = 256
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
