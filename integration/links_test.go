package integration

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/stretchr/testify/require"
)

// nestedLinksRepo holds links inside directories that lead out of the
// repository (to the container's own root) and back into it.
func nestedLinksRepo(t *testing.T) string {
	return newRepo(t, map[string]string{
		"README.md":          "readme\n",
		"docs/a/f.md":        "alpha\n",
		"docs/a/root":        "-> /",
		"docs/a/self":        "-> /proc/self",
		"docs/b/f.md":        "beta\n",
		"docs/b/root":        "-> /",
		"docs/b/self":        "-> /proc/self",
		"docs/tree/a.md":     "# a\n",
		"docs/tree/sub/b.md": "# b\n",
		"docs/tree/up":       "-> ../../README.md",
		"docs/tree/root":     "-> /",
		"openwiki/index.md":  "# index\n",
	})
}

// TestRecursiveToolsDoNotFollowNestedLinks (issue 9, item 3): the
// dereferencing forms of every recursive tool are refused before anything
// runs, naming the rule; the forms that run never descend through a link
// found inside a directory (diff runs with --no-dereference pinned, find
// with -P), so neither the container's root nor /proc/self is listed or
// read.
func TestRecursiveToolsDoNotFollowNestedLinks(t *testing.T) {
	s := newSession(t, nestedLinksRepo(t))
	for _, argv := range [][]string{
		{"ls", "-RL", "docs"},
		{"ls", "-lL", "docs/a"},
		{"ls", "-R", "-H", "docs"},
		{"grep", "-R", "PPid", "docs"},
		{"grep", "--dereference-recursive", "PPid", "docs"},
		{"rg", "-L", "PPid", "docs"},
		{"rg", "--follow", "PPid", "docs"},
		{"find", "-L", "docs"},
		{"find", "-H", "docs"},
		{"find", "docs", "-follow"},
		{"find", "docs", "-xtype", "d"},
		{"cp", "-rL", "docs/a", "openwiki/x"},
		{"cp", "-rH", "docs/a", "openwiki/x"},
		{"cp", "--dereference", "-rT", "docs/a", "openwiki/x"},
	} {
		_, err := s.Exec(context.Background(), argv, nil, nil)
		var r *allowlist.Refusal
		require.True(t, errors.As(err, &r), "%q: want a refusal, got %v", argv, err)
		require.Equal(t, allowlist.KindArg, r.Kind, "%q: %v", argv, r)
		require.Contains(t, r.Rule, "recursive tools never follow symbolic links", "%q", argv)
	}

	// What runs stays on this side of every nested link. A followed link
	// would name a path below it ("docs/a/root/etc", a "docs/a/self:"
	// heading), or read /proc/self/status ("PPid:").
	notThrough := func(argv []string, res string) {
		t.Helper()
		for _, bad := range []string{"PPid", "/root/", "/self/", "root:\n", "self:\n", "Only in"} {
			require.NotContains(t, res, bad, "%q followed a nested link", argv)
		}
	}
	diff := run(t, s, "diff", "-r", "docs/a", "docs/b")
	require.Equal(t, []string{"diff", "--no-dereference", "--recursive", "--", "docs/a", "docs/b"}, diff.Argv)
	require.Equal(t, 1, diff.ExitCode, string(diff.Stderr))
	require.Contains(t, out(diff), "< alpha\n")
	notThrough(diff.Argv, out(diff)+string(diff.Stderr))

	for _, argv := range [][]string{
		{"ls", "-laR", "docs"},
		{"find", "docs"},
		{"grep", "-r", "PPid", "docs"},
		{"grep", "-rl", "root", "docs"},
		{"rg", "PPid", "docs"},
		{"rg", "--files", "docs"},
	} {
		res := run(t, s, argv...)
		require.Contains(t, []int{0, 1}, res.ExitCode, "%q: %s", argv, res.Stderr)
		notThrough(argv, out(res)+string(res.Stderr))
	}
	find := run(t, s, "find", "docs", "-type", "l")
	require.Equal(t, "find", find.Argv[0])
	require.Equal(t, "-P", find.Argv[1])
	// Every link is listed as itself, never as what it points to. (Links
	// leaving the repository may also be hidden from the view.)
	links := lines(out(find))
	require.Contains(t, links, "docs/tree/up")
	require.Subset(t, []string{"docs/a/root", "docs/a/self", "docs/b/root", "docs/b/self", "docs/tree/up", "docs/tree/root"}, links)
}

// TestCopyOfTreeWithLinkFailsCleanly (issue 9, items 3 and 17): cp -r
// copies a link as a link, which the kernel now refuses (seccomp: no
// symlink calls), so a tree holding links is copied without them: cp says
// so and exits 1, every regular file arrives, and the change set is clean.
func TestCopyOfTreeWithLinkFailsCleanly(t *testing.T) {
	s := newSession(t, nestedLinksRepo(t))
	for _, argv := range [][]string{
		{"cp", "-rP", "docs/tree", "openwiki/p"},
		{"cp", "-r", "docs/tree", "openwiki/r"},
		{"cp", "-rT", "docs/tree", "openwiki/t"},
	} {
		res := run(t, s, argv...)
		require.Equal(t, 1, res.ExitCode, "%q: %s", argv, res.Stderr)
		require.Contains(t, string(res.Stderr), "cannot create symbolic link", "%q", argv)
		require.Contains(t, string(res.Stderr), "Operation not permitted", "%q", argv)
	}
	cs, err := s.Changes()
	require.NoError(t, err)
	require.NoError(t, cs.Err(), "the change set holds no link")
	require.ElementsMatch(t, []string{
		"create openwiki/p/a.md", "create openwiki/p/sub/b.md",
		"create openwiki/r/a.md", "create openwiki/r/sub/b.md",
		"create openwiki/t/a.md", "create openwiki/t/sub/b.md",
	}, summary(cs))
}

// TestKernelRefusesLinksAndFdExec (issue 9, items 3 and 17): in the
// container, making a hard or symbolic link, an anonymous memory file
// (memfd_create) and exec from a descriptor (execveat) fail with EPERM,
// whatever the paths; clone3 answers ENOSYS so that libcs fall back to
// clone(2). Nothing reaches the write area.
func TestKernelRefusesLinksAndFdExec(t *testing.T) {
	s := newSession(t, newRepo(t, map[string]string{"README.md": "readme\n", "openwiki/a.md": "# a\n"}))
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"probe", "memfd"}, "EPERM\n"},
		{[]string{"probe", "execveat", "/usr/bin/echo", "ran"}, "EPERM\n"},
		{[]string{"probe", "link", "openwiki/a.md", "openwiki/b.md"}, "EPERM\n"},
		{[]string{"probe", "link", "README.md", "openwiki/c.md"}, "EPERM\n"},
		{[]string{"probe", "symlink", "../README.md", "openwiki/r"}, "EPERM\n"},
		{[]string{"probe", "symlink", "/", "openwiki/root"}, "EPERM\n"},
		{[]string{"probe", "symlink", "/", "/tmp/root"}, "EPERM\n"},
		{[]string{"probe", "clone3"}, "ENOSYS\n"},
	} {
		res := inBox(t, s, tc.argv...)
		require.Equal(t, tc.want, out(res), "%q: %s", tc.argv, res.Stderr)
	}
	cs, err := s.Changes()
	require.NoError(t, err)
	require.NoError(t, cs.Err())
	require.Empty(t, cs.Changes)
}

// TestProcShowsNoHostPaths (issue 9, item 3): no mount table a tool can
// reach through /proc names a host path (the state directory, the
// repository, an overlay's layers). The tool's own (/proc/self,
// /proc/thread-self, /proc/mounts) are refused by Landlock (EACCES), which
// corral-init's stage sets in the tool's process before its exec: the
// spec's masks, being mounts on paths fixed at the start, reach only PID 1.
// PID 1's rows (corral-init's) are masked and refused, the kernel's
// command line too; the tool's environment is exactly the fixed one,
// whatever the supervisor's holds. What a tool needs of /proc still reads:
// its own status and memory map.
func TestProcShowsNoHostPaths(t *testing.T) {
	t.Setenv("CORRAL_CANARY", "canary-"+secret)
	repo := newRepo(t, map[string]string{"README.md": "readme\n", "openwiki/a.md": "# a\n"})
	s := newSession(t, repo)
	state := testutil.StateDir(t)
	for _, p := range []string{
		"/proc/self/mountinfo", "/proc/self/mounts", "/proc/self/mountstats",
		"/proc/thread-self/mountinfo", "/proc/mounts",
		"/proc/1/mountinfo", "/proc/1/mounts", "/proc/1/mountstats",
		"/proc/1/task/1/mountinfo", "/proc/1/task/1/mounts",
		"/proc/1/environ", "/proc/cmdline",
	} {
		res := inBox(t, s, "probe", "read", p)
		got := out(res)
		for _, bad := range []string{state, repo, "lowerdir=", "upperdir=", "workdir="} {
			require.NotContains(t, got, bad, "%s names a host path", p)
		}
		require.Equal(t, "EACCES\n", got, p)
	}
	// Listing /proc (every pid's directory) is refused too.
	ls := inBox(t, s, "busybox", "ls", "/proc")
	require.Equal(t, 1, ls.ExitCode)
	require.Equal(t, "", out(ls))
	require.Contains(t, string(ls.Stderr), "/proc': Permission denied")

	res := inBox(t, s, "probe", "read", "/proc/self/environ")
	require.Equal(t, strings.Join(profiles.Env, "\x00")+"\x00", out(res))
	requireNoLeak(t, res, secret, "CORRAL_CANARY")

	status := out(inBox(t, s, "probe", "read", "/proc/self/status"))
	require.Contains(t, status, "Seccomp:\t2")
	require.Contains(t, status, "NoNewPrivs:\t1")
	require.Contains(t, out(inBox(t, s, "probe", "read", "/proc/self/maps")), "/usr/bin/probe")
}
