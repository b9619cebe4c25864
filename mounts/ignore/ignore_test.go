package ignore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The port's conformance with git (check-ignore, ls-files, wildmatch
// pairs in the spirit of git's t3070) is tested end to end, as sessions
// judge paths, by the oracle tests of package mounts/hidden. These pin
// the port's own pieces.

func TestWildmatch(t *testing.T) {
	// Pinned cases where go-git's matcher differs from git.
	for _, tc := range []struct {
		pattern, text  string
		pathname, want bool
	}{
		{"[!a]", "b", false, true},
		{"[!a]", "a", false, false},
		{"[[:alpha:]]x", "ax", false, true},
		{"[]a]", "]", false, true},
		{"x**y", "xzzy", false, true},
		{"a/**/b/c", "a/b/x/b/c", true, true},
		{"abc/**", "abc", true, false},
		{"abc/**", "abc/d/e", true, true},
		{"**", "a/b", true, true},
		{"*", ".env", false, true},
		{"a/*", "a/b/c", true, false},
		{"a\\", "a", false, false},
	} {
		require.Equal(t, tc.want, wildmatch(tc.pattern, tc.text, tc.pathname), "%q ~ %q", tc.pattern, tc.text)
	}
}

func TestParseIgnore(t *testing.T) {
	f := Parse(".", ".openwikiignore", []byte("\xef\xbb\xbfa  \r\n#c\n\n!b/\n/c/d\\ \\ \ne\x00f\n  \n"))
	var got []string
	for _, p := range f.Patterns {
		got = append(got, fmt.Sprintf("%d %q neg=%t dir=%t base=%t glob=%q", p.Line, p.Text, p.negate, p.dirOnly, p.basename, p.glob))
	}
	require.Equal(t, []string{
		`1 "a" neg=false dir=false base=true glob="a"`,
		`4 "!b/" neg=true dir=true base=true glob="b"`,
		`5 "/c/d\\ \\ " neg=false dir=false base=false glob="c/d\\ \\ "`,
		`6 "e" neg=false dir=false base=true glob="e"`,
		`7 "" neg=false dir=false base=true glob=""`,
	}, got)
}

// TestWildmatchStarStarChainIsPolynomial: a repository chooses its own
// ignore files, and git's recursion is exponential in the number of "**/"
// of a pattern; unmemoized, these pairs ran for minutes and stalled every
// corral start on the repository (even SIGTERM waited for the scan).
func TestWildmatchStarStarChainIsPolynomial(t *testing.T) {
	pattern := strings.Repeat("**/", 20) + "c"
	text := strings.Repeat("aaaa/", 40) + "b"
	done := make(chan [2]bool, 1)
	go func() {
		done <- [2]bool{
			wildmatch(pattern, text, true),
			wildmatch(pattern, strings.Repeat("aaaa/", 40)+"c", true),
		}
	}()
	select {
	case got := <-done:
		require.Equal(t, [2]bool{false, true}, got)
	case <-time.After(5 * time.Second):
		t.Fatalf("wildmatch(%q, 40 directories) still running after 5s", pattern)
	}
}
