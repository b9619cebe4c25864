// Package mcpserver exposes one corral session to an agent as an MCP
// server (github.com/modelcontextprotocol/go-sdk): the tools list, read,
// search, glob, write, edit, exec and diff, and nothing else.
//
// The session, and with it every capability (repository, profile, write
// scope, page, agent, read-only), is fixed by the trusted launcher before
// the server starts. No tool chooses a repository, profile, scope, agent
// or session, and there is no administrative or destructive tool: tool
// inputs are relative paths, content, patterns and an argv. In a read-only
// session write and edit do not exist. A refusal is a tool error whose
// text is corral's one-line refusal naming the rule.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/version"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/fsop"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Session is what the server needs of a corral session (*sandbox.Session
// through New, or a session of corral's daemon).
type Session interface {
	Read(ctx context.Context, unsafePath string, o sandbox.ReadOptions) (*fsop.ReadResult, error)
	List(ctx context.Context, unsafePath string) (*fsop.ListResult, error)
	Glob(ctx context.Context, pattern string, max int) (*fsop.GlobResult, error)
	Search(ctx context.Context, expr, unsafePath string, o sandbox.SearchOptions) (*fsop.SearchResult, error)
	Write(ctx context.Context, unsafePath string, content []byte, expectedSHA256 string) (*fsop.WriteResult, error)
	Edit(ctx context.Context, unsafePath, oldText, newText, expectedSHA256 string, all bool) (*fsop.WriteResult, error)
	Exec(ctx context.Context, argv []string) (*sandbox.Result, error)
	// Changes is the session's change set, each change with its bytes.
	Changes(ctx context.Context) (*changeset.Set, error)
	// CallChanges is the change set plus the violations the latest call
	// introduced (sandbox.Session.CallChanges); the changes need not
	// carry their bytes.
	CallChanges(ctx context.Context) (*changeset.Set, []changeset.Problem, error)
}

// Options describe the session to the agent (trusted, from the launcher).
type Options struct {
	// Version is corral's version, reported as the server's; "" means
	// internal/version.String().
	Version string
	// ReadOnly leaves out write and edit.
	ReadOnly bool
	// Scope names what is writable ("openwiki/", "openwiki/agents/a/", a
	// page), for the descriptions.
	Scope string
	// Commands are the profile's allowed commands, for exec's description.
	Commands []string
}

// New returns the MCP server of sess. Run it with server.Run(ctx,
// &mcp.StdioTransport{}).
func New(sess *sandbox.Session, o Options) *mcp.Server {
	return NewWith(sessionAdapter{sess}, o)
}

// sessionAdapter runs exec without streaming.
type sessionAdapter struct{ *sandbox.Session }

func (a sessionAdapter) Exec(ctx context.Context, argv []string) (*sandbox.Result, error) {
	return a.Session.Exec(ctx, argv, nil, nil)
}

func (a sessionAdapter) Changes(ctx context.Context) (*changeset.Set, error) {
	return a.Session.ChangesContext(ctx)
}

func (a sessionAdapter) CallChanges(ctx context.Context) (*changeset.Set, []changeset.Problem, error) {
	return a.Session.CallChangesContext(ctx)
}

// Tool inputs: relative paths, content, patterns and an argv, nothing
// else (the schemas forbid other properties).
type (
	listIn struct {
		Path string `json:"path,omitempty" jsonschema:"directory relative to the repository root (default: the root, \".\")"`
	}
	readIn struct {
		Path   string `json:"path" jsonschema:"file relative to the repository root"`
		Offset int64  `json:"offset,omitempty" jsonschema:"lines (or bytes, with unit=bytes) to skip; default 0"`
		Limit  int64  `json:"limit,omitempty" jsonschema:"lines (or bytes) to return; default 2000 lines; never more than 256 KiB"`
		Unit   string `json:"unit,omitempty" jsonschema:"\"lines\" (default) or \"bytes\""`
	}
	searchIn struct {
		Pattern    string `json:"pattern" jsonschema:"regular expression (Go RE2 syntax) matched against each line"`
		Path       string `json:"path,omitempty" jsonschema:"file or directory relative to the repository root (default: the root)"`
		Include    string `json:"include,omitempty" jsonschema:"only files whose base name matches this glob, e.g. *.go"`
		IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match without regard to letter case"`
		MaxResults int    `json:"max_results,omitempty" jsonschema:"at most this many matches (default 200, at most 2000)"`
	}
	globIn struct {
		Pattern    string `json:"pattern" jsonschema:"glob relative to the repository root: * ? [..] match within a name, ** any number of directories (e.g. src/**/*.go); root-wide globs such as ** or **/* are refused"`
		MaxResults int    `json:"max_results,omitempty" jsonschema:"at most this many matches (default 200, at most 2000)"`
	}
	writeIn struct {
		Path           string `json:"path" jsonschema:"file relative to the repository root, inside the session's write scope"`
		Content        string `json:"content" jsonschema:"the file's whole new content (UTF-8 text)"`
		ExpectedSHA256 string `json:"expected_sha256,omitempty" jsonschema:"if set, the file must exist with this sha256 (from read): a stale one is a conflict"`
	}
	editIn struct {
		Path           string `json:"path" jsonschema:"file relative to the repository root, inside the session's write scope"`
		OldText        string `json:"old_text" jsonschema:"exact text to replace; must occur exactly once unless replace_all"`
		NewText        string `json:"new_text" jsonschema:"replacement text"`
		ExpectedSHA256 string `json:"expected_sha256" jsonschema:"sha256 of the file's current content, as read returned it; a stale one is a conflict"`
		ReplaceAll     bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence of old_text"`
	}
	execIn struct {
		Argv []string `json:"argv" jsonschema:"the command and its arguments, run directly (no shell), e.g. [\"grep\", \"-rn\", \"TODO\", \"src\"]; paths relative to the repository root"`
	}
	diffIn struct {
		Format string `json:"format,omitempty" jsonschema:"\"stat\" (default), \"patch\" or \"json\""`
	}
)

// execOut is exec's result.
type execOut struct {
	Argv            []string `json:"argv"`
	ExitCode        int      `json:"exit_code"`
	Stdout          string   `json:"stdout"`
	Stderr          string   `json:"stderr"`
	StdoutTruncated bool     `json:"stdout_truncated"`
	StderrTruncated bool     `json:"stderr_truncated"`
	LimitsHit       []string `json:"limits_hit"`
	// Violations are those this call introduced into the change set: it
	// is rejected (see diff) until they are fixed.
	Violations []changeset.Problem `json:"violations"`
}

// diffOut is diff's structured result (contents are in the patch).
type diffOut struct {
	Changes    []changeset.Change  `json:"changes"`
	Violations []changeset.Problem `json:"violations"`
	Stat       string              `json:"stat"`
	Patch      string              `json:"patch,omitempty"`
}

// ToolNames are the tools a writable session's server offers, in order.
var ToolNames = []string{"list", "read", "search", "glob", "write", "edit", "exec", "diff"}

func boolp(b bool) *bool { return &b }

// NewWith returns the MCP server of any Session (tests use fakes).
func NewWith(s Session, o Options) *mcp.Server {
	ver := o.Version
	if ver == "" {
		ver = version.String()
	}
	instr := "Every tool runs in a fresh, locked-down container over a read-only view of the repository. " +
		"Paths are relative to the repository root. Hidden paths do not exist in the view, and naming one directly is refused with the rule that hides it. "
	if o.ReadOnly {
		instr += "This session is read-only: nothing can be written."
	} else {
		instr += "Only " + o.Scope + " is writable; what you write adds up across calls and is collected as a change set (see diff) for review."
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "corral", Version: ver}, &mcp.ServerOptions{
		Instructions: instr,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)}

	mcp.AddTool(srv, &mcp.Tool{Name: "list", Annotations: ro,
		Description: "List a directory of the repository (name, type, size). Hidden paths are never shown."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in listIn) (*mcp.CallToolResult, any, error) {
			p := in.Path
			if p == "" {
				p = "."
			}
			res, err := s.List(ctx, p)
			return nil, res, toolError(err)
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "read", Annotations: ro,
		Description: "Read a text file: by default its first 2000 lines; offset/limit select a window (lines, or bytes with unit=bytes); at most 256 KiB per call. " +
			"Binary files are reported, not shown. The result's sha256 is the revision edit expects."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, any, error) {
			if in.Unit != "" && in.Unit != "lines" && in.Unit != "bytes" {
				return nil, nil, fmt.Errorf("unit %q: want lines or bytes", in.Unit)
			}
			res, err := s.Read(ctx, in.Path, sandbox.ReadOptions{Offset: in.Offset, Limit: in.Limit, Bytes: in.Unit == "bytes"})
			if err != nil {
				return nil, nil, toolError(err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: readText(res)}}}, res, nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "search", Annotations: ro,
		Description: "Search file contents with a regular expression (Go RE2 syntax) under a path; returns path, line number and line. Hidden files are never searched; binary and very large files are skipped and counted."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, any, error) {
			p := in.Path
			if p == "" {
				p = "."
			}
			res, err := s.Search(ctx, in.Pattern, p, sandbox.SearchOptions{Include: in.Include, IgnoreCase: in.IgnoreCase, MaxResults: in.MaxResults})
			return nil, res, toolError(err)
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "glob", Annotations: ro,
		Description: "Find paths matching a glob relative to the repository root (e.g. docs/*.md, src/**/*.go). Hidden paths are never shown; root-wide globs (**, **/*, */**, **/*.*) and globs aimed at .git are refused."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in globIn) (*mcp.CallToolResult, any, error) {
			res, err := s.Glob(ctx, in.Pattern, in.MaxResults)
			return nil, res, toolError(err)
		})

	if !o.ReadOnly {
		wr := &mcp.ToolAnnotations{DestructiveHint: boolp(false), OpenWorldHint: boolp(false)}
		mcp.AddTool(srv, &mcp.Tool{Name: "write", Annotations: wr,
			Description: "Create or replace a text file inside the write scope (" + o.Scope + "); missing directories are created. " +
				"With expected_sha256 the file must still have that revision."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, any, error) {
				res, err := s.Write(ctx, in.Path, []byte(in.Content), in.ExpectedSHA256)
				return nil, res, toolError(err)
			})
		mcp.AddTool(srv, &mcp.Tool{Name: "edit", Annotations: wr,
			Description: "Replace old_text by new_text in a file inside the write scope (" + o.Scope + "). expected_sha256 is the sha256 read returned: " +
				"if the file changed since, the edit is refused as a conflict; read it again."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in editIn) (*mcp.CallToolResult, any, error) {
				res, err := s.Edit(ctx, in.Path, in.OldText, in.NewText, in.ExpectedSHA256, in.ReplaceAll)
				return nil, res, toolError(err)
			})
	}

	cmds := "the profile's commands"
	if len(o.Commands) > 0 {
		cmds = strings.Join(o.Commands, ", ")
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "exec", Annotations: &mcp.ToolAnnotations{DestructiveHint: boolp(false), OpenWorldHint: boolp(false)},
		Description: "Run one allowlisted command (" + cmds + ") with its arguments, directly (no shell, no network), in a fresh container at the repository root. " +
			"Options and paths are checked first; a refusal names the rule. Returns exit code, stdout and stderr, and the violations " +
			"(e.g. a symlink or an executable file written) this call introduced into the change set, which reject it until fixed."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in execIn) (*mcp.CallToolResult, any, error) {
			if len(in.Argv) == 0 {
				return nil, nil, errors.New("argv is empty")
			}
			res, err := s.Exec(ctx, in.Argv)
			if err != nil {
				return nil, nil, toolError(err)
			}
			_, introduced, err := s.CallChanges(ctx)
			if err != nil {
				return nil, nil, toolError(err)
			}
			out := execOut{Argv: res.Argv, ExitCode: res.ExitCode, Stdout: string(res.Stdout), Stderr: string(res.Stderr),
				StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated, LimitsHit: res.LimitsHit, Violations: introduced}
			if out.LimitsHit == nil {
				out.LimitsHit = []string{}
			}
			if out.Violations == nil {
				out.Violations = []changeset.Problem{}
			}
			return nil, out, nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "diff", Annotations: ro,
		Description: "Show the session's change set so far: a summary (stat, the default), a unified patch, or json. Violations (e.g. a symlink or an ignore file written) reject the whole set."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in diffIn) (*mcp.CallToolResult, any, error) {
			f := in.Format
			if f == "" {
				f = "stat"
			}
			if f != "stat" && f != "patch" && f != "json" {
				return nil, nil, fmt.Errorf("format %q: want stat, patch or json", in.Format)
			}
			cs, err := s.Changes(ctx)
			if err != nil {
				return nil, nil, toolError(err)
			}
			out := diffOut{Changes: cs.Changes, Violations: cs.Violations, Stat: cs.Stat()}
			if out.Changes == nil {
				out.Changes = []changeset.Change{}
			}
			if out.Violations == nil {
				out.Violations = []changeset.Problem{}
			}
			text := out.Stat
			switch f {
			case "patch":
				if cs.Err() != nil {
					text = "no patch: the change set is rejected\n" + out.Stat
					break
				}
				patch, err := changeset.Patch(cs)
				if err != nil {
					return nil, nil, toolError(err)
				}
				out.Patch = string(patch)
				text = out.Patch
				if text == "" {
					text = "no changes\n"
				}
			case "json":
				b, err := json.MarshalIndent(out, "", "  ")
				if err != nil {
					return nil, nil, err
				}
				text = string(b)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
		})
	return srv
}

// readText is read's text for the model: a one-line header, then the
// content.
func readText(r *fsop.ReadResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d bytes, sha256 %s", r.Path, r.Size, r.SHA256)
	if r.Binary {
		b.WriteString("; binary file, content not shown\n")
		return b.String()
	}
	if r.Unit == "lines" {
		if r.Count == 0 {
			fmt.Fprintf(&b, "; no lines from line %d", r.Offset+1)
		} else {
			fmt.Fprintf(&b, "; lines %d-%d", r.Offset+1, r.Offset+r.Count)
		}
	} else {
		fmt.Fprintf(&b, "; bytes %d-%d", r.Offset, r.Offset+r.Count)
	}
	if r.EOF {
		b.WriteString(" (end of file)")
	} else {
		fmt.Fprintf(&b, " (more: offset %d)", r.NextOffset)
	}
	if r.Truncated {
		b.WriteString(" [cut at the size limit]")
	}
	b.WriteString("\n")
	b.WriteString(r.Content)
	return b.String()
}

// refusalError carries a refusal as the one-line form `corral run` prints.
type refusalError struct{ r *allowlist.Refusal }

func (e refusalError) Error() string {
	r := e.r
	if r.Index < 0 && r.Token != "" {
		return fmt.Sprintf("refused (%s): %q: %s", r.Kind, r.Token, r.Rule)
	}
	return r.Error()
}

func (e refusalError) Unwrap() error { return e.r }

// toolError makes err a tool error (never a protocol error): a refusal
// keeps its one-line form naming the rule.
func toolError(err error) error {
	if err == nil {
		return nil
	}
	var r *allowlist.Refusal
	if errors.As(err, &r) {
		return refusalError{r}
	}
	return err
}
