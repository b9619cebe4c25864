package hidden

import (
	"errors"
	"fmt"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"

	"github.com/corral-sandbox/corral/allowlist"
)

// hostileTree holds PATH-04 and IGN-08 and the other links Resolve must
// handle.
var hostileTree = tree{
	".openwikiignore":    "private/\n",
	"README.md":          "",
	".git/config":        "[core]",
	"openwiki/.claims/a": "",
	// PATH-04
	"docs/passwd": "-> /etc/passwd",
	"docs/up":     "-> ../../..",
	"docs/gitcfg": "-> ../.git/config",
	"docs/claim":  "-> ../openwiki/.claims/a",
	// IGN-08
	"private/key": "SECRET",
	"private/ln":  "-> ../README.md",
	"docs/p":      "-> ../private",
	"docs/k":      "-> ../private/key",
	// chains, loops, odd targets
	"a/l1":        "-> l2",
	"a/l2":        "-> ../b/l3",
	"b/l3":        "-> target",
	"b/target/f":  "",
	"loop/a":      "-> b",
	"loop/b":      "-> a",
	"self":        "-> self",
	"docs/root":   "-> ..",
	"docs/odd":    "-> .//..//./README.md",
	"docs/new":    "-> ../fresh/dir",
	"docs/m":      "-> missing/../../../x",
	"docs/via":    "-> ../private/../README.md",
	"docs/abs":    "-> /tmp",
	"docs/deep":   "-> ../a/l1/f",
	"docs/empty/": "",
}

func init() {
	// A chain of exactly 40 links, the kernel's limit, and one of 41.
	for i := range 40 {
		hostileTree[fmt.Sprintf("ch/l%d", i)] = fmt.Sprintf("-> l%d", i+1)
	}
	hostileTree["ch/l40"] = "end"
	hostileTree["ch/over"] = "-> l0"
}

func TestViewResolve(t *testing.T) {
	dir := t.TempDir()
	buildTree(t, dir, hostileTree, "")
	h, err := Compute(dir, Options{})
	require.NoError(t, err)
	v := NewView(dir, h)
	for _, tc := range []struct {
		path string
		want string // resolved path, or the refusal's rule after "refused: "
		// hidden is the rule Hidden gives for the resolved path.
		hidden string
	}{
		{".", ".", ""},
		{"README.md", "README.md", ""},
		// Links that leave the repository are hidden (absent in the
		// container): resolution stops there, and the policy refuses.
		{"docs/passwd", "docs/passwd", SymlinkRule},
		{"docs/up/home/user/.ssh/id_rsa", "docs/up/home/user/.ssh/id_rsa", SymlinkRule},
		{"docs/gitcfg", ".git/config", ".git is hidden at any depth"},
		{"docs/claim", "openwiki/.claims/a", "openwiki/.claims is owned by corral"},
		{"docs/k", "private/key", ".openwikiignore:1 hides private/"},
		{"docs/p", "private", ".openwikiignore:1 hides private/"},
		{"docs/p/key", "private/key", ".openwikiignore:1 hides private/"},
		// Hidden paths are absent in the container: links in them are
		// not followed.
		{"private/ln", "private/ln", ".openwikiignore:1 hides private/"},
		{"docs/via", "README.md", ""},
		{"a/l1", "b/target", ""},
		{"a/l1/f", "b/target/f", ""},
		{"docs/deep", "b/target/f", ""},
		{"loop/a", "refused: symlink loop/a: too many levels of symbolic links", ""},
		{"self/x", "refused: symlink self: too many levels of symbolic links", ""},
		{"docs/root", ".", ""},
		{"docs/root/README.md", "README.md", ""},
		{"docs/root/docs/root/docs/k", "private/key", ".openwikiignore:1 hides private/"},
		{"docs/odd", "README.md", ""},
		{"docs/new", "fresh/dir", ""},
		{"docs/new/x/y", "fresh/dir/x/y", ""},
		{"nope/x/y", "nope/x/y", ""},
		{"README.md/x", "README.md/x", ""},
		{"docs/m", "refused: symlink docs/m leaves the repository", ""},
		{"docs/abs/x", "docs/abs/x", SymlinkRule},
		{"docs/empty", "docs/empty", ""},
		{"ch/l0", "ch/l40", ""},
		{"ch/over", "refused: symlink ch/l39: too many levels of symbolic links", ""},
		{"../x", `refused: path "../x" is not canonical`, ""},
		{"/etc/passwd", `refused: path "/etc/passwd" is not canonical`, ""},
		{"a//b", `refused: path "a//b" is not canonical`, ""},
		{"a/./b", `refused: path "a/./b" is not canonical`, ""},
		{"docs/", `refused: path "docs/" is not canonical`, ""},
		{"", `refused: path "" is not canonical`, ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			got, err := v.Resolve(tc.path)
			if rule, ok := cutPrefix(tc.want, "refused: "); ok {
				var r *allowlist.Refusal
				require.True(t, errors.As(err, &r), "%v", err)
				require.Equal(t, allowlist.KindPath, r.Kind)
				require.Equal(t, -1, r.Index)
				require.Equal(t, rule, r.Rule)
				require.True(t, errdefs.IsPermissionDenied(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			rule, hidden := v.Hidden(got)
			require.Equal(t, tc.hidden, rule)
			require.Equal(t, tc.hidden != "", hidden)
		})
	}
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return s, false
}

func TestViewHidden(t *testing.T) {
	dir := t.TempDir()
	buildTree(t, dir, tree{
		".openwikiignore":     "secrets/\n*.key\nbuild/\n!build/keep\nout/*\n!out/keep/\n",
		"build/keep":          "",
		"out/keep/x":          "",
		"out/f":               "",
		"sub/.openwikiignore": "!a.key\n/local\n",
		"sub/a.key":           "",
		"file/":               "",
		"docs/p":              "-> ../secrets",
	}, "")
	h, err := Compute(dir, Options{})
	require.NoError(t, err)
	v := NewView(dir, h)
	for _, tc := range []struct{ path, rule string }{
		// Do not exist: answered from the rules; the last component
		// could become a directory.
		{"secrets", ".openwikiignore:1 hides secrets/"},
		{"secrets/x", ".openwikiignore:1 hides secrets/"},
		{"a/secrets/x/y", ".openwikiignore:1 hides a/secrets/"},
		{"new/a.key", ".openwikiignore:2 hides new/a.key"},
		{"sub/b.key", ".openwikiignore:2 hides sub/b.key"},
		{"sub/new/a.key", ""},
		{"sub/local", "sub/.openwikiignore:2 hides sub/local"},
		{"sub/x/local", ""},
		{"out/new", ".openwikiignore:5 hides out/new"},
		{"out/keep/y", ""},
		// Parent excluded, child excluded.
		{"build/keep", ".openwikiignore:3 hides build/"},
		{"build/new", ".openwikiignore:3 hides build/"},
		{"out/f", ".openwikiignore:5 hides out/f"},
		{"sub/a.key", ""},
		// An existing directory is judged as one; a symlink is not a
		// directory (docs/p -> ../secrets is visible, its target is not).
		{"file", ""},
		{"docs/p", ""},
		{"a.key/x", ".openwikiignore:2 hides a.key/"},
		{"x//y", `path "x//y" is not canonical`},
		{"/x", `path "/x" is not canonical`},
	} {
		rule, hidden := v.Hidden(tc.path)
		require.Equal(t, tc.rule, rule, tc.path)
		require.Equal(t, tc.rule != "", hidden, tc.path)
	}
	var _ allowlist.View = v
}
