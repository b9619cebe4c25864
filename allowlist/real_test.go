package allowlist

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNormalizedArgvRunsReal runs normalized argvs with the real tools of
// this machine (opt-in: CORRAL_REAL_TOOLS=1), to show that the canonical
// spellings (full option names, "--" before operands, prepended flags) are
// accepted by the programs themselves. It runs them directly in a scratch
// tree, not in a sandbox; every argv here is a permitted one.
func TestNormalizedArgvRunsReal(t *testing.T) {
	if os.Getenv("CORRAL_REAL_TOOLS") == "" {
		t.Skip("set CORRAL_REAL_TOOLS=1 to run the shipped grammars against the real tools")
	}
	withGit, _ := catalogs(t)
	dir := t.TempDir()
	write := func(p, s string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644))
	}
	write("README.md", "hello\nTODO one\nworld\n")
	write("src/a.go", "package a // TODO\n")
	write("openwiki/index.md", "# index\n")
	write("-rf", "dash file\n")
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "init")
	v := &fakeView{links: map[string]string{}, hidden: map[string]string{}}
	for _, argv := range [][]string{
		a("ls", "-la", "--col=never", "src"),
		a("ls", "-1", "--sort", "size", "--", "-rf"),
		a("cat", "-n", "README.md", "./-rf"),
		a("head", "-3", "README.md"),
		a("head", "-n", "-1", "README.md"),
		a("head", "-c5", "README.md"),
		a("tail", "-n", "+2", "README.md"),
		a("wc", "-lw", "README.md"),
		a("grep", "-rn", "src", "-e", "TODO", "--inc=*.go"),
		a("grep", "-2", "one", "README.md"),
		a("grep", "-c", "--", "-rf", "-rf"),
		a("find", ".", "-name", "*.md", "-not", "-path", "./.git/*", "-print"),
		a("find", "src", "(", "-type", "f", "-o", "-type", "d", ")", "-maxdepth", "2", "-size", "-1M", "-print0"),
		a("sed", "-n", "1,2p", "README.md"),
		a("sed", "-ne", "/TODO/p;$p", "-e", "s/o/0/gp", "README.md"),
		a("sort", "-r", "-k1,1", "README.md"),
		a("uniq", "-c", "README.md"),
		a("cut", "-c1-3", "README.md"),
		a("tr", "-d", "-"),
		a("diff", "-u", "README.md", "README.md"),
		a("stat", "-c", "%s", "README.md"),
		a("file", "-b", "README.md"),
		a("rg", "-n", "TODO", "src"),
		a("rg", "--files"),
		a("rg", "-e", "dash", "--", "-rf"),
		a("cp", "-r", "src", "openwiki/src"),
		a("cp", "-t", "openwiki", "README.md"),
		a("mkdir", "-p", "openwiki/a/b"),
		a("touch", "-r", "README.md", "openwiki/a/b/c.md"),
		a("mv", "openwiki/a/b/c.md", "openwiki/a/d.md"),
		a("rm", "-rf", "openwiki/a"),
		a("git", "log", "--oneline", "-1"),
		a("git", "log", "-p", "--", "README.md"),
		a("git", "show", "--stat", "HEAD"),
		a("git", "diff", "--cached", "--stat"),
		a("git", "blame", "-s", "--", "README.md"),
		a("git", "ls-files", "src"),
		a("git", "grep", "-n", "TODO", "HEAD", "--", "src"),
		a("git", "grep", "-e", "TODO"),
		a("git", "status", "--short", "-uno"),
	} {
		d, err := Check(withGit, v, dirScope, argv)
		require.NoError(t, err, "%q", argv)
		cmd := exec.Command(d.Argv[0], d.Argv[1:]...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 && (argv[0] == "grep" || argv[0] == "diff") {
			err = nil // no match / differences: still a clean parse
		}
		require.NoError(t, err, "%q -> %q:\n%s", argv, d.Argv, out)
		t.Logf("%q -> %q", argv, d.Argv)
	}
}
