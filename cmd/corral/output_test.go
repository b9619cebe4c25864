package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// runCLI runs the CLI in-process as main does and returns stdout,
// stderr and the exit code.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := execute(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

// jsonOut decodes stdout as exactly one JSON document.
func jsonOut(t *testing.T, stdout string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var v map[string]any
	require.NoError(t, dec.Decode(&v), "stdout is JSON: %q", stdout)
	require.False(t, dec.More(), "one JSON document: %q", stdout)
	return v
}

// requireJSONError checks the stable error shape and returns the object.
func requireJSONError(t *testing.T, stdout string, code int, kind string) map[string]any {
	t.Helper()
	v := jsonOut(t, stdout)
	e, ok := v["error"].(map[string]any)
	require.True(t, ok, "an error object: %s", stdout)
	require.Equal(t, kind, e["kind"], stdout)
	require.NotEmpty(t, e["message"], stdout)
	require.Equal(t, float64(code), v["exit_code"], stdout)
	return v
}

// jsonCommands lists every command that prints JSON, with the flag that
// asks for it and the arguments it needs to get past argument checks.
func jsonCommands(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.Flags().Lookup("json") != nil {
			out = append(out, append(append([]string(nil), path...), "--json"))
		} else if f := c.Flags().Lookup("format"); f != nil {
			out = append(out, append(append([]string(nil), path...), "--format", "json"))
		}
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(newRootCommand(), nil)
	return out
}

func TestEveryJSONCommandAnswersBadFlagsInJSON(t *testing.T) {
	cmds := jsonCommands(t)
	var names []string
	for _, c := range cmds {
		names = append(names, strings.Join(c, " "))
	}
	require.ElementsMatch(t, []string{
		"version --json", "doctor --json",
		"apply --json", "check --json", "gc --json", "image build --json", "profiles --json", "run --json",
		"session apply --json", "session create --json", "session diff --format json", "session exec --json",
		"session ls --json", "session prune --json", "session rm --json", "patches ls --json",
	}, names)
	for _, c := range cmds {
		t.Run(strings.Join(c, " "), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, append(c, "--no-such-flag")...)
			require.Equal(t, exitFailed, code)
			v := requireJSONError(t, stdout, exitFailed, kindUsage)
			require.Contains(t, v["error"].(map[string]any)["message"], "unknown flag: --no-such-flag")
			require.Equal(t, "corral: unknown flag: --no-such-flag\n", stderr)

			// The flag after the bad one counts too.
			stdout, _, code = runCLI(t, append(append(c[:len(c)-1:len(c)-1], "--no-such-flag"), c[len(c)-1])...)
			require.Equal(t, exitFailed, code)
			if c[len(c)-1] == "--json" {
				requireJSONError(t, stdout, exitFailed, kindUsage)
			}
		})
	}
	// Without --json nothing reaches stdout.
	stdout, stderr, code := runCLI(t, "session", "ls", "--no-such-flag")
	require.Equal(t, exitFailed, code)
	require.Empty(t, stdout)
	require.Equal(t, "corral: unknown flag: --no-such-flag\n", stderr)
	// A --json that belongs to the tool's argv does not count.
	stdout, _, code = runCLI(t, "run", "--no-such-flag", "--", "grep", "--json")
	require.Equal(t, exitFailed, code)
	require.Empty(t, stdout)
}

func TestJSONUsageErrors(t *testing.T) {
	repo := t.TempDir()
	applyRepoDir, applyPatchFile, applyState := applyRepo(t)
	for _, args := range [][]string{
		{"session", "rm", "--json"},               // no id
		{"profiles", "--json", "a", "b"},          // too many
		{"check", "--json", "--repo", repo},       // no command
		{"check", "--json", "--repo", repo, "-x"}, // command not after --
		{"run", "--json", "--", "ls"},             // --repo missing
		{"run", "--json", "--repo", repo, "--page", "openwiki/a.md", "--read-only", "--", "ls"},
		{"session", "diff", "x", "--format", "json", "--format", "xml"},
		{"session", "exec", "--json", "abc"}, // no --
		{"serve", "--json"},                  // serve has no --json: not JSON
		{"apply", "--json", "--repo", applyRepoDir, "--patch", applyPatchFile, "--state-dir", applyState, "--dry-run-only", "severe"},
		{"no-such-command", "--json"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, args...)
			require.Equal(t, exitFailed, code, stderr)
			require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			if args[0] == "serve" || args[0] == "no-such-command" {
				require.Empty(t, stdout, "no JSON output to ask for")
				return
			}
			if args[0] == "session" && args[1] == "diff" {
				require.Empty(t, stdout, "--format xml is not JSON")
				return
			}
			requireJSONError(t, stdout, exitFailed, kindUsage)
		})
	}
}

func TestJSONRefusalAndFailure(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "openwiki"), 0o755))

	stdout, stderr, code := runCLI(t, "check", "--json", "--repo", repo, "--", "sh", "-c", "id")
	require.Equal(t, exitRefused, code)
	v := requireJSONError(t, stdout, exitRefused, kindRefused)
	require.Equal(t, "sh", v["refusal"].(map[string]any)["token"])
	require.Equal(t, "corral: "+v["error"].(map[string]any)["message"].(string)+"\n", stderr)

	stdout, _, code = runCLI(t, "check", "--json", "--repo", repo, "--", "ls", "openwiki")
	require.Equal(t, 0, code)
	require.Equal(t, true, jsonOut(t, stdout)["allowed"])

	noDaemon := filepath.Join(t.TempDir(), "containerd.sock")
	// What needs containerd says so when none answers.
	for _, args := range [][]string{
		{"run", "--json", "--repo", repo, "--", "ls"},
		{"gc", "--json"},
		{"image", "build", "--json"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, append([]string{"--address", noDaemon, "--state-dir", t.TempDir()}, args...)...)
			require.Equal(t, exitFailed, code, stderr)
			v := requireJSONError(t, stdout, exitFailed, kindFailed)
			require.Contains(t, v["error"].(map[string]any)["message"], "containerd")
		})
	}
	// Session state needs none: an unknown session is not found, with or
	// without a containerd.
	for _, args := range [][]string{
		{"session", "rm", "--json", "0123456789ab"},
		{"session", "exec", "--json", "0123456789ab", "--", "ls"},
		{"session", "diff", "0123456789ab", "--format", "json"},
		{"session", "apply", "--json", "0123456789ab"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, append([]string{"--address", noDaemon, "--state-dir", t.TempDir()}, args...)...)
			require.Equal(t, exitFailed, code, stderr)
			v := requireJSONError(t, stdout, exitFailed, kindFailed)
			require.Contains(t, v["error"].(map[string]any)["message"], "session 0123456789ab: not found")
		})
	}
	stdout, stderr, code = runCLI(t, "--address", noDaemon, "--state-dir", t.TempDir(), "session", "ls", "--json")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "[]\n", stdout)

	stdout, _, code = runCLI(t, "profiles", "--json", "no-such-profile")
	require.Equal(t, exitFailed, code)
	requireJSONError(t, stdout, exitFailed, kindFailed)
	stdout, _, code = runCLI(t, "apply", "--json", "--state-dir", t.TempDir(), "--repo", repo, "--patch", filepath.Join(repo, "none.diff"))
	require.Equal(t, exitFailed, code)
	requireJSONError(t, stdout, exitFailed, kindFailed)
}

func TestJSONApplyRefusedAndConflict(t *testing.T) {
	repo, patch, state := applyRepo(t)
	// A change outside the write scope: the report, refused, exit 126.
	bad := filepath.Join(t.TempDir(), "bad.diff")
	require.NoError(t, os.WriteFile(bad, []byte(strings.ReplaceAll(applyPatch, "openwiki/pages/", "src/")), 0o644))
	stdout, stderr, code := runCLI(t, "apply", "--json", "--state-dir", state, "--repo", repo, "--patch", bad)
	require.Equal(t, exitRefused, code, stderr)
	requireJSONError(t, stdout, exitRefused, kindRefused)

	// The base changed under an approved change: conflict, exit 3.
	stdout, _, code = runCLI(t, "apply", "--state-dir", state, "--repo", repo, "--patch", patch)
	require.Equal(t, 0, code)
	toks := applyTokens(stdout)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "openwiki/pages/a.md"), []byte("# A\nchanged\n"), 0o644))
	args := []string{"apply", "--json", "--state-dir", state, "--repo", repo, "--patch", patch}
	for _, tok := range toks {
		args = append(args, "--approve", tok)
	}
	stdout, stderr, code = runCLI(t, args...)
	require.Equal(t, exitConflict, code, stderr)
	requireJSONError(t, stdout, exitConflict, kindConflict)
}

func TestProfilesJSON(t *testing.T) {
	stdout, _, code := runCLI(t, "profiles", "--json")
	require.Equal(t, 0, code)
	var list []profileOutput
	require.NoError(t, json.Unmarshal([]byte(stdout), &list))
	require.NotEmpty(t, list)
	var names []string
	for _, p := range list {
		names = append(names, p.Name)
	}
	require.Contains(t, names, "docs")

	stdout, _, code = runCLI(t, "profiles", "--json", "docs")
	require.Equal(t, 0, code)
	var p profileOutput
	require.NoError(t, json.Unmarshal([]byte(stdout), &p))
	require.Equal(t, "docs", p.Name)
	require.Contains(t, p.Commands, "grep")
	require.NotEmpty(t, p.Resources["timeout"])
	require.Equal(t, []string{}, p.Expose)
	require.Equal(t, []string{"agent-config", "secrets", "gitignore"}, p.Hides)

	// A profile's expose: list, and the older expose_agent_config.
	docs, err := os.ReadFile(filepath.Join("..", "..", "profiles", "builtin", "docs.yaml"))
	require.NoError(t, err)
	for extra, want := range map[string][]string{
		"expose: [secrets, gitignore]\n": {"secrets", "gitignore"},
		"expose_agent_config: true\n":    {"agent-config"},
	} {
		file := filepath.Join(t.TempDir(), "p.yaml")
		require.NoError(t, os.WriteFile(file, append(append([]byte(nil), docs...), extra...), 0o644))
		stdout, stderr, code := runCLI(t, "profiles", "--json", file)
		require.Equal(t, 0, code, stderr)
		p = profileOutput{}
		require.NoError(t, json.Unmarshal([]byte(stdout), &p))
		require.Equal(t, want, p.Expose, extra)
		require.Len(t, p.Hides, 3-len(want), extra)
	}

	stdout, _, code = runCLI(t, "profiles")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "docs\t")
}

// hostileText holds what must never reach a reviewer's terminal raw:
// escape sequences that clear the screen, move the cursor, conceal text
// and plant an OSC-8 link, a C1 CSI, a carriage return, bidi controls and
// Unicode tag characters.
const hostileText = "one\n\x1b[2J\x1b[1;1Hcleared\n\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\\n" +
	"\x1b[8mconcealed\x1b[0m\nabc\u202eevil\u2066x\u2069\n\U000E0041\U000E0042tags\n\u009b31mC1\n\rcarriage\nzero\u200bwidth\n"

func TestWriteJSONIsTerminalSafe(t *testing.T) {
	v := map[string]string{"path": hostileText}
	var buf bytes.Buffer
	require.NoError(t, writeJSON(&buf, v))
	_, at, bad := testutil.TerminalUnsafe(buf.Bytes())
	require.False(t, bad, "unsafe byte at %d: %q", at, buf.String())
	var back map[string]string
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	require.Equal(t, v, back, "the same JSON values")
	require.Contains(t, buf.String(), `\u202e`)
	require.Contains(t, buf.String(), `\udb40\udc41`, "a tag character as a surrogate pair")
}

func TestForTerminal(t *testing.T) {
	var buf bytes.Buffer
	require.Equal(t, hostileText, forTerminal(&buf, hostileText), "not a terminal: unchanged")

	pty := testutil.OpenPTY(t)
	_, err := io.WriteString(pty.Slave, forTerminal(pty.Slave, hostileText))
	require.NoError(t, err)
	out := pty.Output()
	r, at, bad := testutil.TerminalUnsafe(out)
	require.False(t, bad, "%U at %d reached the terminal: %q", r, at, out)
	for _, want := range []string{`\x1b[2J`, `\x1b]8;;https://evil.example/\x1b\click`, `abc<U+202E>evil<U+2066>x<U+2069>`,
		`<U+E0041><U+E0042>tags`, `\x9b31mC1`, `\x0dcarriage`, `zero<U+200B>width`} {
		require.Contains(t, string(out), want)
	}
	require.Equal(t, strings.Count(hostileText, "\n"), strings.Count(string(out), "\n"), "lines stay lines")
}

func TestErrorLineOnTerminal(t *testing.T) {
	pty := testutil.OpenPTY(t)
	var stdout bytes.Buffer
	code := execute(context.Background(), []string{"profiles", "/nonexistent/\x1b[2Jp\u202e.yaml"}, strings.NewReader(""), &stdout, pty.Slave)
	require.Equal(t, exitFailed, code)
	out := pty.Output()
	_, _, bad := testutil.TerminalUnsafe(out)
	require.False(t, bad, "%q", out)
	require.Contains(t, string(out), `corral: `)
	require.Contains(t, string(out), `\x1b[2Jp<U+202E>.yaml`)
}
