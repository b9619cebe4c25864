package hidden

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/corral-sandbox/corral/internal/rootfs"
	"github.com/stretchr/testify/require"
)

// TestGitignoreBesideOpenwikiignore: with the gitignore list, a path is
// hidden when either rule set hides it, and a negation in one set never
// re-includes what the other hides. Each set alone is checked against git
// by the oracle tests; here the combined walk must be exactly their union,
// on the fixed cases and on random trees whose ignore files are split
// between the two names.
func TestGitignoreBesideOpenwikiignore(t *testing.T) {
	trees := []tree{
		{
			".openwikiignore":     "*.log\n!keep.log\n",
			".gitignore":          "build/\nkeep.log\n!*.tmp\n",
			"keep.log":            "", // re-included by .openwikiignore, hidden by .gitignore
			"a.log":               "",
			"build/x":             "",
			"build/.gitignore/":   "",
			"x.tmp":               "",
			"sub/.gitignore":      "!a.log\n!/build\n",
			"sub/a.log":           "", // the .gitignore negation cannot re-include it
			"sub/build/y":         "",
			"sub/.openwikiignore": "y\n",
		},
		{
			".gitignore":        "d/\n",
			"d/.openwikiignore": "!x\n",
			"d/x":               "",
			"e/.openwikiignore": "*\n!.gitignore\n",
			"e/.gitignore":      "!*\n",
			"e/f":               "",
		},
	}
	for seed := uint64(0); seed < 60; seed++ {
		// The ignore files of a second random tree become .gitignore
		// files, in the directories the first one has.
		tr := randomTree(seed)
		dirs := map[string]bool{".": true}
		for p := range tr {
			for d := path.Dir(p); d != "."; d = path.Dir(d) {
				dirs[d] = true
			}
		}
		for p, c := range randomTree(seed + 1000) {
			if d := path.Dir(p); path.Base(p) == DefaultIgnoreFileName && dirs[d] {
				tr[path.Join(d, ".gitignore")] = c
			}
		}
		trees = append(trees, tr)
	}
	for i, tr := range trees {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			dir := t.TempDir()
			buildTree(t, dir, tr, "")
			both, err := Compute(dir, Options{Lists: []names.List{names.Gitignore}})
			require.NoError(t, err)
			requireMinimal(t, both)
			own, err := Compute(dir, Options{})
			require.NoError(t, err)
			git, err := Compute(dir, Options{IgnoreFileName: ".gitignore"})
			require.NoError(t, err)
			paths := listTree(t, dir)
			vb, vo, vg := NewView(dir, both), NewView(dir, own), NewView(dir, git)
			for _, p := range append(paths, ghostPaths(dir, paths)...) {
				rb, hb := vb.Hidden(p)
				ro, ho := vo.Hidden(p)
				rg, hg := vg.Hidden(p)
				require.Equal(t, ho || hg, hb, "%s: .openwikiignore %q, .gitignore %q, both %q; tree %q", p, ro, rg, rb, tr)
				if hb {
					require.Contains(t, []string{ro, rg}, rb, p)
				}
			}
		})
	}
}

// TestComputeHiddenEscapingSymlinks: a symlink whose target leaves the
// repository, as the kernel resolves it below the root (absolute, ".."
// above the root, through other links), is hidden; links that stay
// inside, dangle or loop are not.
func TestComputeHiddenEscapingSymlinks(t *testing.T) {
	dir := t.TempDir()
	buildTree(t, dir, tree{
		"README.md":    "",
		"x":            "-> /",
		"a/b/y":        "-> ../../..",
		"z":            "-> /proc/self",
		"a/up":         "-> ..",
		"a/in":         "-> ../README.md",
		"a/chain":      "-> b/y",
		"a/viaup":      "-> up/../..",
		"a/dangle":     "-> missing/../../../x",
		"a/loop":       "-> loop",
		"a/b/deep":     "-> ../../a/b/../../..",
		"a/b/rel":      "-> ../../README.md",
		"c/abs-inside": "-> " + filepath.Join(dir, "README.md"),
	}, "")
	h, err := Compute(dir, Options{})
	require.NoError(t, err)
	var got []string
	for _, hd := range h.Hides() {
		require.Equal(t, SymlinkRule, hd.Rule, hd.Path)
		require.False(t, hd.Dir)
		got = append(got, hd.Path)
	}
	require.Equal(t, []string{"a/b/deep", "a/b/y", "a/chain", "a/viaup", "c/abs-inside", "x", "z"}, got)
	v := NewView(dir, h)
	for p, want := range map[string]string{
		"x":            SymlinkRule,
		"x/etc/passwd": SymlinkRule,
		"a/b/y/etc":    SymlinkRule,
		"z/environ":    SymlinkRule,
		"a/in":         "",
		"a/up":         "",
		"a/b/rel":      "",
	} {
		rule, hidden := v.Hidden(p)
		require.Equal(t, want, rule, p)
		require.Equal(t, want != "", hidden, p)
	}
	r, err := v.Resolve("a/in")
	require.NoError(t, err)
	require.Equal(t, "README.md", r)
}

// TestComputeHiddenHardLinks: a visible regular file that shares its
// inode with a hidden file is hidden, naming it; links between visible
// files, and to files outside the repository, stay visible.
func TestComputeHiddenHardLinks(t *testing.T) {
	outside := t.TempDir()
	dir := t.TempDir()
	buildTree(t, dir, tree{
		".openwikiignore": "secrets/\n",
		"secrets/key.pem": "KEY",
		"deep/a/b/.env":   "TOKEN=1",
		"a.md":            "shared",
		"README.md":       "",
		"sub/AGENTS.md":   "steer",
	}, "")
	require.NoError(t, os.WriteFile(filepath.Join(outside, "f"), []byte("o"), 0o644))
	for old, new := range map[string]string{
		"secrets/key.pem": "notes.txt",
		"deep/a/b/.env":   "docs/env.txt",
		"a.md":            "b.md",
		"sub/AGENTS.md":   "sub/readme.txt",
		outside + "/f":    "from-outside.txt",
	} {
		if !filepath.IsAbs(old) {
			old = filepath.Join(dir, old)
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, new)), 0o755))
		require.NoError(t, os.Link(old, filepath.Join(dir, new)))
	}
	// A second link in the hidden tree, found first in path order.
	require.NoError(t, os.Link(filepath.Join(dir, "secrets/key.pem"), filepath.Join(dir, "secrets/a-copy.pem")))

	h, err := Compute(dir, Options{Lists: allLists})
	require.NoError(t, err)
	want := map[string]string{
		"notes.txt":      "hard link of hidden secrets/a-copy.pem",
		"docs/env.txt":   "hard link of hidden deep/a/b/.env",
		"sub/readme.txt": "hard link of hidden sub/AGENTS.md",
	}
	for p, rule := range want {
		hd, ok := h.Lookup(p)
		require.True(t, ok, p)
		require.Equal(t, Hide{Path: p, Rule: rule}, hd)
	}
	v := NewView(dir, h)
	for _, p := range []string{"a.md", "b.md", "from-outside.txt", "README.md"} {
		rule, hidden := v.Hidden(p)
		require.False(t, hidden, "%s: %s", p, rule)
	}
	// Without the lists, only the link of the ignored file is hidden.
	h, err = Compute(dir, Options{})
	require.NoError(t, err)
	var got []string
	for _, hd := range h.Hides() {
		if strings.HasPrefix(hd.Rule, "hard link") {
			got = append(got, hd.Path)
		}
	}
	require.Equal(t, []string{"notes.txt"}, got)
}

// TestRescanHardLinkCreatedLater: a hard link to a hidden file made after
// the session started is caught by a rescan (the repository watch of
// package sandbox rescans on every creation).
func TestRescanHardLinkCreatedLater(t *testing.T) {
	repo := t.TempDir()
	buildTree(t, repo, tree{".openwikiignore": "secrets/\n", "secrets/key.pem": "KEY", "src/a.go": ""}, "")
	h, err := Compute(repo, Options{})
	require.NoError(t, err)
	require.NoError(t, Rescan(repo, h))
	require.NoError(t, os.Link(filepath.Join(repo, "secrets/key.pem"), filepath.Join(repo, "src/notes.txt")))
	err = Rescan(repo, h)
	require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
	require.Contains(t, err.Error(), "src/notes.txt appeared after it started (hard link of hidden secrets/key.pem)")
}

// TestRescanEscapingSymlinkCreatedLater: the same for a link that leaves
// the repository.
func TestRescanEscapingSymlinkCreatedLater(t *testing.T) {
	repo := t.TempDir()
	buildTree(t, repo, tree{"src/a.go": ""}, "")
	h, err := Compute(repo, Options{})
	require.NoError(t, err)
	require.NoError(t, os.Symlink("../..", filepath.Join(repo, "src/up")))
	err = Rescan(repo, h)
	require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
	require.Contains(t, err.Error(), "src/up appeared after it started (symlink leaves the repository)")
}

// TestComputeHiddenSecretsAndGitignoreByDefault: with every list (what a
// profile hides unless it exposes one) and no .openwikiignore, env files,
// private keys, registry credentials and gitignored build outputs are
// hidden.
func TestComputeHiddenSecretsAndGitignoreByDefault(t *testing.T) {
	dir := t.TempDir()
	buildTree(t, dir, tree{
		".gitignore":      "build/\n*.o\n",
		".env":            "TOKEN=1",
		".env.example":    "TOKEN=",
		".ssh/id_rsa":     "KEY",
		".npmrc":          "//registry/:_authToken=x",
		"build/out.bin":   "",
		"src/a.o":         "",
		"src/a.c":         "",
		"README.md":       "",
		"web/.gitignore":  "dist\n",
		"web/dist/app.js": "",
	}, "")
	h, err := Compute(dir, Options{Lists: allLists})
	require.NoError(t, err)
	got := map[string]string{}
	for _, hd := range h.Hides() {
		got[hd.Path] = hd.Rule
	}
	require.Equal(t, map[string]string{
		".env":     "built-in secrets list: .env (environment files)",
		".ssh":     "built-in secrets list: .ssh/ (private keys)",
		".npmrc":   "built-in secrets list: .npmrc (registry credentials)",
		"build":    ".gitignore:1 hides build/",
		"src/a.o":  ".gitignore:2 hides src/a.o",
		"web/dist": "web/.gitignore:1 hides web/dist/",
	}, got)
	// Each list can be left out.
	for _, tc := range []struct {
		lists  []names.List
		absent []string
	}{
		{[]names.List{names.AgentConfig, names.Gitignore}, []string{".env", ".ssh", ".npmrc"}},
		{[]names.List{names.AgentConfig, names.Secrets}, []string{"build", "src/a.o", "web/dist"}},
	} {
		h, err := Compute(dir, Options{Lists: tc.lists})
		require.NoError(t, err)
		var paths []string
		for _, hd := range h.Hides() {
			paths = append(paths, hd.Path)
		}
		sort.Strings(paths)
		for _, p := range tc.absent {
			require.NotContains(t, paths, p, "lists %v", tc.lists)
		}
	}
}

// TestComputeParallelSameAsSequential: the walk split between walkers
// finds exactly what one walker finds.
func TestComputeParallelSameAsSequential(t *testing.T) {
	src := filepath.Join(runtime.GOROOT(), "src")
	dirs := []string{t.TempDir()}
	all := tree{}
	for seed := uint64(0); seed < 40; seed++ {
		for p, c := range randomTree(seed) {
			all[fmt.Sprintf("r%02d/%s", seed%7, p)+fmt.Sprint(seed/7)] = c
		}
	}
	all["r00/.env"] = "S"
	all["r01/x/.gitignore"] = "*\n"
	buildTree(t, dirs[0], all, "")
	require.NoError(t, os.Link(filepath.Join(dirs[0], "r00", ".env"), filepath.Join(dirs[0], "r01", "hard")))
	if _, err := os.Stat(src); err == nil {
		dirs = append(dirs, src)
	}
	for _, dir := range dirs {
		var want []Hide
		for _, n := range []int{1, 2, 3, 8} {
			h, err := newSet(Options{Lists: allLists})
			require.NoError(t, err)
			d, err := rootfs.OpenRoot(dir)
			require.NoError(t, err)
			require.NoError(t, h.walk(d, n))
			d.Close()
			if n == 1 {
				want = h.Hides()
				require.NotEmpty(t, want)
				continue
			}
			require.Equal(t, want, h.Hides(), "%s with %d walkers", dir, n)
		}
	}
}

func TestComparePaths(t *testing.T) {
	ordered := []string{"a", "a/b", "a/b/c", "a/x", "a b", "a-b", "a.b", "ab", "b"}
	for i, a := range ordered {
		for j, b := range ordered {
			require.Equal(t, cmpInt(i, j), ComparePaths(a, b), "%q %q", a, b)
		}
	}
	h := &Set{hides: []Hide{{Path: "a"}, {Path: "a/x", Rule: "r"}, {Path: "a-b"}}}
	e, ok := h.Lookup("a/x")
	require.True(t, ok)
	require.Equal(t, "r", e.Rule)
	_, ok = h.Lookup("a/b")
	require.False(t, ok)
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestComputeHiddenIgnoreFileRuleFirst: a path hidden both by the
// repository's IgnoreFileName file and by a built-in list is reported
// with the line its author wrote (what `corral check --explain` and a
// refusal name), the built-in list only where no such line hides it.
func TestComputeHiddenIgnoreFileRuleFirst(t *testing.T) {
	dir := t.TempDir()
	buildTree(t, dir, tree{
		".openwikiignore": ".env\nCLAUDE.md\n",
		".env":            "TOKEN=1",
		"CLAUDE.md":       "",
		"sub/.env":        "TOKEN=2",
		"sub/CLAUDE.md":   "",
		".npmrc":          "",
	}, "")
	h, err := Compute(dir, Options{Lists: allLists})
	require.NoError(t, err)
	got := map[string]string{}
	for _, hd := range h.Hides() {
		got[hd.Path] = hd.Rule
	}
	require.Equal(t, ".openwikiignore:1 hides .env", got[".env"])
	require.Equal(t, ".openwikiignore:2 hides CLAUDE.md", got["CLAUDE.md"])
	require.Equal(t, ".openwikiignore:1 hides sub/.env", got["sub/.env"])
	require.Equal(t, ".openwikiignore:2 hides sub/CLAUDE.md", got["sub/CLAUDE.md"])
	require.Equal(t, "built-in secrets list: .npmrc (registry credentials)", got[".npmrc"])
}
