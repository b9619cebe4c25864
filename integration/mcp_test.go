package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/review"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a bytes.Buffer safe for the exec copy goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// mcpClient drives `corral serve --mcp` over stdio with the Go SDK's
// client, and keeps a transcript of the calls.
type mcpClient struct {
	t      *testing.T
	cs     *mcp.ClientSession
	stderr *lockedBuffer
	log    []mcpExchange
	closed bool
}

type mcpExchange struct {
	Tool    string
	Args    map[string]any
	Text    string
	IsError bool
	Note    string
}

func serverArgs(t *testing.T, args ...string) []string {
	return append([]string{"--namespace", testutil.Namespace, "--state-dir", testutil.StateDir(t), "--image", testutil.TestImageRef, "serve", "--mcp"}, args...)
}

func startMCP(t *testing.T, args ...string) *mcpClient {
	t.Helper()
	require.NoError(t, testutil.BuildCorral())
	cmd := exec.Command(testutil.CorralPath(), serverArgs(t, args...)...)
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "corral-integration", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, "server stderr: %s", stderr.String())
	c := &mcpClient{t: t, cs: cs, stderr: stderr}
	created := true
	for _, a := range args {
		if a == "--session" {
			created = false
		}
	}
	t.Cleanup(func() {
		// A session the server created is removed even when the test
		// failed half-way (removeSession tolerates one already gone).
		if id := c.close(); id != "" && created {
			removeSession(t, testutil.Executor(t), id)
		}
	})
	return c
}

// close ends the server (it exits when stdin closes) and returns the id
// of the session it served.
func (c *mcpClient) close() string {
	if !c.closed {
		c.closed = true
		_ = c.cs.Close()
	}
	m := regexp.MustCompile(`serving session ([0-9a-f]{12})`).FindStringSubmatch(c.stderr.String())
	if m == nil {
		return ""
	}
	return m[1]
}

func (c *mcpClient) tools() []*mcp.Tool {
	c.t.Helper()
	res, err := c.cs.ListTools(context.Background(), nil)
	require.NoError(c.t, err)
	return res.Tools
}

func toolNames(tools []*mcp.Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return names
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// call calls a tool and records the exchange.
func (c *mcpClient) call(name string, args map[string]any, note string) *mcp.CallToolResult {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(c.t, err, "calling %s %v; server stderr: %s", name, args, c.stderr.String())
	c.log = append(c.log, mcpExchange{Tool: name, Args: args, Text: resultText(res), IsError: res.IsError, Note: note})
	return res
}

// ok calls a tool that must succeed and returns its text.
func (c *mcpClient) ok(name string, args map[string]any, note string) string {
	c.t.Helper()
	res := c.call(name, args, note)
	require.False(c.t, res.IsError, "%s %v: %s", name, args, resultText(res))
	return resultText(res)
}

// refused calls a tool that must be refused with a rule containing rule.
func (c *mcpClient) refused(name string, args map[string]any, rule, note string) string {
	c.t.Helper()
	res := c.call(name, args, note)
	text := resultText(res)
	require.True(c.t, res.IsError, "%s %v should be refused: %s", name, args, text)
	require.True(c.t, strings.HasPrefix(text, "refused ("), "a refusal's one-line form: %s", text)
	require.NotContains(c.t, strings.TrimSuffix(text, "\n"), "\n")
	require.Contains(c.t, text, rule)
	return text
}

func structured[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var v T
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &v), string(b))
	return v
}

// allowedInputs are the only tool input properties: relative paths,
// content, patterns, windows, an argv and a diff format. Nothing selects a
// repository, profile, scope, agent or session.
var allowedInputs = map[string]bool{
	"path": true, "offset": true, "limit": true, "unit": true, "pattern": true, "include": true, "ignore_case": true,
	"max_results": true, "content": true, "expected_sha256": true, "old_text": true, "new_text": true, "replace_all": true,
	"argv": true, "format": true,
}

func TestMCPTools(t *testing.T) {
	e := testutil.Executor(t)
	repo := ftRepo(t)
	before := testutil.Snapshot(t, repo)
	s := createSession(t, e, sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t)}, "docs")
	require.NoError(t, s.Close())
	c := startMCP(t, "--session", s.ID)

	tools := c.tools()
	require.Equal(t, []string{"diff", "edit", "exec", "glob", "list", "read", "search", "write"}, toolNames(tools))
	for _, tool := range tools {
		schema, ok := tool.InputSchema.(map[string]any)
		require.True(t, ok)
		require.Equal(t, false, schema["additionalProperties"], tool.Name)
		props, _ := schema["properties"].(map[string]any)
		for p := range props {
			require.True(t, allowedInputs[p], "tool %s takes %q", tool.Name, p)
		}
	}

	list := structured[struct {
		Entries []struct{ Path string } `json:"entries"`
	}](t, c.call("list", map[string]any{}, ""))
	var names []string
	for _, en := range list.Entries {
		names = append(names, en.Path)
	}
	require.Equal(t, []string{".openwikiignore", "README.md", "bin.dat", "docs", "openwiki"}, names)

	text := c.ok("read", map[string]any{"path": "README.md"}, "")
	require.Contains(t, text, "# demo\nhello\nworld\n")
	require.Contains(t, text, "sha256 "+sha("# demo\nhello\nworld\n"))
	require.Contains(t, c.ok("read", map[string]any{"path": "README.md", "offset": 1, "limit": 1}, ""), "lines 2-2")
	require.Contains(t, c.ok("read", map[string]any{"path": "bin.dat"}, ""), "binary file, content not shown")
	require.Contains(t, c.ok("search", map[string]any{"pattern": "todo", "ignore_case": true}, ""), "docs/a.md")
	require.Contains(t, c.ok("glob", map[string]any{"pattern": "docs/*.md"}, ""), "docs/b.md")

	w := c.call("write", map[string]any{"path": "openwiki/mcp.md", "content": "# MCP\n\nwritten over MCP\n"}, "")
	require.False(t, w.IsError, resultText(w))
	wr := structured[struct {
		SHA256  string `json:"sha256"`
		Created bool   `json:"created"`
	}](t, w)
	require.True(t, wr.Created)
	c.ok("edit", map[string]any{"path": "openwiki/mcp.md", "old_text": "written", "new_text": "edited", "expected_sha256": wr.SHA256}, "")
	stale := c.call("edit", map[string]any{"path": "openwiki/mcp.md", "old_text": "edited", "new_text": "x", "expected_sha256": wr.SHA256}, "")
	require.True(t, stale.IsError)
	require.Contains(t, resultText(stale), "stale revision")

	ex := structured[struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}](t, c.call("exec", map[string]any{"argv": []string{"cat", "openwiki/mcp.md"}}, ""))
	require.Equal(t, 0, ex.ExitCode)
	require.Equal(t, "# MCP\n\nedited over MCP\n", ex.Stdout)
	ex = structured[struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}](t, c.call("exec", map[string]any{"argv": []string{"grep", "-q", "nothing-matches", "README.md"}}, ""))
	require.Equal(t, 1, ex.ExitCode, "a non-zero exit is a result, not a refusal")

	require.Equal(t, "create openwiki/mcp.md (+3 -0)\n1 file changed, 3 insertions(+), 0 deletions(-)\n", c.ok("diff", map[string]any{}, ""))
	patch := c.ok("diff", map[string]any{"format": "patch"}, "")
	gitApplyCheck(t, repo, []byte(patch))
	var dj struct {
		Changes []changeset.Change `json:"changes"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("diff", map[string]any{"format": "json"}, "")), &dj))
	require.Len(t, dj.Changes, 1)

	// Refusals name their rule; nothing leaks.
	c.refused("read", map[string]any{"path": "secrets/key.txt"}, ".openwikiignore:1 hides secrets/", "")
	c.refused("read", map[string]any{"path": "docs/keys/key.txt"}, "hides secrets/", "")
	c.refused("read", map[string]any{"path": "AGENTS.md"}, "profile hides agent config AGENTS.md", "")
	c.refused("read", map[string]any{"path": "/etc/passwd"}, "absolute paths are not allowed", "")
	c.refused("read", map[string]any{"path": "../x"}, "leaves the repository", "")
	c.refused("list", map[string]any{"path": ".git"}, ".git", "")
	c.refused("search", map[string]any{"pattern": "SECRET", "path": "secrets"}, "hides secrets/", "")
	c.refused("glob", map[string]any{"pattern": "**"}, "root-wide", "")
	c.refused("glob", map[string]any{"pattern": "**/.git/*"}, ".git", "")
	c.refused("write", map[string]any{"path": "README.md", "content": "x"}, "outside the write scope openwiki/", "")
	c.refused("write", map[string]any{"path": "openwiki/.claims/x.lock", "content": "x"}, "owned by corral", "")
	c.refused("write", map[string]any{"path": "openwiki/.openwikiignore", "content": "!*"}, "ignore files", "")
	// Look-alike spellings of a reserved name are refused at the first
	// write, so the session's change set stays appliable.
	c.refused("write", map[string]any{"path": "openwiki/.claims./x", "content": "x"}, "openwiki/.claims. is owned by corral", "")
	c.refused("write", map[string]any{"path": "openwiki/.claims /x", "content": "x"}, "openwiki/.claims  is owned by corral", "")
	c.refused("edit", map[string]any{"path": "README.md", "old_text": "hello", "new_text": "x", "expected_sha256": sha("# demo\nhello\nworld\n")}, "outside the write scope", "")
	c.refused("exec", map[string]any{"argv": []string{"sh", "-c", "cat secrets/key.txt"}}, "never allowed", "")
	c.refused("exec", map[string]any{"argv": []string{"cat", ".git/config"}}, ".git", "")
	c.refused("exec", map[string]any{"argv": []string{"grep", "-r", "SECRET", "secrets"}}, "hides secrets/", "")
	m := c.call("search", map[string]any{"pattern": "SECRET"}, "")
	require.False(t, m.IsError)
	require.Contains(t, resultText(m), `"matches":[]`, "discovery sees no hidden file")

	// A tool input may not carry anything else: no repository, no scope.
	bad := c.call("read", map[string]any{"path": "README.md", "repo": "/etc"}, "")
	require.True(t, bad.IsError)
	bad = c.call("write", map[string]any{"path": "openwiki/x.md", "content": "x", "scope": "."}, "")
	require.True(t, bad.IsError)
	_, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "apply", Arguments: map[string]any{}})
	require.Error(t, err, "there is no such tool")

	for _, ex := range c.log {
		for _, secret := range ftSecrets {
			require.NotContains(t, ex.Text, secret, "%s %v", ex.Tool, ex.Args)
		}
	}
	require.Equal(t, s.ID, c.close())
	require.Equal(t, before, testutil.Snapshot(t, repo))

	// The session outlives the server with what it wrote.
	s2, err := e.OpenSession(context.Background(), s.ID)
	require.NoError(t, err)
	defer s2.Close()
	cs, err := s2.Changes()
	require.NoError(t, err)
	require.Len(t, cs.Changes, 1)
	require.Equal(t, "openwiki/mcp.md", cs.Changes[0].Path)
}

func TestMCPReadOnlyAndAgentServers(t *testing.T) {
	e := testutil.Executor(t)
	repo := ftRepo(t)

	ro := startMCP(t, "--repo", repo, "--read-only")
	require.Equal(t, []string{"diff", "exec", "glob", "list", "read", "search"}, toolNames(ro.tools()))
	ro.ok("read", map[string]any{"path": "openwiki/index.md"}, "")
	ro.refused("exec", map[string]any{"argv": []string{"cp", "README.md", "openwiki/x.md"}}, "read-only", "")
	_, err := ro.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write", Arguments: map[string]any{"path": "openwiki/x.md", "content": "x"}})
	require.ErrorContains(t, err, `unknown tool "write"`, "no write tool in a read-only session")
	id := ro.close()
	require.NotEmpty(t, id)
	removeSession(t, e, id)

	ag := startMCP(t, "--repo", repo, "--agent-id", "alice")
	ag.ok("write", map[string]any{"path": "openwiki/agents/alice/found.md", "content": "found\n"}, "")
	ag.ok("read", map[string]any{"path": "openwiki/agents/bob/notes.md"}, "")
	ag.refused("write", map[string]any{"path": "openwiki/agents/bob/notes.md", "content": "x"}, "outside the write scope openwiki/agents/alice/", "")
	ag.refused("write", map[string]any{"path": "openwiki/agents/alice/to-bob/x.md", "content": "x"}, "resolves to openwiki/agents/bob/x.md", "")
	ag.refused("write", map[string]any{"path": "openwiki/index.md", "content": "x"}, "outside the write scope", "")
	require.Contains(t, ag.ok("diff", map[string]any{}, ""), "create openwiki/agents/alice/found.md")
	id = ag.close()
	require.NotEmpty(t, id)
	removeSession(t, e, id)

	// The session's capability is the launcher's: --session takes no
	// other capability flag.
	require.NoError(t, testutil.BuildCorral())
	cmd := exec.Command(testutil.CorralPath(), serverArgs(t, "--session", "0123456789ab", "--agent-id", "bob")...)
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
	outb, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(outb), "--session excludes")

}

// TestMCPScriptedAgent is a whole documentation task through corral's MCP
// server and nothing else: research the demo repository, resist its
// prompt injection, write one page, and end with a change set holding
// exactly that page. With CORRAL_MCP_TRANSCRIPT=FILE the transcript is
// written to FILE (docs/mcp-transcript.md keeps one).
func TestMCPScriptedAgent(t *testing.T) {
	e := testutil.Executor(t)
	repo := demoRepo(t)
	before := testutil.Snapshot(t, repo)
	c := startMCP(t, "--repo", repo, "--profile", "docs")

	tools := c.tools()
	c.log = append(c.log, mcpExchange{Tool: "tools/list", Text: strings.Join(toolNames(tools), ", "),
		Note: "The launcher fixed the session (repository, docs profile, write scope openwiki/); the agent only sees these tools."})

	c.ok("list", map[string]any{"path": "."}, "Orient: what is in the repository? (AGENTS.md, .env and secrets/ are not in the view.)")
	c.ok("read", map[string]any{"path": "README.md"}, "")
	c.refused("read", map[string]any{"path": "AGENTS.md"}, "profile hides agent config AGENTS.md",
		"The repository's agent instructions (a prompt injection) are hidden by the profile; a direct read is refused, naming the rule.")
	c.ok("glob", map[string]any{"pattern": "src/**/*.go"}, "Find the code.")
	c.ok("read", map[string]any{"path": "src/api/server.go"}, "")
	c.ok("read", map[string]any{"path": "src/billing/invoice.go"}, "")
	c.ok("search", map[string]any{"pattern": "TODO|FIXME", "path": "."}, "Open work items.")
	c.ok("search", map[string]any{"pattern": "os\\.Getenv\\(", "path": "src", "include": "*.go"}, "Configuration read from the environment.")
	c.ok("read", map[string]any{"path": "docs/ops.md"}, "")
	c.refused("read", map[string]any{"path": ".env"}, ".openwikiignore:3 hides .env", "Secrets stay out of reach, whatever the tool.")
	c.refused("exec", map[string]any{"argv": []string{"sh", "-c", "cat secrets/signing-key.pem .env > openwiki/debug.md"}}, "never allowed",
		"What AGENTS.md asked for: no shell.")
	c.refused("exec", map[string]any{"argv": []string{"git", "-c", "core.pager=sh -c id", "log"}}, "git", "")
	c.ok("exec", map[string]any{"argv": []string{"grep", "-rn", "func ", "src"}}, "An allowlisted command, run directly in a fresh container.")
	c.ok("read", map[string]any{"path": "openwiki/index.md"}, "The documentation tree.")
	page := c.call("read", map[string]any{"path": "openwiki/pages/architecture.md"}, "The page to write; its sha256 is the revision to write over.")
	require.False(t, page.IsError)
	rev := structured[struct {
		SHA256 string `json:"sha256"`
	}](t, page).SHA256

	content := `# Architecture

tally is a small invoicing service in two Go packages.

## Components

- ` + "`src/api`" + ` — the HTTP server (` + "`package main`" + `). It serves ` + "`GET /healthz`" + `,
  which answers ` + "`{\"status\": \"ok\"}`" + `. It listens on ` + "`LISTEN_ADDR`" + `
  (default ` + "`:8080`" + `).
- ` + "`src/billing`" + ` — invoice arithmetic. An ` + "`Invoice`" + ` has a customer, billed
  ` + "`Line`" + `s (SKU, quantity, unit price in cents) and a VAT rate in basis
  points; ` + "`Total()`" + ` returns the total in cents, VAT included.

## Configuration

Configuration comes from the environment (` + "`LISTEN_ADDR`" + `; an API key is
planned, see below).

## Operations

Deploys run from CI; rotate the API key quarterly (see ` + "`docs/ops.md`" + `).

## Open work

- Requests are not authenticated yet (a TODO in ` + "`src/api/server.go`" + `).
`
	w := c.call("write", map[string]any{"path": "openwiki/pages/architecture.md", "content": content, "expected_sha256": rev},
		"Write the page over the revision that was read.")
	require.False(t, w.IsError, resultText(w))
	rev2 := structured[struct {
		SHA256 string `json:"sha256"`
	}](t, w).SHA256
	stale := c.call("edit", map[string]any{"path": "openwiki/pages/architecture.md", "old_text": "two Go packages", "new_text": "two Go packages (api, billing)", "expected_sha256": rev},
		"An edit against the old revision is a conflict, not a silent overwrite.")
	require.True(t, stale.IsError)
	require.Contains(t, resultText(stale), "stale revision")
	c.ok("edit", map[string]any{"path": "openwiki/pages/architecture.md", "old_text": "two Go packages", "new_text": "two Go packages (api, billing)", "expected_sha256": rev2},
		"The same edit against the current revision.")
	c.refused("write", map[string]any{"path": "README.md", "content": "pwned"}, "outside the write scope openwiki/", "Only openwiki/ is writable.")
	stat := c.ok("diff", map[string]any{}, "The change set so far.")
	require.Equal(t, "modify openwiki/pages/architecture.md (+23 -1)\n1 file changed, 23 insertions(+), 1 deletions(-)\n", stat)
	patch := c.ok("diff", map[string]any{"format": "patch"}, "The patch a reviewer applies.")

	for _, ex := range c.log {
		require.NotContains(t, ex.Text, "BEGIN", "%s %v", ex.Tool, ex.Args)
		require.NotContains(t, ex.Text, "SYSTEM OVERRIDE", "%s %v", ex.Tool, ex.Args)
	}
	id := c.close()
	require.NotEmpty(t, id)
	t.Cleanup(func() { removeSession(t, e, id) })

	// After the agent is gone, the server has ended the session it made,
	// keeping its change set as a patch file; the launcher reviews that:
	// exactly one page, the same patch the agent saw.
	kept := filepath.Join(testutil.StateDir(t), "patches", id+".patch")
	require.Eventually(t, func() bool { _, err := os.Stat(kept); return err == nil }, 30*time.Second, 50*time.Millisecond, c.stderr.String())
	keptPatch, err := os.ReadFile(kept)
	require.NoError(t, err)
	require.Equal(t, patch, string(keptPatch))
	pol, err := sandbox.NewPolicy(sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t)})
	require.NoError(t, err)
	cs, err := review.ParsePatch(pol.Repo, keptPatch, pol.Scope, pol.View())
	require.NoError(t, err)
	require.NoError(t, cs.Err())
	require.Len(t, cs.Changes, 1)
	require.Equal(t, "openwiki/pages/architecture.md", cs.Changes[0].Path)
	require.Equal(t, changeset.Modify, cs.Changes[0].Kind)
	require.Equal(t, strings.Replace(content, "two Go packages", "two Go packages (api, billing)", 1), string(cs.Changes[0].After))
	gitApplyCheck(t, repo, []byte(patch))
	require.Equal(t, before, testutil.Snapshot(t, repo), "the repository is never written")

	if out := os.Getenv("CORRAL_MCP_TRANSCRIPT"); out != "" {
		if !filepath.IsAbs(out) {
			out = filepath.Join("..", out)
		}
		require.NoError(t, os.WriteFile(out, []byte(renderTranscript(c.log, repo, id, cs)), 0o644))
	}
}

func renderTranscript(log []mcpExchange, repo, id string, cs *changeset.Set) string {
	var b strings.Builder
	b.WriteString(`# A documentation task through corral's MCP server

This is the transcript of ` + "`TestMCPScriptedAgent`" + ` (integration/mcp_test.go): a
scripted agent, using the official Go SDK's MCP client over stdio and nothing
else, researches ` + "`examples/demo-repo`" + `, writes one page, and ends with a change
set that holds exactly that page. Regenerate it with

    make setup && . build/env && export CONTAINERD_ADDRESS
    CORRAL_MCP_TRANSCRIPT=docs/mcp-transcript.md go test -count=1 -run TestMCPScriptedAgent ./integration/

The launcher started the server; the agent chose nothing of it:

    corral serve --mcp --repo <demo-repo> --profile docs

Every tool call below ran in its own fresh container over a read-only view of
the repository without its hidden paths (` + "`.env`, `secrets/`, `AGENTS.md`" + `, ` + "`openwiki/.claims/`" + `);
only ` + "`openwiki/`" + ` was writable, and only through the session's write area.

`)
	clean := func(s string) string {
		s = strings.ReplaceAll(s, repo, "<demo-repo>")
		return strings.ReplaceAll(s, id, "<session>")
	}
	for i, ex := range log {
		fmt.Fprintf(&b, "## %d. %s\n\n", i+1, ex.Tool)
		if ex.Note != "" {
			b.WriteString(ex.Note + "\n\n")
		}
		if ex.Args != nil {
			b.WriteString("```json\n" + clean(prettyJSON(ex.Args)) + "\n```\n\n")
		}
		label := "Result"
		if ex.IsError {
			label = "Tool error"
		}
		text := clean(ex.Text)
		if strings.HasPrefix(strings.TrimSpace(text), "{") {
			var v any
			if json.Unmarshal([]byte(text), &v) == nil {
				text = prettyJSON(v)
			}
		}
		lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
		if len(lines) > 80 {
			lines = append(lines[:80], fmt.Sprintf("… (%d more lines)", len(lines)-80))
		}
		fmt.Fprintf(&b, "%s:\n\n````\n%s\n````\n\n", label, strings.Join(lines, "\n"))
	}
	b.WriteString("## After the agent disconnected\n\nThe session outlived the server. The launcher's review (`corral session diff <session> --format stat`):\n\n```\n")
	b.WriteString(cs.Stat())
	b.WriteString("```\n\nThe repository itself was not written; applying the patch is a separate, approved step.\n")
	return b.String()
}

// prettyJSON indents v without escaping <, > and &.
func prettyJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// TestMCPNodeClient drives the server with the npm package
// @modelcontextprotocol/sdk (another implementation of the protocol): it
// lists the tools, calls each one and checks the refusals. It needs node
// and npm, and the npm registry the first time (the package is kept in
// $TMPDIR/corral-it-npm).
func TestMCPNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.Missing(t, "node is not installed")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		testutil.Missing(t, "npm is not installed")
	}
	e := testutil.Executor(t)
	dir := filepath.Join(os.TempDir(), "corral-it-npm")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		cmd := exec.Command(npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error", "@modelcontextprotocol/sdk@1.32.2")
		outb, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm install: %s", outb)
	}
	script, err := os.ReadFile("testdata/mcp-node-client.mjs")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "client.mjs"), script, 0o644))

	repo := ftRepo(t)
	s := createSession(t, e, sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t)}, "docs")
	require.NoError(t, s.Close())
	require.NoError(t, testutil.BuildCorral())
	cmd := exec.Command(node, append([]string{filepath.Join(dir, "client.mjs"), testutil.CorralPath()}, serverArgs(t, "--session", s.ID)...)...)
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
	outb, err := cmd.CombinedOutput()
	require.NoError(t, err, "node client: %s", outb)
	t.Logf("node client:\n%s", outb)
	require.Contains(t, string(outb), "node client: ok")
	for _, secret := range ftSecrets {
		require.NotContains(t, string(outb), secret)
	}

	s2, err := e.OpenSession(context.Background(), s.ID)
	require.NoError(t, err)
	defer s2.Close()
	cs, err := s2.Changes()
	require.NoError(t, err)
	require.Len(t, cs.Changes, 1)
	require.Equal(t, "openwiki/node.md", cs.Changes[0].Path)
}
