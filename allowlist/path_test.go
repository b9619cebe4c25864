package allowlist

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
)

func TestCleanPath(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		rule     string // non-empty: refused, rule contains this
	}{
		{in: ".", want: "."},
		{in: "./", want: "."},
		{in: ".//./", want: "."},
		{in: "a", want: "a"},
		{in: "a/", want: "a"},
		{in: "a//b///c/", want: "a/b/c"},
		{in: "./a/./b/.", want: "a/b"},
		{in: "a/..", want: "."},
		{in: "a/b/../c", want: "a/c"},
		{in: "openwiki/pages/a.md/../b.md", want: "openwiki/pages/b.md"},
		{in: "-rf", want: "-rf"},
		{in: "--pre=sh", want: "--pre=sh"},
		{in: "...", want: "..."},
		{in: "..a/b..", want: "..a/b.."},
		{in: "a b/ c", want: "a b/ c"},
		{in: "openwiki/*", want: "openwiki/*"},
		{in: "README.md;", want: "README.md;"},
		{in: "$(id)", want: "$(id)"},
		{in: "café/naïve", want: "café/naïve"},
		{in: "a:b", want: "a:b"},
		{in: "file:x", want: "file:x"},
		{in: "a/http://x", want: "a/http:/x"},
		{in: "~a", rule: "home"},

		// PATH-02 spellings
		{in: "../../etc/passwd", rule: "leaves the repository"},
		{in: "openwiki/../.git/config", want: ".git/config"},
		{in: "openwiki/../x", want: "x"},
		{in: "openwiki/./../x", want: "x"},
		{in: "openwiki//..//x", want: "x"},
		{in: "openwiki/%2e%2e/x", want: "openwiki/%2e%2e/x"},
		{in: `openwiki\..\x`, rule: "backslash"},
		{in: "openwiki/.. /x", want: "openwiki/.. /x"},
		{in: "openwiki/ ../x", want: "openwiki/ ../x"},
		{in: "/repo/openwiki/../x", rule: "absolute"},
		{in: "~/x", rule: "home"},
		{in: "~", rule: "home"},
		{in: "openwiki/a/../../x", want: "x"},
		{in: "openwiki/../../x", rule: "leaves the repository"},
		{in: "..", rule: "leaves"},
		{in: "../", rule: "leaves"},
		{in: "a/../..", rule: "leaves"},
		{in: "a/../../a", rule: "leaves"},

		{in: "", rule: "empty"},
		{in: "/", rule: "absolute"},
		{in: "//x", rule: "absolute"},
		{in: "http://x", rule: "URL"},
		{in: "file:///etc/passwd", rule: "URL"},
		{in: "HTTPS://x", rule: "URL"},
		{in: "git+ssh://h/r", rule: "URL"},
		{in: "s3.x-y://b", rule: "URL"},
		{in: "a\x00b", rule: "NUL"},
		{in: "a\nb", rule: "control"},
		{in: "a\tb", rule: "control"},
		{in: "a\rb", rule: "control"},
		{in: "a\x1bb", rule: "control"},
		{in: "a\x7fb", rule: "control"},
		{in: "a\u0085b", rule: "control"},
		{in: "a\u202eb", rule: "bidirectional"},
		{in: "a\u2066b", rule: "bidirectional"},
		{in: "a\u2069b", rule: "bidirectional"},
		{in: "a\u200eb", rule: "bidirectional"},
		{in: "a\u200fb", rule: "bidirectional"},
		{in: "a\u061cb", rule: "bidirectional"},
		{in: "a\u200bb", rule: "zero-width"},
		{in: "a\u200db", rule: "zero-width"},
		{in: "\ufeffa", rule: "zero-width"},
		{in: "a\u2060b", rule: "zero-width"},
		{in: "a\u2028b", rule: "separator"},
		{in: "a\xffb", rule: "UTF-8"},
		{in: "a\xc0\xafb", rule: "UTF-8"},
		{in: "a\ufffdb", rule: "U+FFFD"},
		{in: strings.Repeat("a", 256), rule: "component"},
		{in: strings.Repeat("a/", 2049), rule: "longer than"},
	} {
		got, err := CleanPath(tc.in)
		if tc.rule != "" {
			require.Error(t, err, "%q", tc.in)
			var ref *Refusal
			require.True(t, errors.As(err, &ref))
			require.Equal(t, KindPath, ref.Kind)
			require.Equal(t, -1, ref.Index)
			require.Contains(t, ref.Rule, tc.rule, "%q", tc.in)
			require.True(t, errdefs.IsPermissionDenied(err))
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		require.Equal(t, tc.want, got, "%q", tc.in)
		again, err := CleanPath(got)
		require.NoError(t, err)
		require.Equal(t, got, again)
	}
}

func TestWithin(t *testing.T) {
	require.True(t, within("openwiki", "openwiki"))
	require.True(t, within("openwiki/a", "openwiki"))
	require.False(t, within("openwiki-old/a", "openwiki"))
	require.False(t, within("openwikiX", "openwiki"))
	require.False(t, within("open", "openwiki"))
	require.True(t, within("x", "."))
}

// FuzzCleanPath: never panics; an accepted path is canonical, idempotent,
// relative, free of refused characters, and never above the root.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{
		".", "a/b", "../../etc/passwd", "openwiki/../.git/config", "openwiki/../x", "openwiki/./../x",
		"openwiki//..//x", "openwiki/%2e%2e/x", `openwiki\..\x`, "openwiki/.. /x", "/repo/openwiki/../x",
		"~/x", "openwiki/a/../../x", "openwiki-old/x.md", "openwiki/pages/a.md/../b.md", "http://x",
		"a\u202eb", "a\x00", "a\xff", "docs/-rf", "docs/--pre=sh", "./", "a/./b/../../c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := CleanPath(in)
		if err != nil {
			var ref *Refusal
			if !errors.As(err, &ref) || ref.Kind != KindPath {
				t.Fatalf("CleanPath(%q) error is not a path refusal: %v", in, err)
			}
			return
		}
		again, err := CleanPath(out)
		if err != nil || again != out {
			t.Fatalf("CleanPath(%q) = %q, not idempotent: %q %v", in, out, again, err)
		}
		if out == "" || strings.HasPrefix(out, "/") || strings.HasSuffix(out, "/") || !utf8.ValidString(out) {
			t.Fatalf("CleanPath(%q) = %q is not canonical", in, out)
		}
		if out != "." {
			for _, c := range strings.Split(out, "/") {
				if c == "" || c == "." || c == ".." {
					t.Fatalf("CleanPath(%q) = %q has component %q", in, out, c)
				}
			}
		}
		if strings.ContainsAny(out, "\\\x00\n") || strings.HasPrefix(out, "~") || hasScheme(out) {
			t.Fatalf("CleanPath(%q) = %q holds a refused form", in, out)
		}
		if len(out) > len(in) {
			t.Fatalf("CleanPath(%q) = %q grew", in, out)
		}
	})
}

func TestCheckReadWrite(t *testing.T) {
	v := newFakeView()
	for _, tc := range []struct {
		op, in, want string
		scope        Scope
	}{
		{op: "read", in: "docs/readme", want: "docs/readme"},
		{op: "read", in: "docs/k"},
		{op: "read", in: "docs/passwd"},
		{op: "read", in: "openwiki/../.git/config"},
		{op: "read", in: "../../etc/passwd"},
		{op: "read", in: ".", want: "."},
		{op: "read", in: "http://x"}, // the file tools refuse URLs
		{op: "read", in: "file:///etc/passwd"},
		{op: "write", in: "http://x", scope: dirScope},
		{op: "write", in: "openwiki/x.md", want: "openwiki/x.md", scope: dirScope},
		{op: "write", in: "openwiki//a/./x.md/", want: "openwiki/a/x.md", scope: dirScope},
		{op: "write", in: "openwiki-old/x.md", scope: dirScope},
		{op: "write", in: "openwiki_evil/x.md", scope: dirScope},
		{op: "write", in: "openwiki/../openwikiX/x.md", scope: dirScope},
		{op: "write", in: "openwiki/assets/new.js", scope: dirScope},
		{op: "write", in: "openwiki/pages/x.md", scope: dirScope},
		{op: "write", in: "openwiki/.claims/a.lock", scope: dirScope},
		{op: "write", in: "openwiki/.Claims", scope: dirScope},
		{op: "write", in: ".vscode/settings.json", scope: dirScope},
		{op: "write", in: ".git/hooks/pre-commit", scope: dirScope},
		{op: "write", in: "openwiki/pages/a.md", want: "openwiki/pages/a.md", scope: pageScope},
		{op: "write", in: "openwiki/pages/a.md.bak", scope: pageScope},
		{op: "write", in: "openwiki/pages/a.mdx", scope: pageScope},
		{op: "write", in: "openwiki/pages/a.md/../b.md", scope: pageScope},
		{op: "write", in: "openwiki/inner/a.md", scope: pageScope},
		{op: "write", in: "openwiki/x.md", scope: roScope},
	} {
		var got string
		var err error
		if tc.op == "read" {
			got, err = CheckRead(v, tc.in)
		} else {
			got, err = CheckWrite(v, tc.scope, tc.in)
		}
		if tc.want == "" {
			var ref *Refusal
			require.True(t, errors.As(err, &ref), "%s %q: %v", tc.op, tc.in, err)
			require.Equal(t, KindPath, ref.Kind)
			continue
		}
		require.NoError(t, err, "%s %q", tc.op, tc.in)
		require.Equal(t, tc.want, got)
	}
	_, err := CheckWrite(v, Scope{Dir: "/openwiki"}, "openwiki/x")
	require.True(t, errdefs.IsInvalidArgument(err))
}
