package fsop

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// tree builds files under root: "path" → content, "-> target" a symlink,
// a trailing "/" a directory.
func tree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			require.NoError(t, os.MkdirAll(full, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		if target, ok := strings.CutPrefix(c, "-> "); ok {
			require.NoError(t, os.Symlink(target, full))
			continue
		}
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
}

func openFS(t *testing.T, files map[string]string) (*FS, string) {
	t.Helper()
	root := t.TempDir()
	tree(t, root, files)
	f, err := Open(root)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f, root
}

func code(t *testing.T, err error) string {
	t.Helper()
	var e *Error
	require.True(t, errors.As(err, &e), "want *Error, got %v", err)
	return e.Code
}

func TestRead(t *testing.T) {
	long := strings.Repeat("x", MaxReadBytes+10) + "\nafter\n"
	f, _ := openFS(t, map[string]string{
		"a.txt":      "one\ntwo\nthree\nfour",
		"utf.txt":    "héllo wörld\n",
		"bin":        "ab\x00cd",
		"bad-utf":    "ab\xffcd",
		"long.txt":   long,
		"dir/x":      "",
		"link":       "-> a.txt",
		"escape":     "-> ../outside",
		"empty.txt":  "",
		"dir/up.txt": "-> ../a.txt",
	})
	r, err := f.Read("a.txt", ReadOptions{})
	require.NoError(t, err)
	require.Equal(t, "one\ntwo\nthree\nfour", r.Content)
	require.Equal(t, int64(4), r.Count)
	require.True(t, r.EOF)
	require.Equal(t, sha256Hex([]byte("one\ntwo\nthree\nfour")), r.SHA256)

	r, err = f.Read("a.txt", ReadOptions{Offset: 1, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, "two\nthree\n", r.Content)
	require.Equal(t, int64(1), r.Offset)
	require.Equal(t, int64(3), r.NextOffset)
	require.False(t, r.EOF)

	r, err = f.Read("a.txt", ReadOptions{Offset: 10})
	require.NoError(t, err)
	require.Equal(t, "", r.Content)
	require.Equal(t, int64(4), r.Offset)
	require.True(t, r.EOF)

	r, err = f.Read("utf.txt", ReadOptions{Bytes: true, Offset: 2, Limit: 4})
	require.NoError(t, err)
	// Offset 2 is inside "é": moved to the next character; the window
	// ends on a character boundary.
	require.Equal(t, int64(3), r.Offset)
	require.True(t, strings.HasPrefix("llo wörld\n", r.Content), r.Content)
	require.True(t, len(r.Content) <= 4)

	for _, p := range []string{"bin", "bad-utf"} {
		r, err = f.Read(p, ReadOptions{})
		require.NoError(t, err)
		require.True(t, r.Binary, p)
		require.Empty(t, r.Content)
	}

	r, err = f.Read("long.txt", ReadOptions{})
	require.NoError(t, err)
	require.True(t, r.Truncated)
	require.Equal(t, MaxReadBytes, len(r.Content))
	require.Equal(t, int64(1), r.NextOffset)
	r, err = f.Read("long.txt", ReadOptions{Offset: r.NextOffset})
	require.NoError(t, err)
	require.Equal(t, "after\n", r.Content)

	r, err = f.Read("long.txt", ReadOptions{MaxOutput: 1000})
	require.NoError(t, err)
	b, _ := json.Marshal(r)
	require.LessOrEqual(t, len(b), 1000)

	r, err = f.Read("link", ReadOptions{})
	require.NoError(t, err)
	require.Equal(t, "one\ntwo\nthree\nfour", r.Content)
	r, err = f.Read("dir/up.txt", ReadOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(4), r.Count)

	r, err = f.Read("empty.txt", ReadOptions{})
	require.NoError(t, err)
	require.True(t, r.EOF)
	require.Equal(t, int64(0), r.Count)

	_, err = f.Read("escape", ReadOptions{})
	require.Equal(t, CodeEscapes, code(t, err))
	_, err = f.Read("dir", ReadOptions{})
	require.Equal(t, CodeIsDir, code(t, err))
	_, err = f.Read("nope", ReadOptions{})
	require.Equal(t, CodeNotFound, code(t, err))
	_, err = f.Read("../a.txt", ReadOptions{})
	require.Equal(t, CodeInvalid, code(t, err))
	_, err = f.Read("/etc/passwd", ReadOptions{})
	require.Equal(t, CodeInvalid, code(t, err))
}

func TestReadManyLines(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		b.WriteString("line\n")
	}
	f, _ := openFS(t, map[string]string{"many": b.String()})
	r, err := f.Read("many", ReadOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(DefaultReadLines), r.Count)
	require.Equal(t, int64(DefaultReadLines), r.NextOffset)
	require.False(t, r.EOF)
	r, err = f.Read("many", ReadOptions{Offset: 4000})
	require.NoError(t, err)
	require.Equal(t, int64(1000), r.Count)
	require.True(t, r.EOF)
}

func TestList(t *testing.T) {
	f, _ := openFS(t, map[string]string{"b": "12", "a/": "", "l": "-> b", "a/x": ""})
	r, err := f.List(".", 0)
	require.NoError(t, err)
	require.Equal(t, []Entry{{Path: "a", Type: "dir"}, {Path: "b", Type: "file", Size: 2}, {Path: "l", Type: "symlink"}}, r.Entries)
	r, err = f.List("a", 0)
	require.NoError(t, err)
	require.Equal(t, []Entry{{Path: "a/x", Type: "file"}}, r.Entries)
	r, err = f.List(".", 2)
	require.NoError(t, err)
	require.True(t, r.Truncated)
	_, err = f.List("b", 0)
	require.Equal(t, CodeNotDir, code(t, err))
}

func TestGlob(t *testing.T) {
	f, _ := openFS(t, map[string]string{
		"README.md": "", "docs/a.md": "", "docs/sub/b.md": "", "docs/sub/c.txt": "",
		"src/x.go": "", "src/deep/y.go": "", "loop": "-> .", "docs/link": "-> ../src",
	})
	match := func(p string) []string {
		r, err := f.Glob(p, 0)
		require.NoError(t, err, p)
		var out []string
		for _, m := range r.Matches {
			out = append(out, m.Path)
		}
		return out
	}
	require.Equal(t, []string{"README.md", "docs/a.md", "docs/sub/b.md"}, match("**/*.md"))
	require.Equal(t, []string{"docs/a.md"}, match("docs/*.md"))
	require.Equal(t, []string{"docs/a.md", "docs/link", "docs/sub", "docs/sub/b.md", "docs/sub/c.txt"}, match("docs/**"))
	require.Equal(t, []string{"src/deep/y.go", "src/x.go"}, match("src/**/*.go"))
	require.Equal(t, []string{"README.md"}, match("README.md"))
	require.Empty(t, match("nope/*.md"))
	r, err := f.Glob("**/*.md", 1)
	require.NoError(t, err)
	require.True(t, r.Truncated)
	_, err = f.Glob("../*", 0)
	require.Equal(t, CodeInvalid, code(t, err))
}

func TestGlobPolicy(t *testing.T) {
	for _, p := range []string{"**", "**/*", "*/**", "**/**", "**/*.*", "**/.*", "**/[a-z]*", "**/?"} {
		require.True(t, RootWide(p), p)
	}
	for _, p := range []string{"**/*.md", "src/**", "docs/*", "*", "*.md", "**/README*", "**/é*"} {
		require.False(t, RootWide(p), p)
	}
	for _, p := range []string{".git", "a/.git/*", "**/.git/**", ".g*", ".*", "x/.[Gg]it", ".GIT", "**/.Git",
		".git.", ".git ", "a/.ｇｉｔ/*", "**/．git/**", ".GIT::$INDEX_ALLOCATION/x", ".ｇ*"} {
		require.True(t, TargetsGit(p), p)
	}
	for _, p := range []string{"*", "**/*.md", "?git", "*git", "*.*", "docs/*", "gitdocs/*", ".gitignore", "x.git", "ｇｉｔ/*"} {
		require.False(t, TargetsGit(p), p)
	}
	for _, p := range []string{"", "/etc/*", "a//b", "./a", "a/../b", `a\*`, "[", "a/[/b"} {
		require.NotEmpty(t, CheckGlobSyntax(p), p)
	}
	comps, lit := SplitGlob("docs/sub/*.md")
	require.Equal(t, []string{"docs", "sub", "*.md"}, comps)
	require.Equal(t, 2, lit)
}

func TestSearch(t *testing.T) {
	f, _ := openFS(t, map[string]string{
		"a.go":       "package a\n// TODO: one\nfunc x() {}\n",
		"sub/b.go":   "// todo two\n",
		"sub/c.txt":  "TODO three\n",
		"bin":        "TODO\x00",
		"link":       "-> a.go",
		"sub/up":     "-> ..",
		"large.txt":  strings.Repeat("TODO\n", MaxSearchFileBytes/5+1),
		"crlf.txt":   "TODO crlf\r\n",
		"wide.txt":   strings.Repeat("é", 400) + "TODO\n",
		"sub/d/e.go": "x\nTODO deep\n",
	})
	r, err := f.Search("TODO", ".", SearchOptions{})
	require.NoError(t, err)
	var got []string
	for _, m := range r.Matches {
		got = append(got, m.Path+":"+string(rune('0'+m.Line)))
	}
	require.Equal(t, []string{"a.go:2", "crlf.txt:1", "sub/c.txt:1", "sub/d/e.go:2", "wide.txt:1"}, got)
	require.Equal(t, 1, r.SkippedBinary)
	require.Equal(t, 1, r.SkippedLarge)
	require.Equal(t, "TODO crlf", r.Matches[1].Text)
	require.True(t, strings.HasSuffix(r.Matches[4].Text, "…"))
	require.LessOrEqual(t, len(r.Matches[4].Text), MaxMatchText+len("…"))

	r, err = f.Search("todo", "sub", SearchOptions{IgnoreCase: true, Include: "*.go"})
	require.NoError(t, err)
	require.Len(t, r.Matches, 2)

	r, err = f.Search("TODO", "a.go", SearchOptions{})
	require.NoError(t, err)
	require.Len(t, r.Matches, 1)

	r, err = f.Search("TODO", ".", SearchOptions{MaxResults: 2})
	require.NoError(t, err)
	require.Len(t, r.Matches, 2)
	require.True(t, r.Truncated)

	_, err = f.Search("(", ".", SearchOptions{})
	require.Equal(t, CodeInvalid, code(t, err))
	_, err = f.Search("x", ".", SearchOptions{Include: "a/*.go"})
	require.Equal(t, CodeInvalid, code(t, err))
}

func TestWriteEdit(t *testing.T) {
	f, root := openFS(t, map[string]string{
		"w/page.md":  "hello world\n",
		"w/dup.md":   "a a\n",
		"w/link.md":  "-> page.md",
		"w/ldir":     "-> ../elsewhere",
		"elsewhere/": "",
	})
	r, err := f.Write("w/new/deep/n.md", []byte("new\n"), "")
	require.NoError(t, err)
	require.True(t, r.Created)
	require.Equal(t, sha256Hex([]byte("new\n")), r.SHA256)
	data, _ := os.ReadFile(filepath.Join(root, "w/new/deep/n.md"))
	require.Equal(t, "new\n", string(data))

	cur := sha256Hex([]byte("hello world\n"))
	r, err = f.Write("w/page.md", []byte("v2\n"), cur)
	require.NoError(t, err)
	require.False(t, r.Created)
	require.Equal(t, cur, r.PreviousSHA256)
	_, err = f.Write("w/page.md", []byte("v3\n"), cur)
	require.Equal(t, CodeConflict, code(t, err))
	_, err = f.Write("w/absent.md", []byte("x"), cur)
	require.Equal(t, CodeConflict, code(t, err))

	_, err = f.Write("w/link.md", []byte("x"), "")
	require.Equal(t, CodeSymlink, code(t, err))
	_, err = f.Write("w/ldir/x.md", []byte("x"), "")
	require.Equal(t, CodeSymlink, code(t, err))
	_, err = os.Stat(filepath.Join(root, "elsewhere/x.md"))
	require.True(t, os.IsNotExist(err))
	_, err = f.Write("w", []byte("x"), "")
	require.Equal(t, CodeIsDir, code(t, err))

	v2 := sha256Hex([]byte("v2\n"))
	e, err := f.Edit("w/page.md", []byte("v2"), []byte("v3"), v2, false)
	require.NoError(t, err)
	require.Equal(t, 1, e.Replacements)
	data, _ = os.ReadFile(filepath.Join(root, "w/page.md"))
	require.Equal(t, "v3\n", string(data))
	_, err = f.Edit("w/page.md", []byte("v3"), []byte("v4"), v2, false)
	require.Equal(t, CodeConflict, code(t, err), "a stale revision is a conflict")
	v3 := sha256Hex([]byte("v3\n"))
	_, err = f.Edit("w/page.md", []byte("zzz"), []byte("v4"), v3, false)
	require.Equal(t, CodeNoMatch, code(t, err))
	_, err = f.Edit("w/page.md", []byte("v3"), []byte("v4"), "", false)
	require.Equal(t, CodeInvalid, code(t, err))
	dup := sha256Hex([]byte("a a\n"))
	_, err = f.Edit("w/dup.md", []byte("a"), []byte("b"), dup, false)
	require.Equal(t, CodeAmbiguous, code(t, err))
	e, err = f.Edit("w/dup.md", []byte("a"), []byte("b"), dup, true)
	require.NoError(t, err)
	require.Equal(t, 2, e.Replacements)
	_, err = f.Edit("w/link.md", []byte("v3"), []byte("v4"), v3, false)
	require.Equal(t, CodeSymlink, code(t, err))
	_, err = f.Edit("w/missing.md", []byte("a"), []byte("b"), dup, false)
	require.Equal(t, CodeNotFound, code(t, err))
}

func TestRunCommandLine(t *testing.T) {
	root := t.TempDir()
	tree(t, root, map[string]string{"a.md": "x\n", "stage/c": "content\n", "d/1": "", "d/2": "", "d/3": "", "d/4": "", "e1": "", "e2": "", "e3": "", "e4": "", "e5": "", "e6": "", "e7": ""})
	call := func(args ...string) Response {
		var out, errb bytes.Buffer
		require.Equal(t, 0, run(root, args, &out, &errb), errb.String())
		var r Response
		require.NoError(t, json.Unmarshal(out.Bytes(), &r), out.String())
		return r
	}
	r := call("read", "--", "a.md")
	require.Nil(t, r.Error)
	var rr ReadResult
	require.NoError(t, json.Unmarshal(r.Result, &rr))
	require.Equal(t, "x\n", rr.Content)
	r = call("write", "--content", filepath.Join(root, "stage/c"), "--", "b.md")
	require.Nil(t, r.Error)
	r = call("list", "--max-output", "200", "--", ".")
	var lr ListResult
	require.NoError(t, json.Unmarshal(r.Result, &lr))
	require.True(t, lr.Truncated)
	require.LessOrEqual(t, len(r.Result), 200)
	r = call("read", "--", "nope")
	require.Equal(t, CodeNotFound, r.Error.Code)
	var out, errb bytes.Buffer
	require.Equal(t, 2, run(root, []string{"chmod", "--", "a.md"}, &out, &errb))
	require.Equal(t, 2, run(root, []string{"read", "a", "b"}, &out, &errb))
	require.Equal(t, 0, Main([]string{"read", "--", "a.md"}, &out, &errb))
	require.Contains(t, out.String(), CodeNotContainer)
}
