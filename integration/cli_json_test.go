package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

// cliJSON is the part of a --json result the exit-code tests look at.
type cliJSON struct {
	Error *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
	ExitCode      *int              `json:"exit_code"`
	ToolExitCode  *int              `json:"tool_exit_code"`
	LimitsHit     []string          `json:"limits_hit"`
	Violations    []json.RawMessage `json:"violations"`
	NewViolations []json.RawMessage `json:"new_violations"`
	Refusal       *struct {
		Token string `json:"token"`
	} `json:"refusal"`
}

// decodeOne decodes stdout as exactly one JSON document.
func decodeOne(t *testing.T, stdout string) cliJSON {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var v cliJSON
	require.NoError(t, dec.Decode(&v), "stdout is JSON: %q", stdout)
	require.False(t, dec.More(), "one JSON document: %q", stdout)
	return v
}

// requireCLIJSON checks that stdout is one JSON document whose exit_code
// is the process's code, with an error of kind (none when kind is "").
func requireCLIJSON(t *testing.T, stdout string, code int, kind string) cliJSON {
	t.Helper()
	v := decodeOne(t, stdout)
	require.NotNil(t, v.ExitCode, stdout)
	require.Equal(t, code, *v.ExitCode, "the JSON exit code is the process's: %s", stdout)
	if kind == "" {
		require.Nil(t, v.Error, stdout)
	} else {
		require.NotNil(t, v.Error, stdout)
		require.Equal(t, kind, v.Error.Kind, stdout)
		require.NotEmpty(t, v.Error.Message)
	}
	return v
}

// violationRepo is ftRepo plus an executable script (copying it into the
// write area makes an executable-bit violation) and a 64 KiB file.
func violationRepo(t *testing.T) string {
	repo := ftRepo(t)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(repo, "run.sh"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "big.txt"), []byte(strings.Repeat("0123456789abcde\n", 4096)), 0o644))
	return repo
}

// TestCLIJSONExitCodes: issue 9 item 16 for the commands that need a
// container: the JSON exit code is the process's on success, a tool's own
// failure, a limit (124), a rejected change set (123) and a refusal
// (126); --quiet keeps the change-set summary off stderr.
func TestCLIJSONExitCodes(t *testing.T) {
	e := testutil.Executor(t)
	repo := violationRepo(t)
	before := testutil.Snapshot(t, repo)
	tiny := docsProfileFile(t, "tiny", "output: 1MiB", "output: 4KiB")

	stdout, stderr, code := corralCmd(t, "run", "--json", "--repo", repo, "--", "ls")
	require.Equal(t, 0, code, stderr)
	v := requireCLIJSON(t, stdout, 0, "")
	require.Equal(t, 0, *v.ToolExitCode)

	stdout, stderr, code = corralCmd(t, "run", "--json", "--repo", repo, "--", "cat", "no-such-file")
	require.Equal(t, 1, code, stderr)
	v = requireCLIJSON(t, stdout, 1, "")
	require.Equal(t, 1, *v.ToolExitCode)
	require.Empty(t, stderr, "the tool's stderr is in the JSON")

	stdout, stderr, code = corralCmd(t, "run", "--json", "--repo", repo, "--profile", tiny, "--", "cat", "big.txt")
	require.Equal(t, 124, code, stderr)
	v = requireCLIJSON(t, stdout, 124, "limit")
	// The kill's status, whether or not cat wrote its last byte before it.
	require.Equal(t, 137, *v.ToolExitCode)
	require.Contains(t, v.LimitsHit, sandbox.LimitOutput)
	require.Contains(t, v.Error.Message, "output passed 4096 bytes")
	// A tool whose whole output fits the pipe buffers exits (0) before the
	// copy passes the cap: the result is the same as for one still writing.
	for range 3 {
		stdout, stderr, code = corralCmd(t, "run", "--json", "--repo", repo, "--profile", tiny, "--", "head", "-c", "5000", "big.txt")
		require.Equal(t, 124, code, stderr)
		v = requireCLIJSON(t, stdout, 124, "limit")
		require.Equal(t, 137, *v.ToolExitCode, "an output limit reports the kill whichever came first")
		require.Contains(t, v.LimitsHit, sandbox.LimitOutput)
	}

	stdout, stderr, code = corralCmd(t, "run", "--json", "--repo", repo, "--", "cp", "run.sh", "openwiki/run.sh")
	require.Equal(t, 123, code, stderr)
	v = requireCLIJSON(t, stdout, 123, "rejected")
	require.Equal(t, 0, *v.ToolExitCode)
	require.Len(t, v.NewViolations, 1)
	require.Contains(t, v.Error.Message, "executable bit")

	stdout, stderr, code = corralCmd(t, "run", "--json", "--repo", repo, "--", "cat", "secrets/key.txt")
	require.Equal(t, 126, code, stderr)
	v = requireCLIJSON(t, stdout, 126, "refused")
	require.Equal(t, "secrets/key.txt", v.Refusal.Token)

	// --quiet: the tool's stderr holds the tool's output only.
	_, stderr, code = corralCmd(t, "run", "--repo", repo, "--", "cp", "README.md", "openwiki/x.md")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "corral: create openwiki/x.md")
	_, stderr, code = corralCmd(t, "run", "--quiet", "--repo", repo, "--", "cp", "README.md", "openwiki/x.md")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)
	_, stderr, code = corralCmd(t, "run", "--quiet", "--repo", repo, "--", "cp", "run.sh", "openwiki/run.sh")
	require.Equal(t, 123, code)
	require.Contains(t, stderr, "executable bit", "what explains the exit code stays")

	// Sessions: create, exec, diff, rm.
	stdout, stderr, code = corralCmd(t, "session", "create", "--json", "--repo", repo)
	require.Equal(t, 0, code, stderr)
	var rec sandbox.SessionRecord
	require.NoError(t, json.Unmarshal([]byte(stdout), &rec))
	t.Cleanup(func() { removeSession(t, e, rec.ID) })
	stdout, stderr, code = corralCmd(t, "session", "exec", "--json", "--profile", "x", rec.ID, "--", "ls")
	require.Equal(t, 125, code, stderr)
	requireCLIJSON(t, stdout, 125, "usage")
	stdout, stderr, code = corralCmd(t, "session", "exec", "--json", rec.ID, "--", "cat", "secrets/key.txt")
	require.Equal(t, 126, code, stderr)
	requireCLIJSON(t, stdout, 126, "refused")
	stdout, stderr, code = corralCmd(t, "session", "exec", "--json", "--quiet", rec.ID, "--", "cp", "run.sh", "openwiki/run.sh")
	require.Equal(t, 123, code, stderr)
	requireCLIJSON(t, stdout, 123, "rejected")
	stdout, stderr, code = corralCmd(t, "session", "diff", rec.ID, "--format", "json")
	require.Equal(t, 123, code, stderr)
	requireCLIJSON(t, stdout, 123, "rejected")
	stdout, stderr, code = corralCmd(t, "session", "apply", "--json", rec.ID)
	require.Equal(t, 126, code, stderr)
	requireCLIJSON(t, stdout, 126, "refused")

	stdout, stderr, code = corralCmd(t, "session", "rm", "--json", rec.ID, "0123456789ab")
	require.Equal(t, 125, code, stderr)
	v = requireCLIJSON(t, stdout, 125, "failed")
	var rm struct{ Removed []string }
	require.NoError(t, json.Unmarshal([]byte(stdout), &rm))
	require.Equal(t, []string{rec.ID}, rm.Removed)
	require.Contains(t, v.Error.Message, "0123456789ab")
	stdout, stderr, code = corralCmd(t, "session", "exec", "--json", rec.ID, "--", "ls")
	require.Equal(t, 125, code, stderr)
	requireCLIJSON(t, stdout, 125, "failed")

	require.Equal(t, before, testutil.Snapshot(t, repo), "the repository is never written")
}

// TestSessionViolationBelongsToItsCall: issue 9 item 14. The call that
// writes an executable file exits 123; later calls exit with the tool's
// own code, in this or another corral process and over MCP, while diff
// and apply refuse the set; once the file is removed the set is clean,
// and making the violation again is charged again.
func TestSessionViolationBelongsToItsCall(t *testing.T) {
	e := testutil.Executor(t)
	repo := violationRepo(t)
	stdout, stderr, code := corralCmd(t, "session", "create", "--repo", repo)
	require.Equal(t, 0, code, stderr)
	id := strings.TrimSpace(stdout)
	t.Cleanup(func() { removeSession(t, e, id) })

	_, stderr, code = corralCmd(t, "session", "exec", id, "--", "cp", "run.sh", "openwiki/run.sh")
	require.Equal(t, 123, code, stderr)
	require.Contains(t, stderr, "corral: this call made the change set rejected: change set rejected: openwiki/run.sh: executable bit")

	stdout, stderr, code = corralCmd(t, "session", "exec", id, "--", "ls", "openwiki")
	require.Equal(t, 0, code, "a later call exits with the tool's code: %s", stderr)
	require.Contains(t, stdout, "run.sh")
	require.Contains(t, stderr, "corral: the change set is still rejected (by an earlier call)")
	_, stderr, code = corralCmd(t, "session", "exec", id, "--", "cat", "no-such-file")
	require.Equal(t, 1, code, stderr)
	stdout, stderr, code = corralCmd(t, "session", "exec", "--json", id, "--", "ls")
	require.Equal(t, 0, code, stderr)
	v := requireCLIJSON(t, stdout, 0, "")
	require.Len(t, v.Violations, 1, "the set is still rejected")
	require.Empty(t, v.NewViolations)
	_, stderr, code = corralCmd(t, "session", "exec", "--quiet", id, "--", "ls")
	require.Equal(t, 0, code)
	require.Empty(t, stderr)

	// The MCP server, another process, agrees.
	c := startMCP(t, "--session", id)
	ex := structured[struct {
		ExitCode   int               `json:"exit_code"`
		Violations []json.RawMessage `json:"violations"`
	}](t, c.call("exec", map[string]any{"argv": []string{"ls"}}, ""))
	require.Equal(t, 0, ex.ExitCode)
	require.Empty(t, ex.Violations)
	c.close()

	_, stderr, code = corralCmd(t, "session", "diff", id)
	require.Equal(t, 123, code, "diff still refuses the set")
	require.Contains(t, stderr, "executable bit")
	stdout, _, code = corralCmd(t, "session", "apply", id)
	require.Equal(t, 126, code, "apply still refuses the set: %s", stdout)

	_, stderr, code = corralCmd(t, "session", "exec", id, "--", "rm", "openwiki/run.sh")
	require.Equal(t, 0, code, stderr)
	stdout, stderr, code = corralCmd(t, "session", "diff", id, "--format", "stat")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "0 files changed, 0 insertions(+), 0 deletions(-)\n", stdout, "the fixed set is clean")

	_, stderr, code = corralCmd(t, "session", "exec", id, "--", "cp", "run.sh", "openwiki/again.sh")
	require.Equal(t, 123, code, "made again, charged again: %s", stderr)

	// Over MCP, the call that makes a violation reports it.
	c = startMCP(t, "--session", id)
	ex = structured[struct {
		ExitCode   int               `json:"exit_code"`
		Violations []json.RawMessage `json:"violations"`
	}](t, c.call("exec", map[string]any{"argv": []string{"cp", "run.sh", "openwiki/mcp.sh"}}, ""))
	require.Equal(t, 0, ex.ExitCode)
	require.Len(t, ex.Violations, 1)
	require.Contains(t, string(ex.Violations[0]), "openwiki/mcp.sh")
	c.close()
}
