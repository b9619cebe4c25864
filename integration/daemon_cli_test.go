package integration

// The CLI and the MCP server through corral's daemon (issue 10 item 4):
// the same commands, standalone and through one daemon started for the
// test run, must print the same output, exit with the same codes and
// refuse with the same lines.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/client"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The daemon of the test run: started by the first test that needs it,
// stopped by TestMain (stopTestDaemon).
var testDaemon struct {
	once   sync.Once
	cmd    *exec.Cmd
	dir    string // holds state/ and corral.sock
	sock   string
	stderr *lockedBuffer
	done   chan error
	err    error
}

// testDaemonSocket returns the socket of the test run's daemon, starting
// it on first use (its own state directory, the test image and
// namespace).
func testDaemonSocket(t testing.TB) string {
	t.Helper()
	testutil.Executor(t) // the test image, and CORRAL_INIT for the child
	require.NoError(t, testutil.BuildCorral())
	d := &testDaemon
	d.once.Do(func() {
		d.dir, d.err = os.MkdirTemp("", "corral-it-daemon-run-")
		if d.err != nil {
			return
		}
		d.err = os.Chmod(d.dir, 0o755)
		d.sock = filepath.Join(d.dir, "corral.sock")
		d.cmd = exec.Command(testutil.CorralPath(), "--namespace", testutil.Namespace, "--state-dir", filepath.Join(d.dir, "state"),
			"--image", testutil.TestImageRef, "daemon", "--socket", d.sock, "--socket-group", "nogroup")
		d.cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
		d.stderr = &lockedBuffer{}
		d.cmd.Stderr = d.stderr
		if d.err = d.cmd.Start(); d.err != nil {
			return
		}
		d.done = make(chan error, 1)
		go func() { d.done <- d.cmd.Wait() }()
		deadline := time.Now().Add(90 * time.Second)
		for {
			c, err := client.Dial(context.Background(), d.sock)
			if err == nil {
				c.Close()
				return
			}
			select {
			case err := <-d.done:
				d.done <- err
				d.err = fmt.Errorf("the daemon exited before answering (%v):\n%s", err, d.stderr.String())
				return
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				d.err = fmt.Errorf("the daemon did not answer at %s:\n%s", d.sock, d.stderr.String())
				return
			}
		}
	})
	require.NoError(t, d.err)
	return d.sock
}

// stopTestDaemon stops the test run's daemon, if one started, and fails
// when it did not stop cleanly or left a mount behind.
func stopTestDaemon() error {
	d := &testDaemon
	if d.cmd == nil || d.cmd.Process == nil || d.done == nil {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		if err != nil {
			return fmt.Errorf("the test daemon: %v:\n%s", err, d.stderr.String())
		}
	case <-time.After(90 * time.Second):
		_ = d.cmd.Process.Kill()
		return fmt.Errorf("the test daemon did not stop on SIGTERM:\n%s", d.stderr.String())
	}
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(d.dir))
	if err != nil {
		return err
	}
	if len(ms) > 0 {
		return fmt.Errorf("the test daemon left %d mounts under %s", len(ms), d.dir)
	}
	return os.RemoveAll(d.dir)
}

// cliMode is how a CLI command is run: standalone, or through the test
// daemon.
type cliMode struct {
	name   string
	daemon string // socket; "" is standalone (--no-daemon)
}

func cliModes(t *testing.T) []cliMode {
	return []cliMode{{name: "standalone"}, {name: "daemon", daemon: testDaemonSocket(t)}}
}

// corral runs the CLI in mode m.
func (m cliMode) corral(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	if m.daemon == "" {
		return corralCmd(t, append([]string{"--no-daemon"}, args...)...)
	}
	return corralCmd(t, append([]string{"--daemon", m.daemon}, args...)...)
}

// cliStep is one command of TestCLIThroughDaemon and what it gave.
type cliStep struct {
	args           []string
	stdout, stderr string // normalized
	raw            string // stdout as printed
	code           int
}

// durations matches the fields that differ from run to run.
var durations = regexp.MustCompile(`"(duration_ms|duration_ns|created|corral_version)": [^,\n]+`)

// normalize replaces what differs between the modes by design: the
// repository's path, the session id, times and the version.
func normalize(s, repo, id string) string {
	s = strings.ReplaceAll(s, repo, "REPO")
	if id != "" {
		s = strings.ReplaceAll(s, id, "SESSION")
	}
	return durations.ReplaceAllString(s, `"$1": X`)
}

// TestCLIThroughDaemon runs one script of CLI commands standalone and
// through the daemon, each on its own copy of the repository, and
// requires the same stdout, stderr and exit code from every step: run
// (output, JSON, refusals, a limit from a profile file, a rejected change
// set, --diff-out), session create/exec/diff/apply (review, JSON,
// approval, write)/ls/rm.
func TestCLIThroughDaemon(t *testing.T) {
	modes := cliModes(t)
	tiny := docsProfileFile(t, "tiny", "output: 1MiB", "output: 4KiB")

	var got [2][]cliStep
	var patches [2]string
	for i, m := range modes {
		repo := violationRepo(t)
		diffOut := filepath.Join(t.TempDir(), "run.patch")
		var id string
		step := func(args ...string) cliStep {
			t.Helper()
			for j := range args {
				args[j] = strings.ReplaceAll(args[j], "{repo}", repo)
				args[j] = strings.ReplaceAll(args[j], "{id}", id)
			}
			stdout, stderr, code := m.corral(t, args...)
			s := cliStep{args: args, stdout: normalize(stdout, repo, id), stderr: normalize(stderr, repo, id), raw: stdout, code: code}
			got[i] = append(got[i], s)
			return s
		}
		step("run", "--repo", "{repo}", "--", "cat", "README.md")
		step("run", "--json", "--repo", "{repo}", "--", "ls", "-a", "openwiki")
		step("run", "--repo", "{repo}", "--", "cat", "secrets/key.txt")
		step("run", "--json", "--repo", "{repo}", "--", "cat", "secrets/key.txt")
		step("run", "--repo", "{repo}", "--", "sh", "-c", "id")
		step("run", "--repo", "{repo}", "--", "cat", "no-such-file")
		step("run", "--repo", "{repo}", "--profile", tiny, "--", "cat", "big.txt")
		step("run", "--json", "--repo", "{repo}", "--profile", tiny, "--", "cat", "big.txt")
		step("run", "--repo", "{repo}", "--", "cp", "run.sh", "openwiki/run.sh")
		step("run", "--json", "--repo", "{repo}", "--", "cp", "run.sh", "openwiki/run.sh")
		step("run", "--repo", "{repo}", "--diff-out", diffOut, "--", "cp", "README.md", "openwiki/x.md")
		p, err := os.ReadFile(diffOut)
		require.NoError(t, err, m.name)
		patches[i] = string(p)
		step("run", "--repo", "{repo}", "--page", "openwiki/index.md", "--read-only", "--", "ls")

		s := step("session", "create", "--repo", "{repo}", "--agent-id", "alice", "--json")
		require.Equal(t, 0, s.code, "%s: %s", m.name, s.stderr)
		var rec sandbox.SessionRecord
		require.NoError(t, json.Unmarshal([]byte(s.raw), &rec), s.raw)
		id = rec.ID
		got[i][len(got[i])-1].stdout = normalize(got[i][len(got[i])-1].stdout, repo, id)
		t.Cleanup(func() { m.corral(t, "session", "rm", id) })
		step("session", "exec", "{id}", "--", "cp", "README.md", "openwiki/agents/alice/readme.md")
		step("session", "exec", "{id}", "--", "cp", "README.md", "openwiki/agents/bob/readme.md")
		step("session", "exec", "--json", "{id}", "--", "cat", "openwiki/agents/alice/readme.md")
		step("session", "exec", "{id}", "--", "cat", "secrets/key.txt")
		step("session", "diff", "{id}")
		step("session", "diff", "{id}", "--format", "stat")
		step("session", "diff", "{id}", "--format", "json")
		step("session", "apply", "{id}")
		step("session", "apply", "--json", "{id}")
		step("session", "apply", "--no-diff", "--dry-run-only", "low", "{id}")
		step("session", "exec", "{id}", "--", "cp", "run.sh", "openwiki/agents/alice/run.sh")
		step("session", "exec", "--json", "{id}", "--", "ls", "openwiki/agents/alice")
		step("session", "diff", "{id}")
		step("session", "diff", "{id}", "--format", "json")
		step("session", "apply", "{id}")
		step("session", "apply", "--json", "{id}")
		step("session", "exec", "{id}", "--", "rm", "openwiki/agents/alice/run.sh")
		rev := step("session", "apply", "--json", "{id}")
		var report struct {
			Items []struct{ Token string }
		}
		require.NoError(t, json.Unmarshal([]byte(rev.raw), &report), rev.raw)
		require.Len(t, report.Items, 1, "%s: %s", m.name, rev.stdout)
		step("session", "apply", "{id}", "--approve", "ffffffffffffffff")
		step("session", "apply", "--json", "{id}", "--approve", "ffffffffffffffff")
		step("session", "apply", "{id}", "--approve", report.Items[0].Token)
		data, err := os.ReadFile(filepath.Join(repo, "openwiki/agents/alice/readme.md"))
		require.NoError(t, err, "%s: the approved change was written", m.name)
		require.Equal(t, "# demo\nhello\nworld\n", string(data))
		step("session", "apply", "{id}", "--approve", report.Items[0].Token)

		s = step("session", "ls")
		require.Contains(t, s.stdout, "SESSION", m.name)
		got[i] = got[i][:len(got[i])-1] // other sessions may be listed
		s = step("session", "ls", "--json")
		var list []sandbox.SessionInfo
		require.NoError(t, json.Unmarshal([]byte(s.raw), &list), s.raw)
		got[i] = got[i][:len(got[i])-1]
		step("session", "rm", "{id}")
		step("session", "rm", "--json", "{id}", "0123456789ab")
		s = step("session", "exec", "{id}", "--", "ls")
		require.Equal(t, 125, s.code)
		require.Contains(t, s.stderr, "not found", m.name)
		got[i] = got[i][:len(got[i])-1] // the message names the state directory standalone
	}
	require.Equal(t, patches[0], patches[1], "--diff-out")
	require.Len(t, got[1], len(got[0]))
	for j := range got[0] {
		a, b := got[0][j], got[1][j]
		what := strings.Join(b.args, " ")
		assert.Equal(t, a.code, b.code, "exit code of %s\nstandalone stderr: %s\ndaemon stderr: %s", what, a.stderr, b.stderr)
		assert.Equal(t, a.stdout, b.stdout, "stdout of %s", what)
		assert.Equal(t, a.stderr, b.stderr, "stderr of %s", what)
	}
}

// TestCLIDaemonSelection: --daemon naming a socket nothing answers on
// fails (exit 125, one line) instead of falling back; --no-daemon with
// --daemon is a usage error; $CORRAL_DAEMON names the daemon.
func TestCLIDaemonSelection(t *testing.T) {
	sock := testDaemonSocket(t)
	repo := ftRepo(t)
	_, stderr, code := corralCmd(t, "--daemon", filepath.Join(t.TempDir(), "none.sock"), "run", "--repo", repo, "--", "ls")
	require.Equal(t, 125, code, stderr)
	require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	require.Contains(t, stderr, "--no-daemon runs standalone")
	_, stderr, code = corralCmd(t, "--daemon", sock, "--no-daemon", "run", "--repo", repo, "--", "ls")
	require.Equal(t, 125, code, stderr)
	require.Contains(t, stderr, "exclude each other")

	// $CORRAL_DAEMON: the session is the daemon's (standalone does not
	// know it).
	cmd := exec.Command(testutil.CorralPath(), "session", "create", "--repo", repo)
	cmd.Env = append(os.Environ(), client.EnvSocket+"="+sock, "CONTAINERD_ADDRESS="+testutil.Address())
	var stdout, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &errb
	require.NoError(t, cmd.Run(), errb.String())
	id := strings.TrimSpace(stdout.String())
	c := client.New(sock)
	defer c.Close()
	_, err := c.Session(context.Background(), id)
	require.NoError(t, err)
	_, err = c.DiscardSession(context.Background(), id)
	require.NoError(t, err)
	_, _, code = corralCmd(t, "--no-daemon", "session", "exec", id, "--", "ls")
	require.Equal(t, 125, code, "a daemon's session is not in the standalone state directory")
}

// TestMCPThroughDaemon runs one MCP conversation with `serve --mcp`
// standalone and through the daemon, each on its own copy of the
// repository, and requires the same answer (text and error flag) to every
// call: list, read, search, glob, write, edit, exec (with refusals and a
// violation) and diff in each format.
func TestMCPThroughDaemon(t *testing.T) {
	modes := cliModes(t)
	type answer struct {
		call    string
		text    string
		isError bool
	}
	var got [2][]answer
	for i, m := range modes {
		repo := violationRepo(t)
		flag := []string{"--no-daemon"}
		if m.daemon != "" {
			flag = []string{"--daemon", m.daemon}
		}
		c := startMCP(t, append(flag, "--repo", repo)...)
		var id string
		if m.daemon != "" {
			t.Cleanup(func() {
				if id != "" {
					dc := client.New(m.daemon)
					defer dc.Close()
					// The server ended the session it made (its patch
					// kept); a failed test may have left it.
					if _, err := dc.DiscardSession(context.Background(), id); err != nil {
						require.True(t, errdefs.IsNotFound(err), "%v", err)
					}
				}
			})
		}
		call := func(name string, args map[string]any) string {
			t.Helper()
			res := c.call(name, args, "")
			text := strings.ReplaceAll(resultText(res), repo, "REPO")
			got[i] = append(got[i], answer{call: fmt.Sprintf("%s %v", name, args), text: text, isError: res.IsError})
			return resultText(res)
		}
		call("list", map[string]any{})
		call("list", map[string]any{"path": "docs"})
		call("read", map[string]any{"path": "README.md"})
		call("read", map[string]any{"path": "README.md", "offset": 1, "limit": 1})
		call("read", map[string]any{"path": "secrets/key.txt"})
		call("read", map[string]any{"path": "no/such.md"})
		call("search", map[string]any{"pattern": "TODO"})
		call("search", map[string]any{"pattern": "KEY", "path": "secrets"})
		call("glob", map[string]any{"pattern": "docs/*.md"})
		call("glob", map[string]any{"pattern": "**"})
		call("write", map[string]any{"path": "openwiki/new.md", "content": "one\ntwo\n"})
		call("write", map[string]any{"path": "docs/x.md", "content": "x"})
		text := call("read", map[string]any{"path": "openwiki/new.md"})
		sha := regexp.MustCompile(`sha256 ([0-9a-f]{64})`).FindStringSubmatch(text)
		require.NotNil(t, sha, text)
		call("edit", map[string]any{"path": "openwiki/new.md", "old_text": "two", "new_text": "three", "expected_sha256": sha[1]})
		call("edit", map[string]any{"path": "openwiki/new.md", "old_text": "one", "new_text": "1", "expected_sha256": sha[1]})
		call("exec", map[string]any{"argv": []string{"cat", "openwiki/new.md"}})
		call("exec", map[string]any{"argv": []string{"sh", "-c", "id"}})
		call("exec", map[string]any{"argv": []string{"cat", "secrets/key.txt"}})
		call("exec", map[string]any{"argv": []string{"cp", "run.sh", "openwiki/run.sh"}})
		call("diff", map[string]any{})
		call("diff", map[string]any{"format": "patch"})
		call("diff", map[string]any{"format": "json"})
		call("exec", map[string]any{"argv": []string{"rm", "openwiki/run.sh"}})
		call("diff", map[string]any{"format": "patch"})
		id = c.close()
		require.NotEmpty(t, id)
	}
	require.Len(t, got[1], len(got[0]))
	for j := range got[0] {
		a, b := got[0][j], got[1][j]
		assert.Equal(t, a.isError, b.isError, "error flag of %s: %s", a.call, b.text)
		assert.Equal(t, a.text, b.text, "answer to %s", a.call)
	}
}
