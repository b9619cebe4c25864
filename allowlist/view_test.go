package allowlist

import (
	"os"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeView is a repository described by its symlinks and hide rules.
type fakeView struct {
	links  map[string]string // link path -> target as stored in the link
	hidden map[string]string // path -> rule that hides it and everything below
}

func newFakeView() *fakeView {
	return &fakeView{
		links: map[string]string{
			"docs/passwd":         "/etc/passwd",
			"docs/up":             "../../..",
			"docs/gitcfg":         "../.git/config",
			"docs/claim":          "../openwiki/.claims/a",
			"docs/p":              "../private",
			"docs/k":              "../private/key",
			"docs/readme":         "../README.md",
			"openwiki/assets":     "../src",
			"openwiki/pages/x.md": "../../README.md",
			"openwiki/inner":      "pages",
			"loop/a":              "b",
			"loop/b":              "a",
		},
		hidden: map[string]string{
			".env":             ".openwikiignore:1 hides .env",
			"secrets":          ".openwikiignore:2 hides secrets/",
			"private":          ".openwikiignore:3 hides private/",
			"openwiki/.claims": "openwiki/.claims is owned by corral",
		},
	}
}

func (f *fakeView) Resolve(p string) (string, error) {
	refuse := func(rule string) (string, error) {
		return "", &Refusal{Kind: KindPath, Index: -1, Token: p, Rule: rule}
	}
	todo := strings.Split(p, "/")
	if p == "." {
		todo = nil
	}
	var done []string
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return refuse(p + " resolves outside the repository")
			}
			done = done[:len(done)-1]
			continue
		}
		done = append(done, c)
		target, ok := f.links[strings.Join(done, "/")]
		if !ok {
			continue
		}
		if hops++; hops > 40 {
			return refuse(p + ": too many levels of symbolic links")
		}
		if strings.HasPrefix(target, "/") {
			return refuse(p + " resolves outside the repository (link to " + target + ")")
		}
		done = done[:len(done)-1]
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return strings.Join(done, "/"), nil
}

func (f *fakeView) Hidden(p string) (string, bool) {
	for q := p; q != "." && q != "/" && q != ""; q = path.Dir(q) {
		if rule, ok := f.hidden[q]; ok {
			return rule, true
		}
		if path.Base(q) == ".git" {
			return ".git is hidden at every depth", true
		}
	}
	return "", false
}

var (
	dirScope  = Scope{Dir: "openwiki"}
	pageScope = Scope{Page: "openwiki/pages/a.md"}
	roScope   = Scope{ReadOnly: true}
)

// catalogs loads the shipped grammars: all of them, and the default set
// without git (which only an opt-in profile offers).
func catalogs(tb testing.TB) (withGit, def map[string]*Command) {
	tb.Helper()
	data, err := os.ReadFile("../profiles/builtin/tools.yaml")
	require.NoError(tb, err)
	all, err := ParseCatalog(data)
	require.NoError(tb, err)
	def = map[string]*Command{}
	for k, v := range all {
		if k != "git" {
			def[k] = v
		}
	}
	return all, def
}

func TestFakeView(t *testing.T) {
	v := newFakeView()
	for _, tc := range []struct {
		in, want string
		fail     bool
	}{
		{in: "README.md", want: "README.md"},
		{in: "docs/readme", want: "README.md"},
		{in: "openwiki/assets/new.js", want: "src/new.js"},
		{in: "openwiki/inner/a.md", want: "openwiki/pages/a.md"},
		{in: "docs/gitcfg", want: ".git/config"},
		{in: "docs/passwd", fail: true},
		{in: "docs/up/home", fail: true},
		{in: "loop/a", fail: true},
	} {
		got, err := v.Resolve(tc.in)
		if tc.fail {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}
