package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/fsop"
	"github.com/stretchr/testify/require"
)

// ftRepo is the file tools' hostile tree: hidden paths (ignore rules,
// forced agent config, .git, .claims), symlink aliases into hidden paths
// and into a sibling agent's subtree, a binary file.
func ftRepo(t *testing.T) string {
	return newRepo(t, map[string]string{
		"README.md":                       "# demo\nhello\nworld\n",
		".openwikiignore":                 "secrets/\n*.pem\n",
		"secrets/key.txt":                 "SECRET-KEY-1",
		"docs/a.md":                       "alpha TODO one\n",
		"docs/b.md":                       "beta\n",
		"docs/cert.pem":                   "SECRET-PEM-2",
		"docs/keys":                       "-> ../secrets",
		"docs/alias.md":                   "-> a.md",
		"bin.dat":                         "\x00\x01\x02binary",
		"AGENTS.md":                       "SECRET-INJECTION-3",
		".git/config":                     "SECRET-GIT-4",
		"openwiki/index.md":               "# index\n",
		"openwiki/pages/p.md":             "page\n",
		"openwiki/.claims/p.lock":         "SECRET-CLAIM-5",
		"openwiki/agents/alice/notes.md":  "alice notes\n",
		"openwiki/agents/bob/notes.md":    "bob notes\n",
		"openwiki/agents/alice/to-bob":    "-> ../bob",
		"openwiki/agents/alice/to-secret": "-> ../../../secrets/key.txt",
	})
}

var ftSecrets = []string{"SECRET-KEY-1", "SECRET-PEM-2", "SECRET-INJECTION-3", "SECRET-GIT-4", "SECRET-CLAIM-5"}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// requireRefused checks err is a refusal whose rule contains rule.
func requireRefused(t *testing.T, err error, rule string) {
	t.Helper()
	var r *allowlist.Refusal
	require.True(t, errors.As(err, &r), "want a refusal naming %q, got %v", rule, err)
	require.Contains(t, r.Rule, rule)
	require.ErrorIs(t, err, errdefs.ErrPermissionDenied)
}

func requireFileError(t *testing.T, err error, code string) {
	t.Helper()
	var fe *sandbox.FileError
	require.True(t, errors.As(err, &fe), "want a file error %s, got %v", code, err)
	require.Equal(t, code, fe.Code, fe.Message)
}

func paths(entries []fsop.Entry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Path)
	}
	return out
}

func TestFileToolRead(t *testing.T) {
	s := newSession(t, ftRepo(t))
	ctx := context.Background()

	r, err := s.Read(ctx, "README.md", sandbox.ReadOptions{})
	require.NoError(t, err)
	require.Equal(t, "# demo\nhello\nworld\n", r.Content)
	require.Equal(t, sha("# demo\nhello\nworld\n"), r.SHA256)
	require.True(t, r.EOF)

	r, err = s.Read(ctx, "./docs//../README.md", sandbox.ReadOptions{Offset: 1, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, "hello\n", r.Content)
	require.Equal(t, "README.md", r.Path)
	require.Equal(t, int64(2), r.NextOffset)

	r, err = s.Read(ctx, "README.md", sandbox.ReadOptions{Bytes: true, Offset: 2, Limit: 4})
	require.NoError(t, err)
	require.Equal(t, "demo", r.Content)

	r, err = s.Read(ctx, "docs/alias.md", sandbox.ReadOptions{})
	require.NoError(t, err, "a symlink to a visible file is an alias")
	require.Equal(t, "alpha TODO one\n", r.Content)

	r, err = s.Read(ctx, "bin.dat", sandbox.ReadOptions{})
	require.NoError(t, err)
	require.True(t, r.Binary)
	require.Empty(t, r.Content)

	for p, rule := range map[string]string{
		"secrets/key.txt":                 ".openwikiignore:1 hides secrets/",
		"docs/../secrets/key.txt":         ".openwikiignore:1 hides secrets/",
		"docs/keys/key.txt":               ".openwikiignore:1 hides secrets/",
		"docs/cert.pem":                   ".openwikiignore:2 hides",
		"AGENTS.md":                       "profile hides agent config AGENTS.md",
		".git/config":                     ".git",
		"openwiki/.claims/p.lock":         "owned by corral",
		"/etc/passwd":                     "absolute paths are not allowed",
		"../outside":                      "leaves the repository",
		"~/x":                             "home-directory",
		"openwiki/agents/alice/to-secret": "hides secrets/",
	} {
		_, err := s.Read(ctx, p, sandbox.ReadOptions{})
		requireRefused(t, err, rule)
	}

	_, err = s.Read(ctx, "nope.md", sandbox.ReadOptions{})
	requireFileError(t, err, fsop.CodeNotFound)
	require.ErrorIs(t, err, errdefs.ErrNotFound)
	_, err = s.Read(ctx, "docs", sandbox.ReadOptions{})
	requireFileError(t, err, fsop.CodeIsDir)
}

func TestFileToolReadLarge(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB, one line
	many := strings.Repeat("a line of text\n", 10000)
	s := newSession(t, newRepo(t, map[string]string{"big.txt": big, "many.txt": many, "openwiki/x.md": ""}))
	ctx := context.Background()
	r, err := s.Read(ctx, "big.txt", sandbox.ReadOptions{})
	require.NoError(t, err)
	require.True(t, r.Truncated)
	require.Equal(t, fsop.MaxReadBytes, len(r.Content))
	require.Equal(t, int64(len(big)), r.Size)
	r, err = s.Read(ctx, "big.txt", sandbox.ReadOptions{Bytes: true, Offset: 1 << 20, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, r.Content)
	require.True(t, r.EOF)
	r, err = s.Read(ctx, "many.txt", sandbox.ReadOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(fsop.DefaultReadLines), r.Count)
	require.False(t, r.EOF)
	r, err = s.Read(ctx, "many.txt", sandbox.ReadOptions{Offset: 9999})
	require.NoError(t, err)
	require.Equal(t, "a line of text\n", r.Content)
	require.True(t, r.EOF)
}

func TestFileToolDiscovery(t *testing.T) {
	s := newSession(t, ftRepo(t))
	ctx := context.Background()

	l, err := s.List(ctx, ".")
	require.NoError(t, err)
	require.Equal(t, []string{".openwikiignore", "README.md", "bin.dat", "docs", "openwiki"}, paths(l.Entries))
	l, err = s.List(ctx, "docs")
	require.NoError(t, err)
	require.Equal(t, []string{"docs/a.md", "docs/alias.md", "docs/b.md", "docs/keys"}, paths(l.Entries))
	l, err = s.List(ctx, "openwiki")
	require.NoError(t, err)
	require.Equal(t, []string{"openwiki/agents", "openwiki/index.md", "openwiki/pages"}, paths(l.Entries))
	_, err = s.List(ctx, "secrets")
	requireRefused(t, err, ".openwikiignore:1 hides secrets/")
	_, err = s.List(ctx, "docs/keys")
	requireRefused(t, err, "hides secrets/")

	g, err := s.Glob(ctx, "**/*.md", 0)
	require.NoError(t, err)
	require.Equal(t, []string{"README.md", "docs/a.md", "docs/alias.md", "docs/b.md", "openwiki/agents/alice/notes.md",
		"openwiki/agents/bob/notes.md", "openwiki/index.md", "openwiki/pages/p.md"}, paths(g.Matches))
	g, err = s.Glob(ctx, "**/*.pem", 0)
	require.NoError(t, err)
	require.Empty(t, g.Matches, "discovery never shows a hidden path")
	g, err = s.Glob(ctx, "docs/*", 0)
	require.NoError(t, err)
	require.NotContains(t, paths(g.Matches), "docs/cert.pem")
	g, err = s.Glob(ctx, "**/*.lock", 0)
	require.NoError(t, err)
	require.Empty(t, g.Matches)

	for p, rule := range map[string]string{
		"**":                 "root-wide",
		"**/*":               "root-wide",
		"*/**":               "root-wide",
		"**/*.*":             "root-wide",
		".git/*":             ".git",
		"**/.git/**":         ".git",
		"**/.g*":             ".git",
		"secrets/*":          ".openwikiignore:1 hides secrets/",
		"docs/keys/*":        "hides secrets/",
		"/etc/*":             "absolute",
		"../*":               "leaves the repository",
		"docs/../*.md":       "canonical",
		"AGENTS.md":          "profile hides agent config",
		"openwiki/.claims/*": "owned by corral",
	} {
		_, err := s.Glob(ctx, p, 0)
		requireRefused(t, err, rule)
	}

	m, err := s.Search(ctx, "SECRET", ".", sandbox.SearchOptions{})
	require.NoError(t, err)
	require.Empty(t, m.Matches, "search never reads a hidden file")
	m, err = s.Search(ctx, "todo", ".", sandbox.SearchOptions{IgnoreCase: true})
	require.NoError(t, err)
	require.Len(t, m.Matches, 1)
	require.Equal(t, fsop.Match{Path: "docs/a.md", Line: 1, Text: "alpha TODO one"}, m.Matches[0])
	m, err = s.Search(ctx, "notes", "openwiki", sandbox.SearchOptions{Include: "*.md"})
	require.NoError(t, err)
	require.Len(t, m.Matches, 2)
	_, err = s.Search(ctx, "SECRET", "secrets", sandbox.SearchOptions{})
	requireRefused(t, err, ".openwikiignore:1 hides secrets/")
	_, err = s.Search(ctx, "x", ".git", sandbox.SearchOptions{})
	requireRefused(t, err, ".git")
	_, err = s.Search(ctx, "(", ".", sandbox.SearchOptions{})
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)

	// A file made under an ignored name (the policy refuses that; here it
	// is made without the policy) is not discovered either, and rejects
	// the change set.
	res := sh(t, s, "cp docs/a.md openwiki/made.pem")
	require.Equal(t, 0, res.ExitCode, string(res.Stderr))
	l, err = s.List(ctx, "openwiki")
	require.NoError(t, err)
	require.NotContains(t, paths(l.Entries), "openwiki/made.pem")
	g, err = s.Glob(ctx, "openwiki/*.pem", 0)
	require.NoError(t, err)
	require.Empty(t, g.Matches)
	cs, err := s.Changes()
	require.NoError(t, err)
	require.Error(t, cs.Err())
}

func TestFileToolWriteEdit(t *testing.T) {
	repo := ftRepo(t)
	before := testutil.Snapshot(t, repo)
	s := newSession(t, repo)
	ctx := context.Background()

	w, err := s.Write(ctx, "openwiki/guides/new/page.md", []byte("# New\n\nfirst\n"), "")
	require.NoError(t, err)
	require.True(t, w.Created)
	require.Equal(t, sha("# New\n\nfirst\n"), w.SHA256)
	// Each invocation is a fresh container; the write is there.
	require.Equal(t, "# New\n\nfirst\n", out(run(t, s, "cat", "openwiki/guides/new/page.md")))

	r, err := s.Read(ctx, "openwiki/index.md", sandbox.ReadOptions{})
	require.NoError(t, err)
	e, err := s.Edit(ctx, "openwiki/index.md", "# index", "# Index\n\n- [New](guides/new/page.md)", r.SHA256, false)
	require.NoError(t, err)
	require.Equal(t, r.SHA256, e.PreviousSHA256)
	_, err = s.Edit(ctx, "openwiki/index.md", "Index", "INDEX", r.SHA256, false)
	requireFileError(t, err, fsop.CodeConflict)
	require.ErrorIs(t, err, errdefs.ErrConflict, "a stale revision is a conflict")
	_, err = s.Edit(ctx, "openwiki/index.md", "absent", "x", e.SHA256, false)
	requireFileError(t, err, fsop.CodeNoMatch)
	_, err = s.Edit(ctx, "openwiki/index.md", "Index", "x", "abc", false)
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	_, err = s.Write(ctx, "openwiki/index.md", []byte("x"), r.SHA256)
	requireFileError(t, err, fsop.CodeConflict)

	// Content larger than an argv string can carry goes through staging.
	large := strings.Repeat("line of documentation text\n", 20000)
	w, err = s.Write(ctx, "openwiki/large.md", []byte(large), "")
	require.NoError(t, err)
	require.Equal(t, int64(len(large)), w.Size)

	for p, rule := range map[string]string{
		"README.md":                "outside the write scope openwiki/",
		"openwiki/../README.md":    "outside the write scope openwiki/",
		"/workspace/openwiki/x.md": "absolute paths are not allowed",
		"openwiki/.claims/p.lock":  "owned by corral",
		"openwiki/.git/config":     ".git",
		"openwiki/.openwikiignore": "ignore files",
		"openwiki/a/.gitignore":    "ignore files",
		"openwiki/.claims./p.lock": "openwiki/.claims. is owned by corral",
		"openwiki/．claims/p.lock":  "openwiki/．claims is owned by corral",
		"openwiki/.ｇｉｔ/config":     "openwiki/.ｇｉｔ is owned by git",
		"openwiki/x.pem":           ".openwikiignore:2 hides",
		"docs/keys/new.txt":        "hides secrets/",
	} {
		_, err := s.Write(ctx, p, []byte("x"), "")
		requireRefused(t, err, rule)
	}
	_, err = s.Write(ctx, "openwiki/bin.md", []byte("a\x00b"), "")
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	_, err = s.Edit(ctx, "README.md", "hello", "bye", sha("# demo\nhello\nworld\n"), false)
	requireRefused(t, err, "outside the write scope")

	cs, err := s.Changes()
	require.NoError(t, err)
	require.NoError(t, cs.Err())
	var changed []string
	for _, c := range cs.Changes {
		changed = append(changed, string(c.Kind)+" "+c.Path)
	}
	require.Equal(t, []string{"create openwiki/guides/new/page.md", "modify openwiki/index.md", "create openwiki/large.md"}, changed)
	require.Equal(t, before, testutil.Snapshot(t, repo), "the repository is never written")
}

func TestFileToolAgentSubtrees(t *testing.T) {
	_, err := sandbox.NewPolicy(sandbox.SessionConfig{Repo: t.TempDir(), Profile: docsProfile(t), AgentID: "alice", Page: "openwiki/x.md"})
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	for _, id := range []string{"", "Alice", "../bob", "a/b", "-a", "a b", "a.b", strings.Repeat("a", 64), "é"} {
		require.ErrorIs(t, allowlist.ValidAgentID(id), errdefs.ErrInvalidArgument, id)
	}
	require.NoError(t, allowlist.ValidAgentID("agent_7-x"))

	repo := ftRepo(t)
	s := newSession(t, repo, func(c *sandbox.SessionConfig) { c.AgentID = "alice" })
	require.Equal(t, "openwiki/agents/alice", s.Scope.Dir)
	ctx := context.Background()

	_, err = s.Write(ctx, "openwiki/agents/alice/research.md", []byte("found\n"), "")
	require.NoError(t, err)
	r, err := s.Read(ctx, "openwiki/agents/bob/notes.md", sandbox.ReadOptions{})
	require.NoError(t, err, "a sibling's subtree stays readable")
	require.Equal(t, "bob notes\n", r.Content)
	for p, rule := range map[string]string{
		"openwiki/agents/bob/notes.md":      "outside the write scope openwiki/agents/alice/",
		"openwiki/agents/bob/new.md":        "outside the write scope openwiki/agents/alice/",
		"openwiki/agents/alice/../bob/x.md": "outside the write scope openwiki/agents/alice/",
		"openwiki/agents/alice/to-bob/x.md": "resolves to openwiki/agents/bob/x.md",
		"openwiki/agents/alice-evil/x.md":   "outside the write scope openwiki/agents/alice/",
		"openwiki/index.md":                 "outside the write scope openwiki/agents/alice/",
		"openwiki/agents/alice/to-secret":   "hides secrets/",
	} {
		_, err := s.Write(ctx, p, []byte("x"), "")
		requireRefused(t, err, rule)
	}
	_, err = s.Edit(ctx, "openwiki/agents/bob/notes.md", "bob", "alice", sha("bob notes\n"), false)
	requireRefused(t, err, "outside the write scope")

	// The kernel agrees where the policy is bypassed: only alice's
	// subtree is writable in the container.
	res := sh(t, s, "echo x > openwiki/agents/bob/notes.md; echo x > openwiki/index.md; echo ok > openwiki/agents/alice/k.md && echo wrote")
	require.Contains(t, string(res.Stderr), "Read-only file system")
	require.Contains(t, out(res), "wrote")

	cs, err := s.Changes()
	require.NoError(t, err)
	require.NoError(t, cs.Err())
	var changed []string
	for _, c := range cs.Changes {
		changed = append(changed, c.Path)
	}
	require.Equal(t, []string{"openwiki/agents/alice/k.md", "openwiki/agents/alice/research.md"}, changed)
}

func TestFileToolReadOnlyAndPage(t *testing.T) {
	ctx := context.Background()
	ro := newSession(t, ftRepo(t), readOnly())
	_, err := ro.Read(ctx, "openwiki/index.md", sandbox.ReadOptions{})
	require.NoError(t, err)
	_, err = ro.Write(ctx, "openwiki/index.md", []byte("x"), "")
	requireRefused(t, err, "read-only")
	_, err = ro.Edit(ctx, "openwiki/index.md", "index", "x", sha("# index\n"), false)
	requireRefused(t, err, "read-only")

	pg := newSession(t, ftRepo(t), withPage("openwiki/pages/p.md"))
	r, err := pg.Read(ctx, "openwiki/pages/p.md", sandbox.ReadOptions{})
	require.NoError(t, err)
	_, err = pg.Edit(ctx, "openwiki/pages/p.md", "page", "the page", r.SHA256, false)
	require.NoError(t, err)
	_, err = pg.Write(ctx, "openwiki/pages/other.md", []byte("x"), "")
	requireRefused(t, err, "only the assigned page openwiki/pages/p.md")
	_, err = pg.Write(ctx, "openwiki/index.md", []byte("x"), "")
	requireRefused(t, err, "only the assigned page")
	cs, err := pg.Changes()
	require.NoError(t, err)
	require.Len(t, cs.Changes, 1)
	require.Equal(t, "the page\n", string(cs.Changes[0].After))
}

// TestFileToolKernelBoundary runs the in-container helper without the
// host's policy: the mounts alone refuse what the policy refuses.
func TestFileToolKernelBoundary(t *testing.T) {
	s := newSession(t, ftRepo(t), func(c *sandbox.SessionConfig) { c.AgentID = "alice" })
	helper := func(args ...string) fsop.Response {
		t.Helper()
		res := inBox(t, s, append([]string{"corral", "fs"}, args...)...)
		require.Equal(t, 0, res.ExitCode, string(res.Stderr))
		var r fsop.Response
		require.NoError(t, json.Unmarshal(res.Stdout, &r), string(res.Stdout))
		return r
	}
	for _, p := range []string{"README.md", "openwiki/index.md", "openwiki/agents/bob/x.md", "newdir/x.md"} {
		r := helper("write", "--content", "/dev/null", "--", p)
		require.NotNil(t, r.Error, p)
		require.Contains(t, []string{fsop.CodeReadOnly, fsop.CodePermission}, r.Error.Code, r.Error.Message)
	}
	r := helper("write", "--content", "/dev/null", "--", "openwiki/agents/alice/to-bob/x.md")
	require.NotNil(t, r.Error)
	require.Equal(t, fsop.CodeSymlink, r.Error.Code)
	for _, p := range []string{"secrets/key.txt", "docs/cert.pem", "AGENTS.md", ".git/config", "openwiki/.claims/p.lock", "docs/keys/key.txt"} {
		r := helper("read", "--", p)
		require.NotNil(t, r.Error, p)
		require.Equal(t, fsop.CodeNotFound, r.Error.Code, p)
	}
	r = helper("search", "--", "SECRET", ".")
	require.Nil(t, r.Error)
	for _, sec := range ftSecrets {
		require.NotContains(t, string(r.Result), sec)
	}
	r = helper("glob", "--", "**")
	require.Nil(t, r.Error)
	require.NotContains(t, string(r.Result), "secrets")
	require.NotContains(t, string(r.Result), ".git")
}

// BenchmarkFileTool measures one file-tool call end to end (policy, a
// fresh container running corral fs, the answer decoded).
func BenchmarkFileTool(b *testing.B) {
	e := testutil.Executor(b)
	repo := b.TempDir()
	testutil.Tree(b, repo, map[string]string{"README.md": "# bench\n", "openwiki/index.md": "# index\n", "src/a.go": "package a // TODO\n"})
	prof, err := profiles.Load("docs")
	require.NoError(b, err)
	s, err := e.NewSession(context.Background(), sandbox.SessionConfig{Repo: repo, Profile: prof})
	require.NoError(b, err)
	defer s.Close()
	ctx := context.Background()
	for name, op := range map[string]func() error{
		"read":     func() error { _, err := s.Read(ctx, "README.md", sandbox.ReadOptions{}); return err },
		"exec-cat": func() error { _, err := s.Exec(ctx, []string{"cat", "README.md"}, nil, nil); return err },
		"search":   func() error { _, err := s.Search(ctx, "TODO", ".", sandbox.SearchOptions{}); return err },
		"write":    func() error { _, err := s.Write(ctx, "openwiki/b.md", []byte("# b\n"), ""); return err },
	} {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				require.NoError(b, op())
			}
		})
	}
}
