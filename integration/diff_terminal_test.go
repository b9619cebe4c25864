package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/stretchr/testify/require"
)

// hostileContent is text an agent can write (valid UTF-8, no NUL) that a
// terminal would act on: screen clearing and cursor moves, an OSC-8 link,
// concealed text, a C1 CSI, a carriage return, bidi controls and Unicode
// tag characters.
const hostileContent = "# notes\n\x1b[2J\x1b[1;1Hall clear\n\x1b]8;;https://evil.example/\x1b\\docs\x1b]8;;\x1b\\\n" +
	"\x1b[8mconcealed\x1b[0m\nabc\u202eevil\u2066x\u2069\n\U000E0041\U000E0042tags\n\u009b31mC1\nfake\rcarriage\n"

// corralTo runs corral with stdout to the given file (a terminal, or a
// regular file: a redirect) and returns stderr and the exit code.
func corralTo(t *testing.T, stdout *os.File, args ...string) (string, int) {
	t.Helper()
	require.NoError(t, testutil.BuildCorral())
	full := append([]string{"--namespace", testutil.Namespace, "--state-dir", testutil.StateDir(t), "--image", testutil.TestImageRef}, args...)
	cmd := exec.Command(testutil.CorralPath(), full...)
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stderr.String(), code
}

// TestSessionDiffTerminal: issue 9 item 18. What the agent wrote reaches
// the operator's terminal escaped in every format of session diff; a
// patch written to a file (--output, or a redirect) keeps its bytes
// exactly and applies with git.
func TestSessionDiffTerminal(t *testing.T) {
	e := testutil.Executor(t)
	repo := newRepo(t, map[string]string{
		"README.md":         "# demo\n",
		"evil.txt":          hostileContent,
		"openwiki/index.md": "# index\n\x1b[31mred base line\x1b[0m\nkeep\n",
		"index2.txt":        "# index\n\x1b[31mred base line\x1b[0m\n\x1b]0;owned\x07kept \u202e\n",
	})
	stdout, stderr, code := corralCmd(t, "session", "create", "--repo", repo)
	require.Equal(t, 0, code, stderr)
	id := strings.TrimSpace(stdout)
	t.Cleanup(func() { removeSession(t, e, id) })
	_, stderr, code = corralCmd(t, "session", "exec", id, "--", "cp", "evil.txt", "openwiki/evil.md")
	require.Equal(t, 0, code, stderr)
	_, stderr, code = corralCmd(t, "session", "exec", id, "--", "cp", "index2.txt", "openwiki/index.md")
	require.Equal(t, 0, code, stderr)

	for _, format := range []string{"patch", "stat", "json"} {
		t.Run(format, func(t *testing.T) {
			pty := testutil.OpenPTY(t)
			stderr, code := corralTo(t, pty.Slave, "session", "diff", id, "--format", format)
			require.Equal(t, 0, code, stderr)
			out := pty.Output()
			r, at, bad := testutil.TerminalUnsafe(out)
			require.False(t, bad, "%U at %d reached the terminal:\n%s", r, at, out)
			if format == "patch" {
				for _, want := range []string{`+\x1b[2J\x1b[1;1Hall clear`, `+\x1b]8;;https://evil.example/\x1b\docs`, `+abc<U+202E>evil<U+2066>x<U+2069>`,
					`+<U+E0041><U+E0042>tags`, `+\x9b31mC1`, `+fake\x0dcarriage`, `-keep`, `+\x1b]0;owned\x07kept <U+202E>`} {
					require.Contains(t, string(out), want)
				}
			}
		})
	}

	// A redirect and --output both get the patch byte for byte.
	redirected := filepath.Join(t.TempDir(), "redirect.patch")
	f, err := os.Create(redirected)
	require.NoError(t, err)
	stderr, code = corralTo(t, f, "session", "diff", id)
	require.NoError(t, f.Close())
	require.Equal(t, 0, code, stderr)
	viaRedirect, err := os.ReadFile(redirected)
	require.NoError(t, err)
	output := filepath.Join(t.TempDir(), "output.patch")
	pty := testutil.OpenPTY(t)
	stderr, code = corralTo(t, pty.Slave, "session", "diff", id, "--output", output)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, pty.Output(), "--output writes nothing to the terminal")
	viaOutput, err := os.ReadFile(output)
	require.NoError(t, err)
	require.Equal(t, viaRedirect, viaOutput)
	require.Contains(t, string(viaOutput), "\n+"+strings.ReplaceAll(strings.TrimPrefix(hostileContent, "# notes\n"), "\n", "\n+")[:40], "the agent's bytes, raw")
	require.Contains(t, string(viaOutput), "+\x1b]0;owned\x07kept \u202e\n")
	gitApplyCheck(t, repo, viaOutput)

	// A rejected set's summary goes to stderr, through the same escaping
	// (a path with a control character is refused before it is written).
	require.NoError(t, os.Chmod(filepath.Join(repo, "evil.txt"), 0o755))
	_, stderr, code = corralCmd(t, "session", "exec", id, "--", "cp", "evil.txt", "openwiki/evil.sh")
	require.Equal(t, 123, code, stderr)
	errPTY := testutil.OpenPTY(t)
	cmd := exec.Command(testutil.CorralPath(), "--namespace", testutil.Namespace, "--state-dir", testutil.StateDir(t), "--image", testutil.TestImageRef, "session", "diff", id)
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
	cmd.Stdout, cmd.Stderr = errPTY.Slave, errPTY.Slave
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 123, ee.ExitCode())
	out := errPTY.Output()
	_, _, bad := testutil.TerminalUnsafe(out)
	require.False(t, bad, "%q", out)
	require.Contains(t, string(out), "rejected")
}
