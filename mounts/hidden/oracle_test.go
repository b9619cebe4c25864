package hidden

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/internal/names"
	"github.com/stretchr/testify/require"
)

// tree is a repository described declaratively: path → content. A value
// "-> target" makes a symlink, a path ending in "/" an empty directory;
// parents are created as needed. The basename ".openwikiignore" is
// written as the ignoreName given to buildTree (when not empty).
type tree map[string]string

func buildTree(t testing.TB, root string, tr tree, ignoreName string) {
	t.Helper()
	paths := make([]string, 0, len(tr))
	for p := range tr {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		content := tr[p]
		name := p
		if path.Base(p) == DefaultIgnoreFileName && ignoreName != "" {
			name = path.Join(path.Dir(p), ignoreName)
		}
		full := filepath.Join(root, filepath.FromSlash(name))
		if strings.HasSuffix(p, "/") {
			require.NoError(t, os.MkdirAll(full, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			require.NoError(t, os.Symlink(target, full))
			continue
		}
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
}

// listTree returns every path below root (canonical, not following
// symlinks), without .git, sorted.
func listTree(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	require.NoError(t, err)
	return out
}

// gitOracle is an empty git directory that git is pointed at with
// --work-tree, so that the trees under test hold no .git of their own,
// run with no system or global configuration.
type gitOracle struct{ gitDir, home string }

func newGitOracle(t testing.TB) *gitOracle {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	d := t.TempDir()
	g := &gitOracle{gitDir: filepath.Join(d, "git"), home: filepath.Join(d, "home")}
	require.NoError(t, os.Mkdir(g.home, 0o755))
	g.run(t, d, nil, "init", "-q", "--bare", g.gitDir)
	return g
}

func (g *gitOracle) command(workTree string, args ...string) *exec.Cmd {
	full := args
	if args[0] != "init" {
		full = append([]string{"--git-dir=" + g.gitDir, "--work-tree=" + workTree,
			"-c", "core.bare=false", "-c", "core.ignoreCase=false"}, args...)
	}
	cmd := exec.Command("git", full...)
	cmd.Dir = workTree
	cmd.Env = []string{
		"HOME=" + g.home, "XDG_CONFIG_HOME=" + g.home, "PATH=" + os.Getenv("PATH"),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C",
	}
	return cmd
}

func (g *gitOracle) run(t testing.TB, workTree string, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := g.command(workTree, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if args[0] == "check-ignore" && errors.As(err, &exit) && exit.ExitCode() == 1 {
		err = nil // nothing ignored
	}
	require.NoError(t, err, "git %v: %s", args, stderr.String())
	return out
}

// checkIgnore asks `git check-ignore --no-index -v -n` about paths and
// returns "source:line" of the deciding pattern of each ignored one. The
// work tree's ignore files must be named .gitignore.
func (g *gitOracle) checkIgnore(t testing.TB, workTree string, paths []string) map[string]string {
	t.Helper()
	var in bytes.Buffer
	for _, p := range paths {
		in.WriteString(p)
		in.WriteByte(0)
	}
	out := g.run(t, workTree, in.Bytes(), "check-ignore", "--no-index", "-v", "-n", "-z", "--stdin")
	fields := strings.Split(string(out), "\x00")
	require.Equal(t, "", fields[len(fields)-1])
	fields = fields[:len(fields)-1]
	require.Zero(t, len(fields)%4, "check-ignore output %q", out)
	res := map[string]string{}
	for i := 0; i < len(fields); i += 4 {
		source, line, pat, p := fields[i], fields[i+1], fields[i+2], fields[i+3]
		if pat == "" || strings.HasPrefix(pat, "!") {
			continue
		}
		res[p] = source + ":" + line
	}
	return res
}

// lsIgnored returns what `git ls-files --others --ignored
// --exclude-per-directory=ignoreName` lists: every ignored file, those
// below ignored directories included, sorted.
func (g *gitOracle) lsIgnored(t testing.TB, workTree, ignoreName string) []string {
	t.Helper()
	out := g.run(t, workTree, nil, "ls-files", "-z", "--others", "--ignored", "--exclude-per-directory="+ignoreName)
	res := []string{}
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			res = append(res, p)
		}
	}
	sort.Strings(res)
	return res
}

// sourceLine cuts ".openwikiignore:3 hides x" to ".openwikiignore:3".
func sourceLine(rule string) string {
	s, _, _ := strings.Cut(rule, " hides ")
	return s
}

// requireSameAsGit requires that oracleDiff finds nothing.
func requireSameAsGit(t *testing.T, g *gitOracle, tr tree) {
	t.Helper()
	require.Empty(t, oracleDiff(t, g, tr), "tree %q", tr)
}

// oracleDiff builds tr, its ignore files named .gitignore, and lists
// every path that is not hidden exactly when git ignores it: against
// check-ignore, by the same file and line, both from the walk's hidden
// set and from the rules alone (as for paths that do not exist), and
// against ls-files for files.
func oracleDiff(t *testing.T, g *gitOracle, tr tree) []string {
	t.Helper()
	var diff []string
	dir := t.TempDir()
	buildTree(t, dir, tr, ".gitignore")
	paths := listTree(t, dir)
	ghosts := ghostPaths(dir, paths)
	want := g.checkIgnore(t, dir, append(paths, ghosts...))
	lsIgnored := g.lsIgnored(t, dir, ".gitignore")
	// The same files read as the per-directory ignore file, and as the
	// repository's .gitignore files beside it (the gitignore list).
	for _, opts := range []Options{{IgnoreFileName: ".gitignore"}, {Lists: []names.List{names.Gitignore}}} {
		for _, d := range oracleDiffOpts(t, dir, opts, paths, ghosts, want, lsIgnored) {
			diff = append(diff, fmt.Sprintf("%s (ignore file %q, lists %v)", d, opts.IgnoreFileName, opts.Lists))
		}
	}
	sort.Strings(diff)
	return diff
}

// oracleDiffOpts is oracleDiff for one Options over the built tree at dir.
func oracleDiffOpts(t *testing.T, dir string, opts Options, paths, ghosts []string, want map[string]string, lsIgnored []string) []string {
	t.Helper()
	var diff []string
	h, err := Compute(dir, opts)
	require.NoError(t, err)
	requireMinimal(t, h)

	// Paths that do not exist: git judges the last component as a file,
	// corral as a file and then as a directory (it may be created as
	// one), so corral may hide more, but only by a directory rule.
	v := NewView(dir, h)
	for _, p := range ghosts {
		rule, hidden := v.Hidden(p)
		switch {
		case want[p] != "" && sourceLine(rule) != want[p]:
			diff = append(diff, fmt.Sprintf("%q (absent): check-ignore %q, corral %q", p, want[p], rule))
		case want[p] == "" && hidden && !strings.HasSuffix(rule, " hides "+p+"/"):
			diff = append(diff, fmt.Sprintf("%q (absent): check-ignore visible, corral %q", p, rule))
		}
	}

	rulesOnly := *h
	rulesOnly.hides = nil
	for i, v := range []*View{NewView(dir, h), NewView(dir, &rulesOnly)} {
		for _, p := range paths {
			rule, hidden := v.Hidden(p)
			if got := sourceLine(rule); got != want[p] || hidden != (want[p] != "") {
				diff = append(diff, fmt.Sprintf("%q: check-ignore %q, corral %q (view %d)", p, want[p], rule, i))
			}
		}
	}

	got := map[string]bool{}
	for _, p := range paths {
		if fi, err := os.Lstat(filepath.Join(dir, p)); err == nil && !fi.IsDir() {
			if _, hidden := v.Hidden(p); hidden {
				got[p] = true
			}
		}
	}
	for _, p := range lsIgnored {
		if !got[p] {
			diff = append(diff, fmt.Sprintf("%q: ls-files ignored, corral visible", p))
		}
		delete(got, p)
	}
	for p := range got {
		diff = append(diff, fmt.Sprintf("%q: ls-files visible, corral hidden", p))
	}
	sort.Strings(diff)
	return diff
}

// ghostPaths returns paths that do not exist below the real directories
// of a tree (git refuses paths beyond a symlink).
func ghostPaths(dir string, paths []string) []string {
	exists := map[string]bool{}
	dirs := []string{"."}
	for _, p := range paths {
		exists[p] = true
		if fi, err := os.Lstat(filepath.Join(dir, p)); err == nil && fi.IsDir() {
			dirs = append(dirs, p)
		}
	}
	var out []string
	for _, d := range dirs {
	names:
		for _, n := range []string{"a", "b", "ab", "c.txt", ".env", "sub", "d", "A", "t ", "zz/a", "zz/c.txt", "d/a", "sub/x y", "a/b/c"} {
			p := join(d, n)
			if exists[p] {
				continue
			}
			for q := path.Dir(p); q != "."; q = path.Dir(q) {
				if exists[q] {
					if fi, err := os.Lstat(filepath.Join(dir, q)); err != nil || !fi.IsDir() {
						continue names
					}
				}
			}
			out = append(out, p)
		}
	}
	return out
}

// requireMinimal checks that no hidden path lies below another.
func requireMinimal(t *testing.T, h *Set) {
	t.Helper()
	for _, p := range h.Paths() {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			_, ok := h.Lookup(d)
			require.False(t, ok, "%s is hidden below hidden %s", p, d)
		}
	}
}

// ignoreCases are the fixed tricky cases of the oracle test.
var ignoreCases = []struct {
	name string
	tree tree
	// hidden, when set, pins the expected outcome for the paths listed
	// in it (true: hidden), in addition to the oracle.
	hidden map[string]bool
}{
	{"IGN-01 negation under an excluded directory", tree{
		".openwikiignore": "d/\n!d/sub/*\nfoo\n!foo/bar\n",
		"d/sub/f.txt":     "SECRET",
		"foo/bar/x":       "SECRET",
	}, map[string]bool{"d/sub/f.txt": true, "foo/bar/x": true}},
	{"IGN-02 trailing whitespace", tree{
		".openwikiignore": "secrets/   \n.env \n",
		"secrets/k":       "SECRET",
		".env":            "SECRET",
	}, map[string]bool{"secrets/k": true, ".env": true}},
	{"IGN-05 glob semantics", tree{
		".openwikiignore":       "*.env\nconfig/secret.yml\na/**/b\n",
		".env":                  "S",
		"x/.env":                "S",
		"config/secret.yml":     "S",
		"sub/config/secret.yml": "visible",
		"a/b":                   "S",
		"a/x/y/b":               "S",
	}, map[string]bool{".env": true, "x/.env": true, "config/secret.yml": true,
		"sub/config/secret.yml": false, "a/b": true, "a/x/y/b": true}},
	{"IGN-07 nested negation relaxes a parent rule", tree{
		".openwikiignore":     "secret.txt\n",
		"sub/.openwikiignore": "!secret.txt\n",
		"sub/secret.txt":      "S",
		"secret.txt":          "S",
		"other/secret.txt":    "S",
	}, map[string]bool{"sub/secret.txt": false, "secret.txt": true, "other/secret.txt": true}},
	{"directory-only patterns", tree{
		".openwikiignore": "d/\nl/\n",
		"x/d":             "a file named d",
		"y/d/f":           "in a dir named d",
		"l":               "-> y",
		"m/l":             "-> ../y/d",
	}, map[string]bool{"x/d": false, "y/d": true, "l": false, "m/l": false}},
	{"double star forms", tree{
		".openwikiignore": "**/foo\nbar/**\n!bar/keep\na/**/b/c\nx**y\n/**/top\n",
		"foo":             "",
		"p/q/foo/r":       "",
		"bar/x":           "",
		"bar/keep":        "",
		"bar/y/z":         "",
		"a/b/x/b/c":       "",
		"a/b/c":           "",
		"xzzy":            "",
		"q/xay":           "",
		"x/y":             "",
		"top":             "",
		"m/n/top":         "",
	}, map[string]bool{"bar": false, "bar/keep": false, "bar/x": true, "a/b/x/b/c": true, "xzzy": true, "q/xay": true}},
	{"bare double star", tree{
		".openwikiignore": "**\n!keep\n",
		"a":               "",
		"keep":            "",
		"d/keep":          "",
	}, nil},
	{"double star then slash", tree{
		".openwikiignore": "**/\n!x\n",
		"a/b":             "",
		"f":               "",
	}, nil},
	{"anchoring", tree{
		".openwikiignore": "/a\nb/c\n/d/\ne/f/\nsub/\n",
		"a":               "",
		"x/a":             "",
		"b/c":             "",
		"x/b/c":           "",
		"d/f":             "",
		"x/d/f":           "",
		"e/f/g":           "",
		"x/e/f/g":         "",
		"p/sub/q":         "",
	}, map[string]bool{"a": true, "x/a": false, "b/c": true, "x/b/c": false}},
	{"star matches a leading dot", tree{
		".openwikiignore": "*\n!*/\n!*.md\n",
		".hidden":         "",
		"d/.env":          "",
		"d/readme.md":     "",
		".d/x.md":         "",
	}, map[string]bool{".hidden": true, "d/.env": true, "d/readme.md": false}},
	{"escapes", tree{
		".openwikiignore": "\\#h\n\\!n\nsp\\ \nsp2\\ \\ \ntrail\\\n\\*lit\nq\\?\n",
		"#h":              "",
		"!n":              "",
		"sp ":             "",
		"sp":              "",
		"sp2  ":           "",
		"trail\\":         "",
		"trail":           "",
		"*lit":            "",
		"xlit":            "",
		"q?":              "",
		"qa":              "",
	}, map[string]bool{"#h": true, "!n": true, "sp ": true, "sp": false, "*lit": true, "xlit": false}},
	{"trailing spaces and tabs", tree{
		".openwikiignore": "a  \nb\\  \nc \\ \nt\t\nu\\\t  \n",
		"a":               "",
		"b ":              "",
		"b":               "",
		"c  ":             "",
		"t\t":             "",
		"t":               "",
		"u\t":             "",
	}, nil},
	{"CRLF, comments and blank lines", tree{
		".openwikiignore": "#c\r\n\r\na\r\n #b\r\n\\#c\r\n   \r\n!\r\n/\r\nlast\r",
		"a":               "",
		"#c":              "",
		" #b":             "",
		"c":               "",
		"last":            "",
		"last\r":          "",
	}, map[string]bool{"a": true, " #b": true, "#c": true, "last": true}},
	{"byte order mark", tree{
		".openwikiignore": "\xef\xbb\xbfbom\nx\n",
		"bom":             "",
		"x":               "",
	}, map[string]bool{"bom": true}},
	{"brackets", tree{
		".openwikiignore": "[ab]1\n[!a]2\n[^a]3\n[]x]4\n[a-c]5\n[[:digit:]]6\n[[:alpha:]7\n[a-]8\n[\\]]9\n[[:nope:]]0\n[z-a]q\n",
		"a1":              "", "c1": "",
		"a2": "", "b2": "",
		"a3": "", "b3": "",
		"]4": "", "x4": "", "y4": "",
		"b5": "", "d5": "",
		"76": "", "a6": "",
		"[7": "", "a7": "", ":7": "",
		"-8": "", "a8": "", "b8": "",
		"]9": "",
		"a0": "",
		"zq": "", "aq": "",
	}, nil},
	{"nested files", tree{
		".openwikiignore":      "*.log\n!keep.log\n",
		"a/.openwikiignore":    "/x\ny/z\n!*.log\nkeep.log\n",
		"a/b/.openwikiignore":  "!/x\n",
		"a/x":                  "",
		"a/b/x":                "",
		"a/y/z":                "",
		"a/b/y/z":              "",
		"a/f.log":              "",
		"a/keep.log":           "",
		"f.log":                "",
		"keep.log":             "",
		"c/x":                  "",
		"c/.openwikiignore":    "../*\n",
		"c/d/.openwikiignore":  "*\n!e\n",
		"c/d/e":                "",
		"c/d/f":                "",
		"c/d/.openwikiignorex": "",
	}, map[string]bool{"a/x": true, "a/b/x": false, "a/f.log": false, "a/keep.log": true, "keep.log": false}},
	{"excluded directory hides its ignore file", tree{
		".openwikiignore":   "d/\n",
		"d/.openwikiignore": "!x\n",
		"d/x":               "",
	}, map[string]bool{"d/x": true}},
	{"ignore file ignoring itself", tree{
		".openwikiignore":     ".openwikiignore\nsecret\n",
		"sub/.openwikiignore": "x\n",
		"sub/x":               "",
		"secret":              "",
	}, map[string]bool{"secret": true, "sub/x": true}},
	{"last match wins", tree{
		".openwikiignore": "*.txt\n!a*.txt\nab*\n",
		"a.txt":           "",
		"ab.txt":          "",
		"b.txt":           "",
		"abc":             "",
	}, map[string]bool{"a.txt": false, "ab.txt": true, "b.txt": true}},
	{"basename pattern at any depth", tree{
		".openwikiignore": "b\nc/\n",
		"a/b/c/d.txt":     "",
		"x/c/y":           "",
		"c":               "",
	}, nil},
	{"star slash", tree{
		".openwikiignore": "*/\n!a/\n*/x\n",
		"a/x":             "",
		"a/y":             "",
		"b/y":             "",
		"f":               "",
	}, nil},
	{"symlinked and odd ignore files", tree{
		".openwikiignore":      "-> real",
		"real":                 "real\n",
		"sub/.openwikiignore/": "",
		"sub/x":                "",
	}, map[string]bool{"real": false}},
	{"slash and wildcards in the middle", tree{
		".openwikiignore": "a/*/c\nd/?/f\ng/[hi]/j\nk*/l\n",
		"a/b/c":           "",
		"a/b/x/c":         "",
		"d/e/f":           "",
		"d/ee/f":          "",
		"g/h/j":           "",
		"g/k/j":           "",
		"kk/l":            "",
		"z/k/l":           "",
	}, nil},
	{"names with spaces and specials", tree{
		".openwikiignore": "a b\n*[[]*\n",
		"a b":             "",
		"x/a b/c":         "",
		"p[q]":            "",
	}, nil},
}

func TestIgnoreMatchesGit(t *testing.T) {
	g := newGitOracle(t)
	for _, tc := range ignoreCases {
		t.Run(tc.name, func(t *testing.T) {
			requireSameAsGit(t, g, tc.tree)
			if tc.hidden == nil {
				return
			}
			dir := t.TempDir()
			buildTree(t, dir, tc.tree, "")
			h, err := Compute(dir, Options{})
			require.NoError(t, err)
			v := NewView(dir, h)
			for p, want := range tc.hidden {
				_, hidden := v.Hidden(p)
				require.Equal(t, want, hidden, "Hidden(%q)", p)
			}
		})
	}
}

func TestIgnoreRuleNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	buildTree(t, dir, tree{
		".openwikiignore":     "# secrets\n\nsecrets/\n",
		"secrets/k":           "",
		"sub/.openwikiignore": "x\n",
		"sub/x":               "",
		"sub/y/x/z":           "",
	}, "")
	h, err := Compute(dir, Options{})
	require.NoError(t, err)
	require.Equal(t, []Hide{
		{Path: "secrets", Rule: ".openwikiignore:3 hides secrets/", Dir: true},
		{Path: "sub/x", Rule: "sub/.openwikiignore:1 hides sub/x"},
		{Path: "sub/y/x", Rule: "sub/.openwikiignore:1 hides sub/y/x/", Dir: true},
	}, h.Hides())
	v := NewView(dir, h)
	for p, want := range map[string]string{
		"secrets":       ".openwikiignore:3 hides secrets/",
		"secrets/k":     ".openwikiignore:3 hides secrets/",
		"secrets/new/f": ".openwikiignore:3 hides secrets/",
		"sub/y/x/z":     "sub/.openwikiignore:1 hides sub/y/x/",
		"sub/new/x":     "sub/.openwikiignore:1 hides sub/new/x",
	} {
		rule, hidden := v.Hidden(p)
		require.True(t, hidden, p)
		require.Equal(t, want, rule, p)
	}
}

// wildmatchPairs are pattern/path pairs in the spirit of git's
// t3070-wildmatch; the oracle decides each one.
var wildmatchPairs = [][2]string{
	{"foo", "foo"}, {"bar", "foo"}, {"???", "foo"}, {"??", "foo"}, {"*", "foo"},
	{"f*", "foo"}, {"*f", "foo"}, {"*foo*", "foo"}, {"*ob*a*r*", "foobar"},
	{"*ab", "aaaaaaabababab"}, {"foo\\*", "foo*"}, {"foo\\*bar", "foobar"},
	{"f\\\\oo", "f\\oo"}, {"*[al]?", "ball"}, {"[ten]", "ten"}, {"**[!te]", "ten"},
	{"**[!ten]", "ten"}, {"t[a-g]n", "ten"}, {"t[!a-g]n", "ten"}, {"t[!a-g]n", "ton"},
	{"t[^a-g]n", "ton"}, {"a[]]b", "a]b"}, {"a[]-]b", "a-b"}, {"a[]-]b", "a]b"},
	{"a[]-]b", "aab"}, {"a[]a-]b", "aab"}, {"]", "]"}, {"foo*bar", "foo/baz/bar"},
	{"foo**bar", "foo/baz/bar"}, {"foo**bar", "foobazbar"}, {"foo/**/bar", "foo/baz/bar"},
	{"foo/**/**/bar", "foo/baz/bar"}, {"foo/**/bar", "foo/b/a/z/bar"},
	{"foo/**/bar", "foo/bar"}, {"foo/**/**/bar", "foo/bar"}, {"foo?bar", "foo/bar"},
	{"foo[/]bar", "foo/bar"}, {"foo[^a-z]bar", "foo/bar"}, {"f[^eiu][^eiu][^eiu][^eiu][^eiu]r", "foo-bar"},
	{"**/foo", "foo"}, {"**/foo", "XXX/foo"}, {"**/foo", "bar/baz/foo"}, {"*/foo", "bar/baz/foo"},
	{"**/bar*", "foo/bar/baz"}, {"**/bar/*", "deep/foo/bar/baz"}, {"**/bar/*", "deep/foo/bar/baz/"},
	{"**/bar/**", "deep/foo/bar/baz/"}, {"**/bar/*", "deep/foo/bar"}, {"**/bar/**", "deep/foo/bar/"},
	{"**/bar**", "foo/bar/baz"}, {"*/bar/**", "foo/bar/baz/x"}, {"*/bar/**", "deep/foo/bar/baz/x"},
	{"**/bar/*/*", "deep/foo/bar/baz/x"}, {"a[c-c]st", "acrt"}, {"a[c-c]rt", "acrt"},
	{"[!]-]", "]"}, {"[!]-]", "a"}, {"\\", ""}, {"\\", "\\"}, {"*/\\", "XXX/\\"},
	{"*/\\\\", "XXX/\\"}, {"foo", "foo"}, {"@foo", "@foo"}, {"@foo", "foo"}, {"\\[ab]", "[ab]"},
	{"[[]ab]", "[ab]"}, {"[[:]ab]", "[ab]"}, {"[[::]ab]", "[ab]"}, {"[[:digit]ab]", "[ab]"},
	{"[\\[:]ab]", "[ab]"}, {"\\??\\?b", "?a?b"}, {"\\a\\b\\c", "abc"}, {"**/t[o]", "foo/bba/arr"},
	{"**/t[o]", "foo/bar/ton"}, {"**/[!a-z]", "foo/bar/X"}, {"-*-*-*-*-*-*-12-*-*-*-m-*-*-*", "-adobe-courier-bold-o-normal--12-120-75-75-m-70-iso8859-1"},
	{"XXX/*/*/*/*/*/*/12/*/*/*/m/*/*/*", "XXX/adobe/courier/bold/o/normal//12/120/75/75/m/70/iso8859/1"},
	{"**/*a*b*g*n*t", "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txt"},
	{"*/*/*", "foo/bb/aa/rr"}, {"**/**/**", "foo/bb/aa/rr"}, {"*X*i", "abcXdefXghi"},
	{"*/*X*/*/*i", "ab/cXd/efXg/hi"}, {"**/*X*/**/*i", "ab/cXd/efXg/hi"},
	{"[[:alpha:]][[:digit:]][[:upper:]]", "a1B"}, {"[[:digit:][:upper:][:space:]]", "A"},
	{"[[:digit:][:upper:][:space:]]", "a"}, {"[[:digit:][:upper:][:spaci:]]", "1"},
	{"[[:space:]]", "\t"}, {"[[:punct:]]", "!"}, {"[[:xdigit:]]", "f"}, {"[[:xdigit:]]", "g"},
	{"[a-c[:digit:]x-z]", "5"}, {"[a-c[:digit:]x-z]", "b"}, {"[a-c[:digit:]x-z]", "q"},
	{"[\\-_]", "-"}, {"[\\]]", "]"}, {"[\\]]", "\\]"}, {"[A-\\\\]", "G"}, {"[\\-^]", "["},
	{"[\\1-\\3]", "2"}, {"[[-\\]]", "\\"}, {"[,]", ","}, {"[\\\\,]", ","}, {"[\\\\,]", "\\"},
	{"[[-]]", "-]"}, {"[!\\]]", "]"}, {"a**b", "ab"}, {"a***b", "a/x/b"}, {"***/x", "a/x"},
	{"**x", "a/bx"}, {"x/***", "x/a/b"}, {"*.c", "a.c"}, {"*.c", "d/a.c"}, {"a\\", "a"},
	{"d/foo**bar", "d/foo/baz/bar"}, {"d/foo**bar", "d/fooxbar"}, {"d/a**", "d/a/b"}, {"d/**a", "d/x/a"},
	{"**a/b", "x/ya/b"}, {"**a/b", "ya/b"}, {"d/a**/b", "d/a/x/b"}, {"d/**\\/b", "d/x/b"},
	{"d/*/b", "d/x/y/b"}, {"d/?/b", "d/x/b"}, {"d/[!x]/b", "d/y/b"}, {"d/a/**/", "d/a/b/c"},
}

func TestWildmatchMatchesGit(t *testing.T) {
	g := newGitOracle(t)
	// One directory per pair, the pattern in its own ignore file, so that
	// a single git run decides them all.
	tr := tree{}
	for i, pair := range wildmatchPairs {
		d := fmt.Sprintf("c%03d/", i)
		tr[d+DefaultIgnoreFileName] = pair[0] + "\n"
		p := strings.TrimSuffix(pair[1], "/")
		if p == "" || strings.Contains(p, "//") {
			continue
		}
		tr[d+p] = ""
	}
	requireSameAsGit(t, g, tr)
}

// randomTree generates a small tree with ignore files from seed.
func randomTree(seed uint64) tree {
	r := rand.New(rand.NewPCG(seed, 0x636f7272616c))
	names := []string{"a", "b", "ab", "c.txt", "d.log", ".env", "x y", "sub", "A", "keep.txt", "t ", "#h", "!n", "[x]"}
	dirNames := []string{"a", "b", "sub", "d", ".hid", "x y"}
	segs := []string{"a", "b", "ab", "*", "?", "*.txt", "[ab]", "[!a]*", "**", "a*", "*b", "[[:alpha:]]*",
		"sub", "c.txt", "x\\ y", "d*", "[a-c]", "\\!n", "\\#h", ".env", "*.log", "d", ".hid", "t\\ ", "**/a", "A", "a**", "**b", "*/**", "s**b"}
	tr := tree{}
	dirs := []string{"."}
	seen := map[string]bool{}
	nfiles := 4 + r.IntN(12)
	for range nfiles {
		depth := r.IntN(4)
		var comps []string
		for range depth {
			comps = append(comps, dirNames[r.IntN(len(dirNames))])
		}
		comps = append(comps, names[r.IntN(len(names))])
		p := strings.Join(comps, "/")
		// A path cannot be both a file and a directory.
		conflict := seen[p]
		for i := 1; i < len(comps); i++ {
			if _, isFile := tr[strings.Join(comps[:i], "/")]; isFile {
				conflict = true
			}
		}
		if conflict {
			continue
		}
		tr[p] = ""
		for i := 1; i < len(comps); i++ {
			d := strings.Join(comps[:i], "/")
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
		seen[p] = true
	}
	genLine := func() string {
		switch r.IntN(20) {
		case 0:
			return "#" + segs[r.IntN(len(segs))]
		case 1:
			return ""
		}
		n := 1 + r.IntN(3)
		var parts []string
		for range n {
			parts = append(parts, segs[r.IntN(len(segs))])
		}
		s := strings.Join(parts, "/")
		if r.IntN(5) == 0 {
			s = "/" + s
		}
		if r.IntN(5) == 0 {
			s += "/"
		}
		if r.IntN(4) == 0 {
			s = "!" + s
		}
		if r.IntN(10) == 0 {
			s += "  "
		}
		return s
	}
	for _, d := range dirs {
		if (d == "." && r.IntN(10) == 0) || (d != "." && r.IntN(3) != 0) {
			continue
		}
		eol := "\n"
		if r.IntN(5) == 0 {
			eol = "\r\n"
		}
		var b strings.Builder
		for range 1 + r.IntN(5) {
			b.WriteString(genLine() + eol)
		}
		p := DefaultIgnoreFileName
		if d != "." {
			p = d + "/" + p
		}
		if _, isFile := tr[p]; !isFile && !seen[p] {
			tr[p] = b.String()
		}
	}
	return tr
}

func TestIgnoreMatchesGitRandom(t *testing.T) {
	g := newGitOracle(t)
	n := uint64(500)
	if testing.Short() {
		n = 100
	}
	// Git starts slowly, so the trees are checked 100 at a time, each in
	// its own directory; an ignore file there applies as at a root.
	const batch = 100
	for first := uint64(0); first < n; first += batch {
		all := tree{}
		for seed := first; seed < first+batch; seed++ {
			for p, c := range randomTree(seed) {
				all[fmt.Sprintf("r%04d/%s", seed, p)] = c
			}
		}
		var failed []string
		seen := map[string]bool{}
		for _, d := range oracleDiff(t, g, all) {
			var seed uint64
			_, err := fmt.Sscanf(d, "\"r%04d/", &seed)
			require.NoError(t, err, d)
			failed = append(failed, d)
			if s := fmt.Sprint(seed); !seen[s] {
				seen[s] = true
				failed = append(failed, fmt.Sprintf("seed %d: tree %q", seed, randomTree(seed)))
			}
		}
		require.Empty(t, failed)
	}
}
