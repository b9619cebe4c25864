package changeset

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// diffGit runs git in dir with a clean configuration and returns its
// combined output.
func diffGit(t testing.TB, dir string, stdin []byte, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// diffRepo makes a git repository holding tree under prefix/ and commits it.
func diffRepo(t testing.TB, prefix string, tree map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	repo := t.TempDir()
	out, err := diffGit(t, repo, nil, "init", "-q", ".")
	require.NoError(t, err, out)
	diffWriteTree(t, filepath.Join(repo, prefix), tree)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("readme\n"), 0o644))
	out, err = diffGit(t, repo, nil, "add", "-A")
	require.NoError(t, err, out)
	out, err = diffGit(t, repo, nil, "commit", "-qm", "base")
	require.NoError(t, err, out)
	return repo
}

// diffApply requires `git apply --check` and then `git apply` to accept
// patch in repo.
func diffApply(t testing.TB, repo string, patch []byte) {
	t.Helper()
	out, err := diffGit(t, repo, patch, "apply", "--check", "-")
	require.NoError(t, err, "git apply --check: %s\npatch:\n%s", out, patch)
	out, err = diffGit(t, repo, patch, "apply", "-")
	require.NoError(t, err, "git apply: %s\npatch:\n%s", out, patch)
}

// diffPrefixed returns tree with every key under prefix/.
func diffPrefixed(prefix string, tree map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range tree {
		if !strings.HasSuffix(k, "/") {
			out[prefix+"/"+k] = v
		}
	}
	return out
}

// TestPatchAppliesOverlayChanges is end to end: file operations through a
// real overlay, Collect, Patch, then git apply in a repository holding the
// base must give exactly what the merged view showed.
func TestPatchAppliesOverlayChanges(t *testing.T) {
	tree := map[string]string{
		"pages/a.md":          "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n",
		"pages/no-eol.md":     "alpha\nbeta",
		"pages/add-eol.md":    "x\ny",
		"pages/drop-eol.md":   "x\ny\n",
		"pages/to-empty.md":   "gone soon\n",
		"pages/from-empty.md": "",
		"empty-del.md":        "",
		"del.md":              "delete me\n",
		"with space.md":       "s\n",
		" lead.md":            "l",
		"trail .md":           "t\n",
		"dir with space/x.md": "x\n",
		"Zürich.md":           "grüezi\n",
		"crlf.md":             "a\r\nb\r\n",
		"tricky.md":           "--- a/x\n+++ b/x\n@@ -1 +1 @@\n\\ No newline at end of file\n",
		"swap/inner.md":       "i\n",
		"file":                "f\n",
		"opaque/keep.md":      "k\n",
		"opaque/drop.md":      "d\n",
	}
	o := diffNewOverlay(t, tree)
	m := o.merged
	diffWrite(t, m, "pages/a.md", "one\ntwo\nTHREE\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven")
	diffWrite(t, m, "pages/no-eol.md", "alpha\ngamma")
	diffWrite(t, m, "pages/add-eol.md", "x\ny\n")
	diffWrite(t, m, "pages/drop-eol.md", "x\ny")
	diffWrite(t, m, "pages/to-empty.md", "")
	diffWrite(t, m, "pages/from-empty.md", "now\nfull\n")
	diffWrite(t, m, "pages/new-empty.md", "")
	diffWrite(t, m, "pages/new-no-eol.md", "no newline")
	require.NoError(t, os.Remove(diffP(m, "empty-del.md")))
	require.NoError(t, os.Remove(diffP(m, "del.md")))
	diffWrite(t, m, "with space.md", "s2\n")
	diffWrite(t, m, " lead.md", "l2")
	diffWrite(t, m, "trail .md", "t2\n")
	diffWrite(t, m, "dir with space/x.md", "x2\n")
	diffWrite(t, m, "new dir/new file.md", "n\n")
	diffWrite(t, m, "a b/c.md", "tricky header\n")
	diffWrite(t, m, "Zürich.md", "grüezi mitenand\n")
	diffWrite(t, m, "新しい.md", "新\n")
	diffWrite(t, m, "odd/a:b*?[x].md", "glob\n")
	diffWrite(t, m, "odd/-dash #hash;'q'`b`$x.md", "shell\n")
	diffWrite(t, m, "odd/😀 b/c d.md", "emoji\n")
	diffWrite(t, m, "crlf.md", "a\r\nc\r\n")
	diffWrite(t, m, "tricky.md", "--- a/y\n+++ b/x\n@@ -1 +1 @@\n\\ No newline at end of file\n-\n")
	require.NoError(t, os.RemoveAll(diffP(m, "swap")))
	diffWrite(t, m, "swap", "now a file\n")
	require.NoError(t, os.Remove(diffP(m, "file")))
	diffWrite(t, m, "file/inside.md", "inside\n")
	require.NoError(t, os.RemoveAll(diffP(m, "opaque")))
	diffWrite(t, m, "opaque/keep.md", "k\n")
	diffWrite(t, m, "opaque/new.md", "new\n")
	want := diffPrefixed("openwiki", diffReadTree(t, m))
	want["README.md"] = "readme\n"
	o.unmount(t)

	cs, err := Collect(o.upper, o.base, "openwiki", DefaultLimits())
	require.NoError(t, err)
	require.NoError(t, cs.Err())
	patch, err := Patch(cs)
	require.NoError(t, err)

	repo := diffRepo(t, "openwiki", tree)
	diffApply(t, repo, patch)
	assert.Equal(t, want, diffReadTree(t, repo))

	// The stat names every change.
	stat := cs.Stat()
	assert.Contains(t, stat, "modify openwiki/pages/a.md (+2 -1)\n")
	assert.Contains(t, stat, "delete openwiki/del.md (+0 -1)\n")
	assert.Contains(t, stat, "create openwiki/new dir/new file.md (+1 -0)\n")
	assert.Contains(t, stat, fmt.Sprintf("%d files changed, ", len(cs.Changes)))
}

// TestPatchMatchesGit compares Patch with git's own output where any diff
// algorithm gives the same hunks.
func TestPatchMatchesGit(t *testing.T) {
	before := map[string]string{"a b.md": "1\n2\n3\n", "del.md": "d", "empty.md": "", "Zürich.md": "z\n", "x .md": "x\n"}
	after := map[string]string{"a b.md": "1\nzwei\n3\n", "new.md": "n\n", "new empty.md": "", "Zürich.md": "zz\n", "x .md": "y"}
	repo := diffRepo(t, "w", before)
	cs := &Set{}
	for _, p := range []string{"Zürich.md", "a b.md", "del.md", "empty.md", "new empty.md", "new.md", "x .md"} {
		cs.Changes = append(cs.Changes, diffChange("w/"+p, before, after, p))
	}
	for p := range before {
		require.NoError(t, os.Remove(filepath.Join(repo, "w", p)))
	}
	diffWriteTree(t, filepath.Join(repo, "w"), after)
	out, err := diffGit(t, repo, nil, "add", "-A")
	require.NoError(t, err, out)
	gitPatch, err := diffGit(t, repo, nil, "diff", "--cached", "--full-index", "--no-renames")
	require.NoError(t, err, gitPatch)
	patch, err := Patch(cs)
	require.NoError(t, err)
	assert.Equal(t, gitPatch, string(patch))
}

// diffChange builds the Change for rel between two trees (absent = no key).
func diffChange(path string, before, after map[string]string, rel string) Change {
	b, hasB := before[rel]
	a, hasA := after[rel]
	ch := Change{Path: path, Mode: 0o644}
	switch {
	case hasB && hasA:
		ch.Kind = Modify
	case hasA:
		ch.Kind = Create
	default:
		ch.Kind = Delete
		ch.Mode = 0
	}
	if hasB {
		ch.Before, ch.BeforeSHA256 = []byte(b), SHA256([]byte(b))
	}
	if hasA {
		ch.After, ch.AfterSHA256, ch.Size = []byte(a), SHA256([]byte(a)), int64(len(a))
	}
	return ch
}

// TestPatchRandom applies patches of random edits, with and without final
// newlines, and requires git to reproduce the after bytes exactly.
func TestPatchRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", "b", "c", "", " ", "x y", "\t", "--", "++", "@@", "\\", "é", "\r"}
	text := func() string {
		n := rng.IntN(12)
		var b strings.Builder
		for i := range n {
			b.WriteString(words[rng.IntN(len(words))])
			if i < n-1 || rng.IntN(3) > 0 {
				b.WriteByte('\n')
			}
		}
		return b.String()
	}
	mutate := func(s string) string {
		lines := strings.SplitAfter(s, "\n")
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(lines) + 1)
			switch rng.IntN(3) {
			case 0:
				lines = append(lines[:i], append([]string{words[rng.IntN(len(words))] + "\n"}, lines[i:]...)...)
			case 1:
				if i < len(lines) {
					lines = append(lines[:i], lines[i+1:]...)
				}
			default:
				if i < len(lines) {
					lines[i] = "changed " + lines[i]
				}
			}
		}
		out := strings.Join(lines, "")
		if rng.IntN(4) == 0 {
			out = strings.TrimSuffix(out, "\n")
		}
		return out
	}
	before, after := map[string]string{}, map[string]string{}
	for i := range 300 {
		p := fmt.Sprintf("f%03d.md", i)
		switch i % 10 {
		case 0:
			after[p] = text()
		case 1:
			before[p] = text()
		default:
			before[p] = text()
			after[p] = mutate(before[p])
		}
	}
	cs := &Set{}
	for i := range 300 {
		p := fmt.Sprintf("f%03d.md", i)
		b, inBefore := before[p]
		if a, inAfter := after[p]; inBefore && inAfter && a == b {
			continue
		}
		cs.Changes = append(cs.Changes, diffChange("openwiki/"+p, before, after, p))
	}
	patch, err := Patch(cs)
	require.NoError(t, err)
	repo := diffRepo(t, "openwiki", before)
	diffApply(t, repo, patch)
	want := diffPrefixed("openwiki", after)
	want["README.md"] = "readme\n"
	assert.Equal(t, want, diffReadTree(t, repo))
}

func TestPatchRefuses(t *testing.T) {
	ok := func() Change {
		return diffChange("openwiki/a.md", map[string]string{"a": "1\n"}, map[string]string{"a": "2\n"}, "a")
	}
	tests := []struct {
		name  string
		cs    *Set
		check func(error) bool
	}{
		{"nil set", nil, errdefs.IsInvalidArgument},
		{"rejected set", &Set{Changes: []Change{ok()}, Violations: []Problem{{Path: "openwiki/r", Reason: "symbolic link"}}}, errdefs.IsPermissionDenied},
		{"escaping path", diffWith(ok(), func(c *Change) { c.Path = "openwiki/../../.bashrc" }), errdefs.IsInvalidArgument},
		{"absolute path", diffWith(ok(), func(c *Change) { c.Path = "/etc/cron.d/x" }), errdefs.IsInvalidArgument},
		{".git component", diffWith(ok(), func(c *Change) { c.Path = "openwiki/.git/config" }), errdefs.IsInvalidArgument},
		{"quote in name", diffWith(ok(), func(c *Change) { c.Path = `openwiki/a"b.md` }), errdefs.IsInvalidArgument},
		{"newline in name", diffWith(ok(), func(c *Change) { c.Path = "openwiki/a\nb.md" }), errdefs.IsInvalidArgument},
		{"executable mode", diffWith(ok(), func(c *Change) { c.Mode = 0o755 }), errdefs.IsInvalidArgument},
		{"symlink mode", diffWith(ok(), func(c *Change) { c.Mode = os.ModeSymlink | 0o644 }), errdefs.IsInvalidArgument},
		{"tampered after", diffWith(ok(), func(c *Change) { c.After = []byte("3\n") }), errdefs.IsInvalidArgument},
		{"bytes dropped by JSON", diffWith(ok(), func(c *Change) { c.Before, c.After = nil, nil }), errdefs.IsInvalidArgument},
		{"unknown kind", diffWith(ok(), func(c *Change) { c.Kind = "rename" }), errdefs.IsInvalidArgument},
		{"create with before", diffWith(ok(), func(c *Change) { c.Kind = Create }), errdefs.IsInvalidArgument},
		{"binary", &Set{Changes: []Change{diffChange("openwiki/b", nil, map[string]string{"b": "\x00"}, "b")}}, errdefs.IsInvalidArgument},
		{"no change", &Set{Changes: []Change{diffChange("openwiki/b", map[string]string{"b": "x"}, map[string]string{"b": "x"}, "b")}}, errdefs.IsInvalidArgument},
		{"duplicate", &Set{Changes: []Change{ok(), ok()}}, errdefs.IsInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Patch(tc.cs)
			assert.Nil(t, out)
			assert.True(t, tc.check(err), "%v", err)
		})
	}
	out, err := Patch(&Set{})
	assert.NoError(t, err)
	assert.Empty(t, out)
}

func diffWith(c Change, f func(*Change)) *Set {
	f(&c)
	return &Set{Changes: []Change{c}}
}

func TestGitQuote(t *testing.T) {
	assert.Equal(t, "a/x y.md", gitQuote("a/x y.md"))
	assert.Equal(t, `"a/Z\303\274rich.md"`, gitQuote("a/Zürich.md"))
	assert.Equal(t, `"a/\"\\\t\n\001"`, gitQuote("a/\"\\\t\n\x01"))
	assert.Equal(t, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391", gitBlobID(nil))
}

func TestStat(t *testing.T) {
	cs := &Set{
		Changes: []Change{
			diffChange("openwiki/m.md", map[string]string{"m": "a\nb\nc"}, map[string]string{"m": "a\nB\nc\nd\n"}, "m"),
			diffChange("openwiki/d.md", map[string]string{"d": "1\n2\n"}, nil, "d"),
			diffChange("openwiki/c.md", nil, map[string]string{"c": "x"}, "c"),
		},
		Violations: []Problem{{Path: `"openwiki/a\nb"`, Reason: "name contains control character U+000A"}},
	}
	assert.Equal(t, `create openwiki/c.md (+1 -0)
delete openwiki/d.md (+0 -2)
modify openwiki/m.md (+3 -2)
3 files changed, 4 insertions(+), 4 deletions(-)
rejected "openwiki/a\nb": name contains control character U+000A
`, cs.Stat())
}

// writeCounter records the size of each write.
type writeCounter struct{ writes []int }

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	return len(p), nil
}

// TestWritePatchStreams: WritePatch writes the bytes Patch returns, one
// file's patch per write (never the whole patch in one buffer), and
// returns their count; a set it refuses writes nothing.
func TestWritePatchStreams(t *testing.T) {
	var cs Set
	for _, p := range []string{"b.md", "a.md", "c.md"} {
		after := []byte(strings.Repeat(p+"\n", 1000))
		cs.Changes = append(cs.Changes, Change{Path: p, Kind: Create, After: after, AfterSHA256: SHA256(after), Mode: 0o644})
	}
	whole, err := Patch(&cs)
	require.NoError(t, err)
	var w writeCounter
	n, err := WritePatch(&w, &cs)
	require.NoError(t, err)
	require.Equal(t, int64(len(whole)), n)
	require.Len(t, w.writes, 3, "one write per file")
	for _, m := range w.writes {
		require.Less(t, m, len(whole))
	}
	n, err = WritePatch(io.Discard, &Set{Changes: []Change{cs.Changes[0], cs.Changes[0]}})
	require.Error(t, err)
	require.Zero(t, n, "a refused set writes nothing")
}
