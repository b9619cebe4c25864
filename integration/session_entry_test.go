package integration

// Issue 9 item 1: every way into a session applies every check. A file
// that appears in the repository after a session started, under a name
// the rules hide (a new .env, a cloned nested .git), is refused by every
// entry point with the same rule, leaks nowhere, and leaves nothing.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
)

// lateSecret is in every late file; it must never reach an output.
const lateSecret = "LATE-SECRET-5e1f0c9d"

// lateFile is a file that appears in the repository after a session
// started, under a hidden name.
type lateFile struct {
	name string
	// hidden is the hidden path the refusal names.
	hidden string
	make   func(t *testing.T, repo string)
}

var lateFiles = []lateFile{
	{".env", ".env", func(t *testing.T, repo string) {
		require.NoError(t, os.WriteFile(filepath.Join(repo, ".env"), []byte("TOKEN="+lateSecret+"\n"), 0o644))
	}},
	{"nested .git", "src/vendor/.git", func(t *testing.T, repo string) {
		require.NoError(t, os.MkdirAll(filepath.Join(repo, "src", "vendor", ".git"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(repo, "src", "vendor", ".git", "config"), []byte("[remote]\n\turl = https://u:"+lateSecret+"@example.com/x\n"), 0o644))
	}},
}

// refusalOf is the one line every entry point gives for a late file.
func refusalOf(l lateFile) string {
	return "the repository changed under the session: " + l.hidden + " appeared after it started"
}

// lateRepo is a repository whose rules hide .env (its own ignore file,
// independent of the built-in lists) and .git at any depth.
func lateRepo(t *testing.T) string {
	return newRepo(t, map[string]string{
		".openwikiignore":   ".env\n",
		"README.md":         "readme\n",
		"src/a.go":          "package a\n",
		"openwiki/index.md": "# index\n",
	})
}

// requireNoSecret fails when the secret is in any of outs, in the audit
// log or in a kept patch.
func requireNoSecret(t *testing.T, outs ...string) {
	t.Helper()
	for _, o := range outs {
		require.NotContains(t, o, lateSecret)
	}
	for _, f := range []string{filepath.Join(testutil.StateDir(t), "audit.log")} {
		data, _ := os.ReadFile(f)
		require.NotContains(t, string(data), lateSecret, f)
	}
	patches, _ := filepath.Glob(filepath.Join(testutil.StateDir(t), "patches", "*"))
	for _, p := range patches {
		data, _ := os.ReadFile(p)
		require.NotContains(t, string(data), lateSecret, p)
	}
}

// requireSessionGone fails when anything of session id is left: its
// directory, host mounts, containers.
func requireSessionGone(t *testing.T, e *sandbox.Executor, id string) {
	t.Helper()
	dir := filepath.Join(testutil.StateDir(t), "sessions", id)
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	require.NoError(t, err)
	require.Empty(t, ms, "mounts of session %s", id)
	_, err = os.Lstat(dir)
	require.True(t, errors.Is(err, os.ErrNotExist), "session directory %s is left", dir)
	requireNoContainers(t, e, id)
}

// requireNoContainers fails when a container of session id is left
// (after the background clean-up had its time).
func requireNoContainers(t *testing.T, e *sandbox.Executor, id string) {
	t.Helper()
	ctx := e.Context(context.Background())
	filter := fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, id)
	require.Eventually(t, func() bool {
		cs, err := e.Client().Containers(ctx, filter)
		return err == nil && len(cs) == 0
	}, 20*time.Second, 100*time.Millisecond, "containers of session %s are left", id)
}

func TestLateHiddenFileSessionExecAndApply(t *testing.T) {
	e := testutil.Executor(t)
	for _, l := range lateFiles {
		t.Run(l.name, func(t *testing.T) {
			repo := lateRepo(t)
			stdout, stderr, code := corralCmd(t, "session", "create", "--repo", repo)
			require.Equal(t, 0, code, stderr)
			id := strings.TrimSpace(stdout)
			_, stderr, code = corralCmd(t, "session", "exec", id, "--", "cp", "README.md", "openwiki/readme.md")
			require.Equal(t, 0, code, stderr)
			l.make(t, repo)

			// session exec: the reopening process rescans.
			outE, errE, code := corralCmd(t, "session", "exec", id, "--", "grep", "-r", "SECRET", ".")
			require.Equal(t, 125, code, errE)
			require.Contains(t, errE, refusalOf(l))
			require.Equal(t, 1, strings.Count(errE, "\n"), "one line: %q", errE)
			// serve --mcp --session: refuses to start on it.
			srv := exec.Command(testutil.CorralPath(), serverArgs(t, "--session", id)...)
			srv.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
			outS, err := srv.CombinedOutput()
			require.Error(t, err)
			require.Contains(t, string(outS), refusalOf(l))
			// apply: a way into the session too.
			outA, errA, code := corralCmd(t, "session", "apply", id)
			require.Equal(t, 125, code, errA)
			require.Contains(t, errA, refusalOf(l))
			// The file tools of a process that reopens it.
			_, err = e.OpenSession(context.Background(), id)
			require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
			require.Contains(t, err.Error(), refusalOf(l))
			// What the session wrote stays reachable.
			outD, errD, code := corralCmd(t, "session", "diff", id, "--format", "patch")
			require.Equal(t, 0, code, errD)
			require.Contains(t, outD, "+++ b/openwiki/readme.md")

			requireNoSecret(t, outE, errE, string(outS), outA, errA, outD, errD)
			_, stderr, code = corralCmd(t, "session", "rm", id)
			require.Equal(t, 0, code, stderr)
			requireSessionGone(t, e, id)
		})
	}
}

func TestLateHiddenFileServeMCP(t *testing.T) {
	e := testutil.Executor(t)
	for _, l := range lateFiles {
		for _, mode := range []string{"--repo", "--session"} {
			t.Run(l.name+" "+mode, func(t *testing.T) {
				repo := lateRepo(t)
				var c *mcpClient
				id := ""
				if mode == "--repo" {
					c = startMCP(t, "--repo", repo)
				} else {
					stdout, stderr, code := corralCmd(t, "session", "create", "--repo", repo)
					require.Equal(t, 0, code, stderr)
					id = strings.TrimSpace(stdout)
					c = startMCP(t, "--session", id)
				}
				c.ok("exec", map[string]any{"argv": []string{"cp", "README.md", "openwiki/readme.md"}}, "a write before")
				l.make(t, repo)
				// The server's watch fails the session at once; every tool
				// then refuses, naming the path.
				var texts []string
				for _, call := range []struct {
					tool string
					args map[string]any
				}{
					{"exec", map[string]any{"argv": []string{"grep", "-r", "SECRET", "."}}},
					{"search", map[string]any{"pattern": "SECRET"}},
					{"read", map[string]any{"path": "README.md"}},
					{"list", map[string]any{"path": "."}},
				} {
					res := c.call(call.tool, call.args, "after the late file")
					text := resultText(res)
					require.True(t, res.IsError, "%s: %s", call.tool, text)
					require.Contains(t, text, refusalOf(l), call.tool)
					texts = append(texts, text)
				}
				served := c.close()
				if mode == "--repo" {
					// The server ended the session it made, keeping its
					// change set as a patch.
					require.Eventually(t, func() bool {
						return strings.Contains(c.stderr.String(), "removed "+served+": 1 change(s) kept in ")
					}, 30*time.Second, 100*time.Millisecond, c.stderr.String())
					patch, err := os.ReadFile(filepath.Join(testutil.StateDir(t), "patches", served+".patch"))
					require.NoError(t, err)
					require.Contains(t, string(patch), "+++ b/openwiki/readme.md")
				} else {
					_, stderr, code := corralCmd(t, "session", "rm", id)
					require.Equal(t, 0, code, stderr)
					served = id
				}
				require.Eventually(t, func() bool {
					_, err := os.Lstat(filepath.Join(testutil.StateDir(t), "sessions", served))
					return errors.Is(err, os.ErrNotExist)
				}, 30*time.Second, 100*time.Millisecond)
				requireSessionGone(t, e, served)
				requireNoSecret(t, append(texts, c.stderr.String())...)
			})
		}
	}
}

// TestLateHiddenFileKillsRunningCalls: a long-lived owner's watch fails
// the session closed at once, killing the call that runs (its output is
// not returned), not only refusing the next one.
func TestLateHiddenFileKillsRunningCalls(t *testing.T) {
	e := testutil.Executor(t) // not Cold: the session is watched
	for _, l := range lateFiles {
		t.Run(l.name, func(t *testing.T) {
			repo := lateRepo(t)
			s := newSessionOn(t, e, repo)
			type outcome struct {
				res *sandbox.Result
				err error
			}
			done := make(chan outcome, 1)
			started := time.Now()
			go func() {
				r, err := testutil.ExecWithoutPolicy(context.Background(), s, []string{"probe", "sleep", "60s"}, nil, nil)
				done <- outcome{r, err}
			}()
			waitRunning(t, e, s.ID)
			l.make(t, repo)
			select {
			case o := <-done:
				require.Nil(t, o.res)
				require.True(t, errdefs.IsFailedPrecondition(o.err), "%v", o.err)
				require.Contains(t, o.err.Error(), refusalOf(l))
				require.Less(t, time.Since(started), 30*time.Second)
			case <-time.After(30 * time.Second):
				t.Fatal("the running call was not killed")
			}
			// Every later call, and the file tools, refuse.
			_, err := s.Exec(context.Background(), []string{"grep", "-r", "SECRET", "."}, nil, nil)
			require.ErrorContains(t, err, refusalOf(l))
			_, err = s.Search(context.Background(), "SECRET", ".", sandbox.SearchOptions{})
			require.ErrorContains(t, err, refusalOf(l))
			require.ErrorContains(t, s.Err(), refusalOf(l))
			// What it wrote stays reachable.
			_, err = s.Changes()
			require.NoError(t, err)
			s.Idle()
			requireNoContainers(t, e, s.ID)
		})
	}
}

// waitRunning waits until a container of session id runs a call.
func waitRunning(t *testing.T, e *sandbox.Executor, id string) {
	t.Helper()
	ctx := e.Context(context.Background())
	filter := fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, id)
	require.Eventually(t, func() bool {
		cs, err := e.Client().Containers(ctx, filter)
		if err != nil {
			return false
		}
		for _, c := range cs {
			if runsACall(ctx, c) {
				return true
			}
		}
		return false
	}, 60*time.Second, 50*time.Millisecond, "no container of %s started", id)
}

// TestLateHiddenFileRunAndFileTools: a new session (corral run, a new
// session's file tools) computes its hidden set when it starts, so the
// same file is simply hidden there: absent from grep -r and the file
// tools, refused by name.
func TestLateHiddenFileRunAndFileTools(t *testing.T) {
	testutil.Executor(t)
	for _, l := range lateFiles {
		t.Run(l.name, func(t *testing.T) {
			repo := lateRepo(t)
			l.make(t, repo)
			stdout, stderr, code := corralCmd(t, "run", "--repo", repo, "--", "grep", "-r", "SECRET", ".")
			require.Equal(t, 1, code, "grep finds nothing: %s", stderr)
			requireNoSecret(t, stdout, stderr)
			target := l.hidden + "/config"
			if l.name == ".env" {
				target = ".env"
			}
			_, stderr, code = corralCmd(t, "run", "--repo", repo, "--", "cat", target)
			require.Equal(t, 126, code, stderr)
			requireNoSecret(t, stderr)

			s := newSession(t, repo)
			res, err := s.Search(context.Background(), "SECRET", ".", sandbox.SearchOptions{})
			require.NoError(t, err)
			require.Empty(t, res.Matches)
			_, err = s.Read(context.Background(), l.hidden, sandbox.ReadOptions{})
			require.Error(t, err)
			requireNoSecret(t, fmt.Sprint(res), err.Error())
		})
	}
}
