package names

import (
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Fold returns the form under which corral compares one path component:
//
//  1. Unicode compatibility normalization (NFKC): full-width and other
//     compatibility forms become their plain letters ("．ｇｉｔ" is ".git");
//  2. full Unicode case folding ("ẞ" becomes "ss"), then NFKC again, as
//     Unicode's NFKC_Casefold does;
//  3. format characters (Cf: zero-width, bidirectional controls) and other
//     default-ignorable code points and variation selectors are dropped,
//     as HFS+ ignores them (git core.protectHFS);
//  4. an NTFS alternate-data-stream suffix is cut (".git::$INDEX_ALLOCATION"
//     is ".git"), and trailing dots and spaces are dropped, as NTFS does
//     (git core.protectNTFS treats ".git." and ".git " as ".git").
//
// Fold is for comparisons only; a folded name is never written anywhere.
// It may return "" (for "..." or " ").
func Fold(name string) string {
	if ascii(name) {
		return trimNTFS(strings.ToLower(name))
	}
	s := norm.NFKC.String(name)
	s = cases.Fold().String(s)
	s = norm.NFKC.String(s)
	s = strings.Map(func(r rune) rune {
		if ignorable(r) {
			return -1
		}
		return r
	}, s)
	return trimNTFS(s)
}

// ascii reports whether s holds only ASCII characters, for which folding
// is lower-casing.
func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// trimNTFS cuts a stream suffix and drops trailing dots and spaces.
func trimNTFS(s string) string {
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimRight(s, ". ")
}

// ignorable reports the characters a file system or a reader may not show
// and Fold drops.
func ignorable(r rune) bool {
	return unicode.Is(unicode.Cf, r) ||
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		unicode.Is(unicode.Variation_Selector, r)
}
