package mcpserver

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/version"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/fsop"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// fake records calls and refuses paths under "secret".
type fake struct{ calls []string }

func (f *fake) check(p string) error {
	if strings.HasPrefix(p, "secret") {
		return &allowlist.Refusal{Kind: allowlist.KindPath, Index: -1, Token: p, Rule: ".openwikiignore:1 hides secret/"}
	}
	return nil
}

func (f *fake) Read(_ context.Context, p string, o sandbox.ReadOptions) (*fsop.ReadResult, error) {
	f.calls = append(f.calls, "read "+p)
	if err := f.check(p); err != nil {
		return nil, err
	}
	return &fsop.ReadResult{Path: p, Size: 3, SHA256: "abc", Unit: "lines", Count: 1, NextOffset: 1, EOF: true, Content: "hi\n"}, nil
}
func (f *fake) List(_ context.Context, p string) (*fsop.ListResult, error) {
	f.calls = append(f.calls, "list "+p)
	return &fsop.ListResult{Path: p, Entries: []fsop.Entry{{Path: "a", Type: "file"}}}, nil
}
func (f *fake) Glob(_ context.Context, p string, max int) (*fsop.GlobResult, error) {
	f.calls = append(f.calls, "glob "+p)
	return &fsop.GlobResult{Pattern: p, Matches: []fsop.Entry{}}, nil
}
func (f *fake) Search(_ context.Context, e, p string, o sandbox.SearchOptions) (*fsop.SearchResult, error) {
	f.calls = append(f.calls, "search "+e+" "+p)
	return &fsop.SearchResult{Pattern: e, Path: p, Matches: []fsop.Match{}}, nil
}
func (f *fake) Write(_ context.Context, p string, c []byte, sha string) (*fsop.WriteResult, error) {
	f.calls = append(f.calls, "write "+p+" "+string(c))
	return &fsop.WriteResult{Path: p, Created: true, Size: int64(len(c))}, nil
}
func (f *fake) Edit(_ context.Context, p, o, n, sha string, all bool) (*fsop.WriteResult, error) {
	f.calls = append(f.calls, "edit "+p)
	return &fsop.WriteResult{Path: p}, nil
}
func (f *fake) Exec(_ context.Context, argv []string) (*sandbox.Result, error) {
	f.calls = append(f.calls, "exec "+strings.Join(argv, " "))
	if argv[0] == "sh" {
		return nil, &allowlist.Refusal{Kind: allowlist.KindCmd, Index: 0, Token: "sh", Rule: "sh is never allowed"}
	}
	return &sandbox.Result{Argv: argv, Stdout: []byte("out")}, nil
}
func (f *fake) Changes(context.Context) (*changeset.Set, error) {
	f.calls = append(f.calls, "changes")
	return &changeset.Set{}, nil
}

func (f *fake) CallChanges(context.Context) (*changeset.Set, []changeset.Problem, error) {
	f.calls = append(f.calls, "call changes")
	return &changeset.Set{}, nil, nil
}

func connect(t *testing.T, s Session, o Options) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	srv := NewWith(s, o)
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

func names(t *testing.T, cs *mcp.ClientSession) []string {
	res, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var out []string
	for _, tool := range res.Tools {
		out = append(out, tool.Name)
	}
	sort.Strings(out)
	return out
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestTools(t *testing.T) {
	f := &fake{}
	cs := connect(t, f, Options{Scope: "openwiki/"})
	want := append([]string(nil), ToolNames...)
	sort.Strings(want)
	require.Equal(t, want, names(t, cs))
	require.Equal(t, []string{"diff", "exec", "glob", "list", "read", "search"}, names(t, connect(t, &fake{}, Options{ReadOnly: true})))

	ctx := context.Background()
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err)
		return res
	}
	res := call("read", map[string]any{"path": "a.md"})
	require.False(t, res.IsError)
	require.Equal(t, "a.md: 3 bytes, sha256 abc; lines 1-1 (end of file)\nhi\n", text(res))
	res = call("read", map[string]any{"path": "secret/k"})
	require.True(t, res.IsError)
	require.Equal(t, `refused (PATH): "secret/k": .openwikiignore:1 hides secret/`, text(res))
	res = call("read", map[string]any{"path": "a.md", "unit": "pages"})
	require.True(t, res.IsError)
	res = call("read", map[string]any{"path": "a.md", "repo": "/"})
	require.True(t, res.IsError, "no property beyond the schema")
	res = call("exec", map[string]any{"argv": []string{"sh", "-c", "id"}})
	require.True(t, res.IsError)
	require.Equal(t, `refused (CMD): argv[0] "sh": sh is never allowed`, text(res))
	res = call("exec", map[string]any{"argv": []string{}})
	require.True(t, res.IsError)
	call("list", map[string]any{})
	call("search", map[string]any{"pattern": "x"})
	call("write", map[string]any{"path": "openwiki/a.md", "content": "c"})
	res = call("diff", map[string]any{"format": "patch"})
	require.Equal(t, "no changes\n", text(res))
	res = call("diff", map[string]any{"format": "xml"})
	require.True(t, res.IsError)
	require.Equal(t, []string{"read a.md", "read secret/k", "exec sh -c id", "list .", "search x .", "write openwiki/a.md c", "changes"}, f.calls)

	f.calls = nil
	res = call("exec", map[string]any{"argv": []string{"ls"}})
	require.False(t, res.IsError)
	require.Equal(t, []string{"exec ls", "call changes"}, f.calls)
	require.Equal(t, map[string]any{"argv": []any{"ls"}, "exit_code": float64(0), "stdout": "out", "stderr": "", "stdout_truncated": false,
		"stderr_truncated": false, "limits_hit": []any{}, "violations": []any{}}, res.StructuredContent)
}

// TestServerInfoVersion: the server reports corral's one version string
// (internal/version) unless the launcher names another.
func TestServerInfoVersion(t *testing.T) {
	cs := connect(t, &fake{}, Options{})
	require.Equal(t, "corral", cs.InitializeResult().ServerInfo.Name)
	require.Equal(t, version.String(), cs.InitializeResult().ServerInfo.Version)
}
