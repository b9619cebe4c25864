package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

const secret = "SECRET-7f3a9c1e"

// hiddenRepo has an ignored file and directory, symlinks pointing at them,
// a .git directory at two depths and openwiki/.claims.
func hiddenRepo(t *testing.T) string {
	return newRepo(t, map[string]string{
		".openwikiignore":        "secrets/\n.env\n",
		".env":                   secret,
		"secrets/key":            secret,
		"src/main.go":            "package main\n",
		"src/link-dir":           "-> ../secrets",
		"src/link-file":          "-> ../.env",
		"src/link-git":           "-> ../.git/config",
		".git/config":            "[core] " + secret,
		"vendor/lib/.git/config": "[core] " + secret,
		"openwiki/index.md":      "# index\n",
		"openwiki/.claims/a":     secret,
	})
}

func TestHiddenPathsAreAbsent(t *testing.T) { forEachRuntime(t, testHiddenPathsAreAbsent) }

func testHiddenPathsAreAbsent(t *testing.T, rt testRuntime) {
	repo := hiddenRepo(t)
	s := rt.session(t, repo)

	ls := inBox(t, s, "ls", "-aR", ".")
	if x := rt.enforces(t); !x.StatxWorks {
		require.NotEqual(t, 0, ls.ExitCode)
		require.Contains(t, string(ls.Stderr), x.StatxError)
		ls = inBox(t, s, "busybox", "ls", "-aR", ".")
	}
	require.Equal(t, 0, ls.ExitCode, string(ls.Stderr))
	for _, name := range []string{"secrets", ".env", ".git", ".claims"} {
		require.NotContains(t, out(ls), name+"\n", "ls -aR shows %s", name)
	}
	require.Contains(t, out(ls), "main.go")

	find := inBox(t, s, "find", ".")
	require.Equal(t, 0, find.ExitCode)
	for _, l := range lines(out(find)) {
		for _, bad := range []string{"secrets", ".env", ".git", ".claims"} {
			require.NotContains(t, l, bad, "find shows %s", l)
		}
	}

	grep := inBox(t, s, "grep", "-r", secret, ".")
	require.Equal(t, 1, grep.ExitCode, "grep -r found hidden bytes: %s", out(grep))
	requireNoLeak(t, grep, secret)

	// Direct reads, and reads through symlinks that point at hidden paths:
	// the same "not found" whether or not the target exists.
	for _, p := range []string{"secrets/key", ".env", ".git/config", "vendor/lib/.git/config",
		"openwiki/.claims/a", "src/link-dir/key", "src/link-file", "src/link-git", "secrets/does-not-exist"} {
		r := inBox(t, s, "cat", p)
		require.Equal(t, 1, r.ExitCode, "cat %s", p)
		require.Contains(t, string(r.Stderr), "No such file or directory", "cat %s", p)
		requireNoLeak(t, r, secret)
	}
}

func TestRefusalNamesRuleAndStartsNothing(t *testing.T) {
	forEachRuntime(t, testRefusalNamesRuleAndStartsNothing)
}

func testRefusalNamesRuleAndStartsNothing(t *testing.T, rt testRuntime) {
	repo := hiddenRepo(t)
	e := rt.executor(t)
	s := newSessionOn(t, e, repo)
	ctx := e.Context(context.Background())
	// This process's containers: other test processes may share the
	// namespace.
	mine := fmt.Sprintf("labels.%q==%d", sandbox.LabelPID, os.Getpid())
	before, err := e.Client().Containers(ctx, mine)
	require.NoError(t, err)

	for _, tc := range []struct {
		argv []string
		kind allowlist.Kind
		rule string
	}{
		{[]string{"cat", "secrets/key"}, allowlist.KindPath, ".openwikiignore:1 hides secrets/"},
		{[]string{"cat", ".env"}, allowlist.KindPath, ".openwikiignore:2 hides .env"},
		{[]string{"cat", "src/link-file"}, allowlist.KindPath, ".openwikiignore:2 hides .env"},
		{[]string{"cat", ".git/config"}, allowlist.KindPath, ".git is hidden at any depth"},
		{[]string{"cat", "openwiki/.claims/a"}, allowlist.KindPath, "openwiki/.claims is owned by corral"},
		{[]string{"touch", "src/x"}, allowlist.KindPath, "outside the write scope openwiki/"},
		{[]string{"sh", "-c", "id"}, allowlist.KindCmd, "sh is never allowed"},
		{[]string{"find", ".", "-delete"}, allowlist.KindArg, "-delete"},
	} {
		_, err := s.Exec(context.Background(), tc.argv, nil, nil)
		var r *allowlist.Refusal
		require.True(t, errors.As(err, &r), "argv %q: want a refusal, got %v", tc.argv, err)
		require.Equal(t, tc.kind, r.Kind, "argv %q: %v", tc.argv, r)
		require.Contains(t, r.Error(), tc.rule, "argv %q", tc.argv)
	}
	after, err := e.Client().Containers(ctx, mine)
	require.NoError(t, err)
	had := map[string]bool{}
	for _, c := range before {
		had[c.ID()] = true
	}
	for _, c := range after {
		require.True(t, had[c.ID()], "a refusal created container %s", c.ID())
	}
	_, err = os.Stat(filepath.Join(testutil.StateDir(t), "sessions", s.ID))
	require.True(t, os.IsNotExist(err), "a refused session made host mounts")
}

func TestWritesAreConfined(t *testing.T) { forEachRuntime(t, testWritesAreConfined) }

func testWritesAreConfined(t *testing.T, rt testRuntime) {
	repo := hiddenRepo(t)
	snap := testutil.Snapshot(t, repo)
	s := rt.session(t, repo)

	ro := rt.enforces(t).ReadOnlyErrno + "\n"
	for _, p := range []string{"src/evil.go", "README.md", "new.txt", ".openwikiignore"} {
		r := inBox(t, s, "probe", "write", p, "x")
		require.Equal(t, ro, out(r), "write %s", p)
	}
	r := inBox(t, s, "probe", "write", "openwiki/pages/new.md", "x")
	require.Equal(t, "ENOENT\n", out(r)) // no such directory yet
	require.Equal(t, "ok\n", out(inBox(t, s, "probe", "mkdir", "openwiki/pages")))
	require.Equal(t, "ok\n", out(inBox(t, s, "probe", "write", "openwiki/pages/new.md", "# New\n")))
	require.Equal(t, "ok\n", out(inBox(t, s, "probe", "write", "openwiki/index.md", "# index\n\n- new\n")))
	// Writes persist across the session's invocations.
	require.Equal(t, "# New\n", out(inBox(t, s, "cat", "openwiki/pages/new.md")))

	cs, err := s.Changes()
	require.NoError(t, err)
	require.NoError(t, cs.Err())
	var got []string
	for _, c := range cs.Changes {
		got = append(got, fmt.Sprintf("%s %s", c.Kind, c.Path))
	}
	require.Equal(t, []string{"modify openwiki/index.md", "create openwiki/pages/new.md"}, got)
	patch, err := patchOf(cs)
	require.NoError(t, err)
	gitApplyCheck(t, repo, patch)

	require.Equal(t, snap, testutil.Snapshot(t, repo), "the repository changed")
}

func TestPageMode(t *testing.T) { forEachRuntime(t, testPageMode) }

func testPageMode(t *testing.T, rt testRuntime) {
	repo := newRepo(t, map[string]string{
		"openwiki/pages/a.md": "# A\n",
		"openwiki/pages/b.md": "# B\n",
		"openwiki/index.md":   "# index\n",
	})
	snap := testutil.Snapshot(t, repo)
	s := rt.session(t, repo, withPage("openwiki/pages/a.md"))

	require.Equal(t, "ok\n", out(inBox(t, s, "probe", "write", "openwiki/pages/a.md", "# A\n\nwritten\n")))
	ro := rt.enforces(t).ReadOnlyErrno + "\n"
	for _, p := range []string{"openwiki/pages/b.md", "openwiki/index.md", "openwiki/pages/c.md", "openwiki/pages/a.md.bak"} {
		require.Equal(t, ro, out(inBox(t, s, "probe", "write", p, "x")), "write %s", p)
	}
	mv := out(inBox(t, s, "probe", "rename", "openwiki/pages/a.md", "openwiki/pages/z.md"))
	require.Contains(t, []string{"EROFS\n", "EBUSY\n"}, mv, "rename of the page")
	_, err := s.Exec(context.Background(), []string{"touch", "openwiki/pages/b.md"}, nil, nil)
	var r *allowlist.Refusal
	require.True(t, errors.As(err, &r), "touch of a sibling page: %v", err)

	cs, err := s.Changes()
	require.NoError(t, err)
	require.NoError(t, cs.Err())
	require.Len(t, cs.Changes, 1)
	require.Equal(t, "openwiki/pages/a.md", cs.Changes[0].Path)
	patch, err := patchOf(cs)
	require.NoError(t, err)
	gitApplyCheck(t, repo, patch)
	require.Equal(t, snap, testutil.Snapshot(t, repo))
}

func TestNoNetwork(t *testing.T) { forEachRuntime(t, testNoNetwork) }

func testNoNetwork(t *testing.T, rt testRuntime) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	s := rt.session(t, newRepo(t, map[string]string{"a": "a"}), readOnly())

	require.Equal(t, "lo\n", out(inBox(t, s, "probe", "ifaces")))
	require.Equal(t, "EPERM\n", out(inBox(t, s, "probe", "socket-inet")))
	require.Equal(t, "EPERM\n", out(inBox(t, s, "probe", "socket-inet6")))
	require.Equal(t, "EPERM\n", out(inBox(t, s, "probe", "socket-netlink")))
	// No socket of any family: no tool needs one (seccomp/default.yaml).
	require.Equal(t, "EPERM\n", out(inBox(t, s, "probe", "socket-unix")))
	conn := out(inBox(t, s, "probe", "connect", ln.Addr().String()))
	require.NotEqual(t, "ok\n", conn, "reached the host's listener")
}

func TestProcessIdentity(t *testing.T) { forEachRuntime(t, testProcessIdentity) }

func testProcessIdentity(t *testing.T, rt testRuntime) {
	t.Setenv("CORRAL_CANARY", "canary-"+secret)
	t.Setenv("OPENAI_API_KEY", "sk-"+secret)
	s := rt.session(t, newRepo(t, map[string]string{"a": "a"}), readOnly())

	status := out(inBox(t, s, "probe", "status"))
	for _, want := range rt.enforces(t).StatusLines {
		require.Contains(t, status, want+"\n")
	}
	env := inBox(t, s, "probe", "env")
	requireNoLeak(t, env, secret, "CORRAL_CANARY", "OPENAI_API_KEY")
	require.ElementsMatch(t, profiles.Env, lines(out(env)))
	environ := inBox(t, s, "probe", "read", "/proc/1/environ")
	requireNoLeak(t, environ, secret)
}

func TestKernelAttackSurface(t *testing.T) { forEachRuntime(t, testKernelAttackSurface) }

func testKernelAttackSurface(t *testing.T, rt testRuntime) {
	// RT-02: all EPERM, as a non-root uid with no capabilities and no_new_privs.
	s := rt.session(t, newRepo(t, map[string]string{"a": "a"}), readOnly())
	for _, probe := range []string{"unshare-user", "unshare-mount", "clone-newuser", "mount", "ptrace", "bpf",
		"io_uring_setup", "keyctl", "userfaultfd", "mknod"} {
		require.Equal(t, "EPERM\n", out(inBox(t, s, "probe", probe)), probe)
	}
}

func TestLimits(t *testing.T) { forEachRuntime(t, testLimits) }

func testLimits(t *testing.T, rt testRuntime) {
	repo := newRepo(t, map[string]string{"a": "a"})
	t.Run("timeout", func(t *testing.T) {
		s := rt.session(t, repo, withResources(t, profiles.Resources{Timeout: "1s"}))
		r := inBox(t, s, "probe", "sleep", "30s")
		require.Equal(t, []string{sandbox.LimitTimeout}, r.LimitsHit)
		require.Equal(t, 137, r.ExitCode)
		require.Less(t, r.Duration.Seconds(), 10.0)
		require.True(t, r.Killed())
	})
	t.Run("cpu rlimit", func(t *testing.T) {
		// Kills a busy loop even if the supervisor died: timeout × CPUs + 1 s.
		s := rt.session(t, repo, withResources(t, profiles.Resources{Timeout: "2s"}))
		require.Equal(t, "3 3\n", out(inBox(t, s, "probe", "rlimit-cpu")))
	})
	t.Run("output", func(t *testing.T) {
		s := rt.session(t, repo, withResources(t, profiles.Resources{Output: "64KiB"}))
		r := inBox(t, s, "probe", "spew")
		require.Contains(t, r.LimitsHit, sandbox.LimitOutput)
		require.True(t, r.StdoutTruncated)
		require.Len(t, r.Stdout, 64<<10)
	})
	t.Run("pids", func(t *testing.T) {
		x := rt.enforces(t)
		s := rt.session(t, repo, withResources(t, profiles.Resources{Pids: x.ForkBombPids}))
		r := inBox(t, s, "probe", "forkbomb")
		if x.ForkBombOut != "" {
			require.Contains(t, out(r), x.ForkBombOut, string(r.Stderr))
		} else {
			require.Equal(t, x.ForkBombExit, r.ExitCode, "%s%s", r.Stdout, r.Stderr)
		}
		require.Contains(t, r.LimitsHit, sandbox.LimitPids)
	})
	t.Run("memory", func(t *testing.T) {
		s := rt.session(t, repo, withResources(t, profiles.Resources{Memory: "64MiB"}))
		r := inBox(t, s, "probe", "oom")
		want := rt.enforces(t).OOM
		require.True(t, slices.ContainsFunc(want, func(o limitOutcome) bool {
			return slices.Contains(r.LimitsHit, o.Limit) && r.ExitCode == o.Exit
		}), "limits hit %v, exit %d; want one of %v", r.LimitsHit, r.ExitCode, want)
	})
	t.Run("write area", func(t *testing.T) {
		s := rt.session(t, repo, withResources(t, profiles.Resources{WriteArea: "1MiB"}))
		r := sh(t, s, "busybox dd if=/dev/zero of=openwiki/big bs=1024 count=4096")
		require.NotEqual(t, 0, r.ExitCode)
		require.Contains(t, string(r.Stderr), "No space left on device")
		require.Contains(t, r.LimitsHit, sandbox.LimitWriteArea)
	})
}

// TestRealRepository runs against Go's own source tree, which nobody here
// wrote (about 10,000 files).
func TestRealRepository(t *testing.T) { forEachRuntime(t, testRealRepository) }

func testRealRepository(t *testing.T, rt testRuntime) {
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	require.NoError(t, err)
	src := filepath.Join(strings.TrimSpace(string(goroot)), "src")
	s := rt.session(t, src, readOnly())
	r := run(t, s, "grep", "-rln", "func Fprintf", "fmt")
	require.Equal(t, 0, r.ExitCode, string(r.Stderr))
	require.Equal(t, "fmt/print.go\n", out(r))
}

// TestPageModeNewPage: an assigned page that does not exist yet is a
// create in the change set, and its patch applies (the view's empty mount
// point is not the original).
func TestPageModeNewPage(t *testing.T) { forEachRuntime(t, testPageModeNewPage) }

func testPageModeNewPage(t *testing.T, rt testRuntime) {
	repo := newRepo(t, map[string]string{"openwiki/index.md": "# index\n", "README.md": "# readme\n"})
	s := rt.session(t, repo, withPage("openwiki/pages/new.md"))
	r := run(t, s, "cp", "README.md", "openwiki/pages/new.md")
	require.Equal(t, 0, r.ExitCode, string(r.Stderr))
	cs, err := s.Changes()
	require.NoError(t, err)
	require.NoError(t, cs.Err())
	require.Len(t, cs.Changes, 1)
	require.Equal(t, "create", string(cs.Changes[0].Kind))
	patch, err := patchOf(cs)
	require.NoError(t, err)
	require.Contains(t, string(patch), "new file mode 100644")
	gitApplyCheck(t, repo, patch)
}
