package hidden

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/corral-sandbox/corral/internal/rootfs"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range []string{benchTreeDir, bench200kDir} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
	os.Exit(code)
}

// agentConfig applies the agent-config list only; allLists every list.
var (
	agentConfig = []names.List{names.AgentConfig}
	allLists    = names.Lists()
)

// TestComputeHiddenNames: the name table's entries are hidden in every
// spelling that folds onto them (case, full-width forms, trailing dots
// and spaces), at any depth, and no repository ignore file re-includes
// them; so is the write directory's .claims.
func TestComputeHiddenNames(t *testing.T) {
	dir := t.TempDir()
	buildTree(t, dir, tree{
		".openwikiignore":        "!openwiki/.claims\n!.git\n",
		".git/config":            "[core]",
		"vendor/lib/.git/config": "[core] fsmonitor=id",
		"sub/.GIT/x":             "",
		"mod/.git":               "gitdir: ../elsewhere",
		"mod/.Git/x":             "",
		"openwiki/.claims/a":     "",
		"openwiki/.CLAIMS/b":     "",
		"openwiki/page.md":       "",
		"docs/.claims/c":         "",
		"AGENTS.md":              "",
		"docs/AGENTS.md":         "",
		"CLAUDE.md":              "",
		".claude/settings.json":  "",
		".opencode/x":            "",
		"opencode.json":          "",
		".cursor":                "a file, not the directory .cursor/ hides",
		"sub/.openwikiignore":    "!.git\n!AGENTS.md\n!.claude/\n!*\n!**\n",
		"sub/AGENTS.md":          "",
		"sub/.claude/x":          "",
		"sub/.git/HEAD":          "",
		"lnk/.claude":            "-> ../docs",
		// Look-alike spellings fold onto the names they look like.
		"low/agents.md":      "",
		"low/Claude.md":      "",
		"wide/ＡＧＥＮＴＳ.md":     "",
		"wide/.ｇｉｔ/x":        "",
		"dots/.git./x":       "",
		"openwiki/．claims/":  "",
		"openwiki/.claims.":  "",
		"openwiki/.claims /": "",
		"docs/.env":          "not hidden without the secrets list",
	}, "")
	h, err := Compute(dir, Options{Lists: agentConfig})
	require.NoError(t, err)
	const git = ".git is hidden at any depth"
	const (
		claude = "profile hides agent config .claude/ (Claude Code)"
		agents = "profile hides agent config AGENTS.md (AGENTS.md)"
		claims = "openwiki/.claims is owned by corral"
	)
	require.Equal(t, []Hide{
		{Path: ".claude", Rule: claude, Dir: true},
		{Path: ".git", Rule: git, Dir: true},
		{Path: ".opencode", Rule: "profile hides agent config .opencode/ (OpenCode)", Dir: true},
		{Path: "AGENTS.md", Rule: agents},
		{Path: "CLAUDE.md", Rule: "profile hides agent config CLAUDE.md (Claude Code)"},
		{Path: "docs/AGENTS.md", Rule: agents},
		{Path: "dots/.git.", Rule: git, Dir: true},
		{Path: "lnk/.claude", Rule: claude}, // a symlink
		{Path: "low/Claude.md", Rule: "profile hides agent config CLAUDE.md (Claude Code)"},
		{Path: "low/agents.md", Rule: agents},
		{Path: "mod/.Git", Rule: git, Dir: true},
		{Path: "mod/.git", Rule: git},
		{Path: "opencode.json", Rule: "profile hides agent config opencode.json (OpenCode)"},
		{Path: "openwiki/.CLAIMS", Rule: claims, Dir: true},
		{Path: "openwiki/.claims", Rule: claims, Dir: true},
		{Path: "openwiki/.claims ", Rule: claims, Dir: true},
		{Path: "openwiki/.claims.", Rule: claims},
		{Path: "openwiki/．claims", Rule: claims, Dir: true},
		{Path: "sub/.GIT", Rule: git, Dir: true},
		{Path: "sub/.claude", Rule: claude, Dir: true},
		{Path: "sub/.git", Rule: git, Dir: true},
		{Path: "sub/AGENTS.md", Rule: agents},
		{Path: "vendor/lib/.git", Rule: git, Dir: true},
		{Path: "wide/.ｇｉｔ", Rule: git, Dir: true},
		{Path: "wide/ＡＧＥＮＴＳ.md", Rule: agents},
	}, h.Hides())
	require.Equal(t, h.Len(), len(h.Paths()))
	require.Equal(t, "mod/.git", h.Paths()[11])

	v := NewView(dir, h)
	for _, tc := range []struct {
		path, rule string
	}{
		{".git/config", git},
		{"vendor/lib/.git/config", git},
		{"new/.gIt/config", git}, // does not exist
		{"a/.git", git},          // does not exist
		{"openwiki/.claims/a.lock", "openwiki/.claims is owned by corral"},
		{"openwiki/.Claims", "openwiki/.claims is owned by corral"},
		{"OpenWiki/.claims/x", "openwiki/.claims is owned by corral"},
		{"x/AGENTS.md", agents},
		{"x/agents.MD", agents},
		{"new/.opencode", "profile hides agent config .opencode/ (OpenCode)"}, // could be created as a directory
		{"sub/.claude/x", claude},
		{"lnk/.claude/settings.json", claude},
		{"new/.Claude/settings.json", claude},
		{"new/ＣＬＡＵＤＥ.md", "profile hides agent config CLAUDE.md (Claude Code)"},
		{"new/.ｇｉｔ/config", git},
		{"openwiki/．claims/x", claims},
		{"openwiki/.claims./x", claims},
		{"ＯｐｅｎＷｉｋｉ/.claims/x", claims},
		{"docs/.env", ""},
		{"docs/.claims/c", ""},
		{"openwiki/claims", ""},
		{"openwiki/page.md", ""},
		{".cursor", ""},
		{"docs/.gitignore", ""},
		{".", ""},
	} {
		rule, hidden := v.Hidden(tc.path)
		require.Equal(t, tc.rule, rule, tc.path)
		require.Equal(t, tc.rule != "", hidden, tc.path)
	}
}

func TestComputeHiddenWriteDir(t *testing.T) {
	dir := t.TempDir()
	buildTree(t, dir, tree{
		"openwiki/.claims/a":  "",
		"docs/wiki/.claims/a": "",
	}, "")
	h, err := Compute(dir, Options{WriteDir: "docs/wiki"})
	require.NoError(t, err)
	require.Equal(t, []Hide{{Path: "docs/wiki/.claims", Rule: "docs/wiki/.claims is owned by corral", Dir: true}}, h.Hides())
	require.Equal(t, "docs/wiki", h.Options().WriteDir)
	require.Equal(t, DefaultIgnoreFileName, h.Options().IgnoreFileName)
}

// TestComputeHiddenPath07 covers the forms a hidden path may take at
// start: absent, a symlink, a file.
func TestComputeHiddenPath07(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree tree
		want []string
	}{
		{"claims absent", tree{"openwiki/x": ""}, nil},
		{"claims a symlink", tree{"openwiki/.claims": "-> ../README.md", "README.md": ""}, []string{"openwiki/.claims"}},
		{"git a file", tree{".git": "gitdir: ../elsewhere"}, []string{".git"}},
		{"nested git", tree{"vendor/lib/.git/config": "[core] fsmonitor=id"}, []string{"vendor/lib/.git"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			buildTree(t, dir, tc.tree, "")
			h, err := Compute(dir, Options{})
			require.NoError(t, err)
			require.Equal(t, tc.want, nilIfEmpty(h.Paths()))
			v := NewView(dir, h)
			for _, p := range []string{"openwiki/.claims", "openwiki/.claims/a.lock", ".git/config", "vendor/lib/.git/config"} {
				_, hidden := v.Hidden(p)
				require.True(t, hidden, p)
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// TestHiddenSetFixedAtStart: writing an ignore file after the set was
// computed (as an agent might in openwiki/) changes nothing (IGN-07).
func TestHiddenSetFixedAtStart(t *testing.T) {
	dir := t.TempDir()
	buildTree(t, dir, tree{
		".openwikiignore": "secret.txt\n",
		"secret.txt":      "S",
		"openwiki/a.md":   "",
	}, "")
	h, err := Compute(dir, Options{})
	require.NoError(t, err)
	v := NewView(dir, h)
	buildTree(t, dir, tree{
		".openwikiignore":          "!*\n",
		"openwiki/.openwikiignore": "!*\na.md\n",
		"sub/.openwikiignore":      "new\n",
	}, "")
	rule, hidden := v.Hidden("secret.txt")
	require.True(t, hidden)
	require.Equal(t, ".openwikiignore:1 hides secret.txt", rule)
	for _, p := range []string{"openwiki/a.md", "sub/new", "openwiki/.openwikiignore"} {
		_, hidden = v.Hidden(p)
		require.False(t, hidden, p)
	}
	_, hidden = v.Hidden("openwiki/secret.txt")
	require.True(t, hidden)
}

func TestComputeHiddenDoesNotFollowSymlinks(t *testing.T) {
	outside := t.TempDir()
	buildTree(t, outside, tree{"secret/.git/config": "", "AGENTS.md": ""}, "")
	dir := t.TempDir()
	buildTree(t, dir, tree{
		"out":             "-> " + outside,
		"up":              "-> ..",
		"self":            "-> .",
		"d/loop":          "-> loop",
		".openwikiignore": "-> " + filepath.Join(outside, "AGENTS.md"),
		"x":               "",
	}, "")
	h, err := Compute(dir, Options{Lists: agentConfig})
	require.NoError(t, err)
	// Only the links that leave the repository, hidden themselves.
	require.Equal(t, []Hide{
		{Path: ".openwikiignore", Rule: SymlinkRule},
		{Path: "out", Rule: SymlinkRule},
		{Path: "up", Rule: SymlinkRule},
	}, h.Hides())
}

func TestComputeHiddenSkipsFifoIgnoreFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, DefaultIgnoreFileName), 0o644))
	h, err := Compute(dir, Options{})
	require.NoError(t, err)
	require.Zero(t, h.Len())
}

func TestComputeHiddenErrors(t *testing.T) {
	_, err := Compute(filepath.Join(t.TempDir(), "missing"), Options{})
	require.True(t, errdefs.IsNotFound(err), err)
	for _, opts := range []Options{
		{IgnoreFileName: "a/b"},
		{IgnoreFileName: ".."},
		{WriteDir: "../x"},
		{WriteDir: "/abs"},
		{WriteDir: "a//b"},
		{WriteDir: "."},
		{Lists: []names.List{"everything"}},
		{Lists: []names.List{""}},
	} {
		_, err := Compute(t.TempDir(), opts)
		require.True(t, errdefs.IsInvalidArgument(err), "%+v: %v", opts, err)
	}
}

func TestComputeHiddenGOROOT(t *testing.T) {
	src := filepath.Join(runtime.GOROOT(), "src")
	if _, err := os.Stat(src); err != nil {
		t.Skip("no GOROOT/src")
	}
	h, err := Compute(src, Options{Lists: allLists})
	require.NoError(t, err)
	require.NotZero(t, h.Len())
	for _, hd := range h.Hides() {
		require.Regexp(t, `^(built-in secrets list: |profile hides agent config |(.*/)?\.gitignore:[0-9]+ hides |symlink leaves|hard link of hidden )`, hd.Rule, hd)
	}
}

// The benchmark tree: 10×10×10×10 directories of 10 files each (100,000
// files, 11,110 directories), ignore files at the root and in each
// top-level directory. Created once per test binary (creating 100,000
// files takes a while on slow disks) and removed by TestMain.
var (
	benchTreeOnce sync.Once
	benchTreeDir  string
	benchTreeErr  error
)

const benchRootIgnore = "*.log\n!keep.log\nbuild/\n/secret*\n**/tmp/**\n"

func benchTree(b *testing.B) string {
	b.Helper()
	benchTreeOnce.Do(func() {
		benchTreeDir, benchTreeErr = os.MkdirTemp("", "corral-mounts-bench-")
		if benchTreeErr != nil {
			return
		}
		benchTreeErr = makeBenchTree(benchTreeDir)
	})
	require.NoError(b, benchTreeErr)
	return benchTreeDir
}

func makeBenchTree(root string) error {
	names := []string{"a.go", "b.go", "c.go", "d_test.go", "e.md", "f.txt", "g.json", "keep.log", "h.log", "i.bak"}
	dirNames := []string{"d0", "d1", "build", "d3", "tmp", "d5", "d6", "d7", "d8", "secret"}
	if err := os.WriteFile(filepath.Join(root, DefaultIgnoreFileName), []byte(benchRootIgnore), 0o644); err != nil {
		return err
	}
	var mk func(dir string, depth int) error
	mk = func(dir string, depth int) error {
		if depth == 4 {
			for _, n := range names {
				if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
					return err
				}
			}
			return nil
		}
		for _, n := range dirNames {
			d := filepath.Join(dir, n)
			if err := os.Mkdir(d, 0o755); err != nil {
				return err
			}
			if depth == 0 {
				if err := os.WriteFile(filepath.Join(d, DefaultIgnoreFileName), []byte("*.bak\n!d7/**/i.bak\n"), 0o644); err != nil {
					return err
				}
			}
			if err := mk(d, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return mk(root, 0)
}

func BenchmarkComputeHidden100k(b *testing.B) {
	dir := benchTree(b)
	var h *Set
	for b.Loop() {
		var err error
		h, err = Compute(dir, Options{Lists: allLists})
		require.NoError(b, err)
	}
	b.ReportMetric(float64(h.Len()), "hidden")
}

// BenchmarkGitLsFiles100k is the yardstick: git's own walk of the same
// tree with the same ignore files.
func BenchmarkGitLsFiles100k(b *testing.B) {
	dir := benchTree(b)
	g := newGitOracle(b)
	for b.Loop() {
		g.run(b, dir, nil, "ls-files", "--others", "--ignored", "--directory", "--exclude-per-directory="+DefaultIgnoreFileName)
	}
}

// The 200,000-file tree: 20 top-level directories, each 10×10×10
// directories of 10 files (22,221 directories), with .gitignore files at
// the root (one per rule set below) and in each top-level directory.
var (
	bench200kOnce sync.Once
	bench200kDir  string
	bench200kErr  error
)

func bench200k(b *testing.B) string {
	b.Helper()
	bench200kOnce.Do(func() {
		bench200kDir, bench200kErr = os.MkdirTemp("", "corral-hidden-200k-")
		if bench200kErr != nil {
			return
		}
		bench200kErr = makeBench200k(bench200kDir)
	})
	require.NoError(b, bench200kErr)
	return bench200kDir
}

func makeBench200k(root string) error {
	files := []string{"a.go", "b.go", "c.go", "d_test.go", "e.md", "f.txt", "g.json", "keep.log", "h.log", "i.bak"}
	dirNames := []string{"d0", "d1", "build", "d3", "tmp", "d5", "d6", "d7", "d8", "secret"}
	var mk func(dir string, depth int) error
	mk = func(dir string, depth int) error {
		if depth == 4 {
			for _, n := range files {
				if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
					return err
				}
			}
			return nil
		}
		names := dirNames
		if depth == 0 {
			names = nil
			for i := range 20 {
				names = append(names, fmt.Sprintf("top%02d", i))
			}
		}
		for _, n := range names {
			d := filepath.Join(dir, n)
			if err := os.Mkdir(d, 0o755); err != nil {
				return err
			}
			if depth == 0 {
				if err := os.WriteFile(filepath.Join(d, ".gitignore"), []byte("*.bak\n!d7/**/i.bak\n"), 0o644); err != nil {
					return err
				}
			}
			if err := mk(d, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return mk(root, 0)
}

// bench200kRules are the root .gitignore files the 200k benchmarks
// compare under: ordinary rules, rules hiding most files one by one, and
// a rule hiding most directories.
var bench200kRules = []struct{ name, gitignore string }{
	{"typical", benchRootIgnore},
	{"most-files", "*.go\n*.md\n*.txt\n*.json\n*.log\n"},
	{"most-dirs", "d*/\nbuild/\ntmp/\n"},
}

// BenchmarkComputeHidden200k is the hidden set of the 200k tree with
// every built-in list (the .gitignore files as the gitignore list); its
// yardstick is BenchmarkGitLsFiles200k, git's own walk over the same
// rules.
func BenchmarkComputeHidden200k(b *testing.B) {
	dir := bench200k(b)
	for _, r := range bench200kRules {
		b.Run(r.name, func(b *testing.B) {
			require.NoError(b, os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(r.gitignore), 0o644))
			var h *Set
			for b.Loop() {
				var err error
				h, err = Compute(dir, Options{Lists: allLists})
				require.NoError(b, err)
			}
			b.ReportMetric(float64(h.Len()), "hidden")
		})
	}
}

// BenchmarkGitLsFiles200k: `git ls-files --others --ignored
// --exclude-standard` over the 200k tree and the same rules.
func BenchmarkGitLsFiles200k(b *testing.B) {
	dir := bench200k(b)
	g := newGitOracle(b)
	for _, r := range bench200kRules {
		b.Run(r.name, func(b *testing.B) {
			require.NoError(b, os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(r.gitignore), 0o644))
			var out []byte
			for b.Loop() {
				out = g.run(b, dir, nil, "ls-files", "-z", "--others", "--ignored", "--exclude-standard")
			}
			b.ReportMetric(float64(bytes.Count(out, []byte{0})), "ignored")
		})
	}
}

func BenchmarkComputeHiddenGOROOT(b *testing.B) {
	src := filepath.Join(runtime.GOROOT(), "src")
	if _, err := os.Stat(src); err != nil {
		b.Skip("no GOROOT/src")
	}
	for b.Loop() {
		_, err := Compute(src, Options{Lists: allLists})
		require.NoError(b, err)
	}
}

func BenchmarkViewHidden(b *testing.B) {
	dir := benchTree(b)
	h, err := Compute(dir, Options{Lists: allLists})
	require.NoError(b, err)
	v := NewView(dir, h)
	paths := []string{"d0/d1/d3/d5/a.go", "d0/d1/d3/d5/h.log", "d7/d7/d7/d7/missing/x", "build/x", "d0/.git/x"}
	i := 0
	for b.Loop() {
		v.Hidden(paths[i%len(paths)])
		i++
	}
	_ = fmt.Sprint(i)
}

// TestDirsAreTheVisibleDirectories: the directory list the walk keeps
// for the whiteout layer (Set.Dirs) is exactly the visible directories of
// a plain walk that skips what the set hides, in ComparePaths order, each
// with its own mode and owner, whether one walker or four made it; a set
// read back from JSON has none.
func TestDirsAreTheVisibleDirectories(t *testing.T) {
	src := filepath.Join(runtime.GOROOT(), "src")
	if _, err := os.Stat(src); err != nil {
		t.Skip("no GOROOT/src")
	}
	for _, n := range []int{1, 4} {
		h, err := newSet(Options{Lists: allLists})
		require.NoError(t, err)
		root, err := rootfs.OpenRoot(src)
		require.NoError(t, err)
		require.NoError(t, h.walk(root, n))
		root.Close()
		var want []VisibleDir
		require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			require.NoError(t, err)
			rel, _ := filepath.Rel(src, p)
			rel = filepath.ToSlash(rel)
			if _, hidden := h.Lookup(rel); hidden {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				var st unix.Stat_t
				require.NoError(t, unix.Lstat(p, &st))
				want = append(want, VisibleDir{Path: rel, Mode: st.Mode, UID: st.Uid, GID: st.Gid, Atime: st.Atim, Mtime: st.Mtim})
			}
			return nil
		}))
		got := h.Dirs()
		require.Equal(t, len(want), len(got), "%d walkers", n)
		for i := range want {
			require.Equal(t, want[i].Path, got[i].Path, "%d walkers", n)
			require.Equal(t, [3]uint32{want[i].Mode, want[i].UID, want[i].GID}, [3]uint32{got[i].Mode, got[i].UID, got[i].GID}, got[i].Path)
			require.Equal(t, want[i].Mtime, got[i].Mtime, got[i].Path)
		}
		data, err := h.MarshalJSON()
		require.NoError(t, err)
		back, err := Unmarshal(data)
		require.NoError(t, err)
		require.Nil(t, back.Dirs())
	}
}
