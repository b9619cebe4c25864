package allowlist

import (
	"errors"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
)

// TestSpellings: a refused option is refused in every spelling getopt
// accepts (abbreviation, "=value", cluster, after operands), and allowed
// options are normalized to their full names.
func TestSpellings(t *testing.T) {
	ro := &roScope
	runRows(t, []checkRow{
		// rg (clap: no abbreviations at all)
		{argv: a("rg", "--pr", "x"), kind: KindArg, index: 1, rule: "unknown option --pr"},
		{argv: a("rg", "--pre=x", "y"), kind: KindArg, index: 1, rule: "not allowed"},
		{argv: a("rg", "-rz", "x"), want: a("rg", "--no-config", "--replace=z", "--", "x")}, // -r takes a value
		{argv: a("rg", "-iz", "x"), kind: KindArg, index: 1, rule: "-z"},
		{argv: a("rg", "-nz", "x"), kind: KindArg, index: 1},
		{argv: a("rg", "-zn", "x"), kind: KindArg, index: 1},
		{argv: a("rg", "--search-zi", "x"), kind: KindArg, index: 1},
		{argv: a("rg", "--pre-glob", "*", "x"), kind: KindArg, index: 1},
		{argv: a("rg", "-L", "x"), kind: KindArg, index: 1},
		{argv: a("rg", "--follow", "x"), kind: KindArg, index: 1},
		{argv: a("rg", "--ignore-file", ".env", "x"), kind: KindPath, index: 2},
		{argv: a("rg", "--ignore-file=secrets/i", "x"), kind: KindPath, index: 1},
		{argv: a("rg", "-f", "docs/k"), kind: KindPath, index: 2},
		{argv: a("rg", "-e", "--pre", "src"), want: a("rg", "--no-config", "--regexp=--pre", "--", "src")},
		{argv: a("rg", "-re", "x"), want: a("rg", "--no-config", "--replace=e", "--", "x")},
		{argv: a("rg", "-uuu", "-.", "x"), want: a("rg", "--no-config", "--unrestricted", "--unrestricted", "--unrestricted", "--hidden", "--", "x")},
		{argv: a("rg", "--type-list")},
		{argv: a("rg"), kind: KindArg, index: -1},
		{argv: a("rg", "--files", "secrets"), kind: KindPath, index: 2},
		{argv: a("rg", "x", "--", "--pre", "sh"), want: a("rg", "--no-config", "--", "x", "./--pre", "sh")},

		// grep (getopt_long: abbreviations, clusters, permutation)
		{argv: a("grep", "--exclude-f=.env", "x", "README.md"), kind: KindPath, index: 1},
		{argv: a("grep", "--exclude-from", ".env", "x"), kind: KindPath, index: 2},
		{argv: a("grep", "-rnf", "secrets/p", "src"), kind: KindPath, index: 2},
		{argv: a("grep", "-rnfsecrets/p", "src"), kind: KindPath, index: 1},
		{argv: a("grep", "-rnf", "README.md", "src"), want: a("grep", "--recursive", "--line-number", "--file=README.md", "--", "src")},
		{argv: a("grep", "-R", "x"), kind: KindArg, index: 1},
		{argv: a("grep", "--deref", "x"), kind: KindArg, index: 1},
		{argv: a("grep", "--exclude", "x", "y"), want: a("grep", "--exclude=x", "--", "y")},
		{argv: a("grep", "--ex", "x", "y"), kind: KindArg, index: 1, rule: "ambiguous"},
		{argv: a("grep", "--line", "x"), kind: KindArg, index: 1, rule: "ambiguous"},
		{argv: a("grep", "--line-n", "x"), want: a("grep", "--line-number", "--", "x")},
		{argv: a("grep", "--count=3", "x"), kind: KindArg, index: 1, rule: "takes no value"},
		{argv: a("grep", "-e"), kind: KindArg, index: 1, rule: "needs a value"},
		{argv: a("grep", "-e", "-f", "README.md"), want: a("grep", "--regexp=-f", "--", "README.md")},
		{argv: a("grep", "-m", "x", "y"), kind: KindArg, index: 2},
		{argv: a("grep", "--color=al", "x"), kind: KindArg, index: 1},
		{argv: a("grep", "--colour=never", "x"), want: a("grep", "--color=never", "--", "x")},
		{argv: a("grep", "--binary-files=text", "x"), want: a("grep", "--binary-files=text", "--", "x")},
		{argv: a("grep", "-5", "x"), want: a("grep", "--context=5", "--", "x")},
		{argv: a("grep", "-5n", "x"), kind: KindArg, index: 1},
		{argv: a("grep", "x", "-", "README.md"), want: a("grep", "--", "x", "./-", "README.md")},
		{argv: a("grep", "-q", "x", ".env"), kind: KindPath, index: 3},
		{argv: a("grep", "--", "-e", "secrets/x"), kind: KindPath, index: 3},

		// sed
		{argv: a("sed", "--in-pl", "s/a/b/", "x"), kind: KindArg, index: 1},
		{argv: a("sed", "--in", "s/a/b/", "x"), kind: KindArg, index: 1},
		{argv: a("sed", "-ni", "p", "x"), kind: KindArg, index: 1},
		{argv: a("sed", "-i.bak", "p", "x"), kind: KindArg, index: 1},
		{argv: a("sed", "-nf", "x", "y"), kind: KindArg, index: 1},
		{argv: a("sed", "--fi=x", "y"), kind: KindArg, index: 1},
		{argv: a("sed", "--expression=1e id", "x"), kind: KindArg, index: 1},
		{argv: a("sed", "-e", "1p", "-e", "e id", "x"), kind: KindArg, index: 4},
		{argv: a("sed", "-ne1p", "secrets/k"), kind: KindPath, index: 2},
		{argv: a("sed", "p", "x", "-i"), kind: KindArg, index: 3},
		{argv: a("sed", "--follow-symlinks", "p", "x"), kind: KindArg, index: 1},
		{argv: a("sed", "-n", "1,40p"), want: a("sed", "--sandbox", "--quiet", "--", "1,40p")},
		{argv: a("sed", "--sandbox", "-n", "$p", "x"), want: a("sed", "--sandbox", "--sandbox", "--quiet", "--", "$p", "x")},
		{argv: a("sed"), kind: KindArg, index: -1},

		// sort, uniq, cut, tr, diff, stat, file
		{argv: a("sort", "-o", "openwiki/x", "README.md"), kind: KindArg, index: 1},
		{argv: a("sort", "-rooutput", "README.md"), kind: KindArg, index: 1},
		{argv: a("sort", "--out=x", "README.md"), kind: KindArg, index: 1},
		{argv: a("sort", "--comp=gzip", "README.md"), kind: KindArg, index: 1},
		{argv: a("sort", "--compress-program", "sh", "README.md"), kind: KindArg, index: 1},
		{argv: a("sort", "--files0=x"), kind: KindArg, index: 1},
		{argv: a("sort", "-T", "/tmp", "x"), kind: KindArg, index: 1},
		{argv: a("sort", "--random-source=.env", "x"), kind: KindPath, index: 1},
		{argv: a("sort", "-c", "x"), want: a("sort", "--check", "--", "x")},
		{argv: a("sort", "--check=quiet", "x"), want: a("sort", "--check=quiet", "--", "x")},
		{argv: a("sort", "-t,", "-k2n", "x"), want: a("sort", "--field-separator=,", "--key=2n", "--", "x")},
		{argv: a("uniq", "a", "b"), kind: KindArg, index: 2, rule: "too many operands"},
		{argv: a("uniq", "-c", "README.md"), want: a("uniq", "--count", "--", "README.md")},
		{argv: a("tr", "a-z", "A-Z", "README.md"), kind: KindArg, index: 3},
		{argv: a("tr", "-d", "/etc/passwd"), want: a("tr", "--delete", "--", "/etc/passwd")},
		{argv: a("tr"), kind: KindArg, index: -1},
		{argv: a("cut", "-d:", "-f1", "README.md"), want: a("cut", "--delimiter=:", "--fields=1", "--", "README.md")},
		{argv: a("diff", "README.md"), kind: KindArg, index: -1},
		{argv: a("diff", "README.md", ".env"), kind: KindPath, index: 2},
		{argv: a("diff", "--to-file=../x", "README.md"), kind: KindPath, index: 1},
		{argv: a("diff", "--from-file", "secrets/a", "README.md"), kind: KindPath, index: 2},
		{argv: a("diff", "--to-file=src", "README.md", "docs")},
		{argv: a("diff", "-l", "a", "b"), kind: KindArg, index: 1},
		{argv: a("diff", "--pag", "a", "b"), kind: KindArg, index: 1},
		{argv: a("diff", "-X", ".env", "a", "b"), kind: KindPath, index: 2},
		{argv: a("diff", "-U5", "a", "b"), want: a("diff", "--no-dereference", "-U", "5", "--", "a", "b")},
		{argv: a("stat"), kind: KindArg, index: -1},
		{argv: a("stat", "-c", "%n %s", "docs/passwd"), kind: KindPath, index: 3},
		{argv: a("file", "-m", "x", "y"), kind: KindArg, index: 1},
		{argv: a("file", "--mag=x", "y"), kind: KindArg, index: 1},
		{argv: a("file", "-bm", "x", "y"), kind: KindArg, index: 1},
		{argv: a("file", "-z", "y"), kind: KindArg, index: 1},
		{argv: a("file", "-f", "-"), kind: KindArg, index: 1},
		{argv: a("file", "--files", "x"), kind: KindArg, index: 1},
		{argv: a("file", "-S", "y"), kind: KindArg, index: 1},
		{argv: a("file", "--mime-t", "README.md"), want: a("file", "--mime-type", "--", "README.md")},

		// ls, cat, head, tail, wc
		{argv: a("ls", "---x"), kind: KindArg, index: 1},
		{argv: a("ls", "--=x"), kind: KindArg, index: 1},
		{argv: a("ls", "-laR", "--", "-x"), want: a("ls", "-l", "--all", "--recursive", "--", "./-x")},
		{argv: a("ls", "--h"), kind: KindArg, index: 1, rule: "ambiguous"},
		{argv: a("ls", "-I", "*.go", "--hide=x"), want: a("ls", "--ignore=*.go", "--hide=x")},
		{argv: a("ls", "--hid=x"), kind: KindArg, index: 1, rule: "ambiguous"},
		{argv: a("ls", "-é"), kind: KindArg, index: 1},
		{argv: a("cat", "-vET", "README.md"), want: a("cat", "--show-nonprinting", "--show-ends", "--show-tabs", "--", "README.md")},
		{argv: a("cat", "openwiki/.claims/x"), kind: KindPath, index: 1},
		{argv: a("head", "-n", "abc", "x"), kind: KindArg, index: 2},
		{argv: a("head", "-c", "10K", "x"), want: a("head", "--bytes=10K", "--", "x")},
		{argv: a("head", "-n-5", "x"), want: a("head", "--lines=-5", "--", "x")},
		{argv: a("tail", "-f", "x"), kind: KindArg, index: 1},
		{argv: a("tail", "--fo", "x"), kind: KindArg, index: 1},
		{argv: a("tail", "-F", "x"), kind: KindArg, index: 1},
		{argv: a("tail", "-nf", "x"), kind: KindArg, index: 1},
		{argv: a("wc", "--files0-from=x"), kind: KindArg, index: 1},
		{argv: a("wc", "--files0=x"), kind: KindArg, index: 1},

		// find
		{argv: a("find", "-exec", "id", ";"), kind: KindArg, index: 1},
		{argv: a("find", ".", "(", "-name", "x", "-o", "-exec", "id", ";", ")"), kind: KindArg, index: 6},
		{argv: a("find", ".", "-name", "-exec"), want: a("find", "-P", ".", "-name", "-exec")},
		{argv: a("find", "-L", "."), kind: KindArg, index: 1},
		{argv: a("find", "-D", "exec", "."), kind: KindArg, index: 1},
		{argv: a("find", "-O3", "."), kind: KindArg, index: 1},
		{argv: a("find", ".", "-follow"), kind: KindArg, index: 2},
		{argv: a("find", ".", "-printf", "%p"), kind: KindArg, index: 2},
		{argv: a("find", ".", "-fprint0", "x"), kind: KindArg, index: 2},
		{argv: a("find", ".", "-okdir", "x", ";"), kind: KindArg, index: 2},
		{argv: a("find", ".", "-files0-from", "x"), kind: KindArg, index: 2},
		{argv: a("find", ".", "-newer", "secrets/k"), kind: KindPath, index: 3},
		{argv: a("find", "secrets"), kind: KindPath, index: 1},
		{argv: a("find", "src", "docs/up"), kind: KindPath, index: 2},
		{argv: a("find", ".", "-name"), kind: KindArg, index: 2},
		{argv: a("find", ".", "(", "-name", "x"), kind: KindArg, index: 4},
		{argv: a("find", ".", ")"), kind: KindArg, index: 2},
		{argv: a("find", ".", "-type", "x"), kind: KindArg, index: 3},
		{argv: a("find", ".", "-maxdepth", "-1"), kind: KindArg, index: 3},
		{argv: a("find", ".", "-size", "+1M", "-mtime", "-7", "-empty", "-o", "!", "-type", "f,d")},
		{argv: a("find", "-P", "./src/", "docs", "-print0"), want: a("find", "-P", "src", "docs", "-print0")},
		{argv: a("find", "-", "-print"), kind: KindArg, index: 1},
		{argv: a("find", ".", "src", "-regextype", "sed", "-regex", ".*"), want: a("find", "-P", ".", "src", "-regextype", "sed", "-regex", ".*")},
		{argv: a("find", ".", "-regextype", "perl"), kind: KindArg, index: 3},
		{argv: a("find", ".", "-name", "x", "y"), kind: KindArg, index: 4},

		// writers
		{argv: a("cp", "-t", "openwiki-old", "README.md"), kind: KindPath, index: 2},
		{argv: a("cp", "--target-directory=openwiki/../x", "README.md"), kind: KindPath, index: 1},
		{argv: a("cp", "--target=openwiki", "README.md"), want: a("cp", "--target-directory=openwiki", "--", "README.md")},
		{argv: a("cp", "-t", "openwiki", ".env"), kind: KindPath, index: 3},
		{argv: a("cp", "-s", "README.md", "openwiki/x"), kind: KindArg, index: 1},
		{argv: a("cp", "-rl", "README.md", "openwiki/x"), kind: KindArg, index: 1},
		{argv: a("cp", "--back=t", "README.md", "openwiki/x"), kind: KindArg, index: 1},
		{argv: a("cp", "--parents", "README.md", "openwiki/"), kind: KindArg, index: 1},
		{argv: a("cp", "-a", "src", "openwiki/"), kind: KindArg, index: 1},
		{argv: a("cp", "README.md"), kind: KindArg, index: -1},
		{argv: a("cp", "README.md", "src/a.md", "openwiki"), want: a("cp", "--", "README.md", "src/a.md", "openwiki")},
		{argv: a("cp", "openwiki/a", "openwiki/inner/b")},
		{argv: a("mv", "README.md", "openwiki/x"), kind: KindPath, index: 1},
		{argv: a("mv", "openwiki/a", "openwiki/b")},
		{argv: a("mv", "openwiki/a", "src/a"), kind: KindPath, index: 2},
		{argv: a("mv", "-t", "src", "openwiki/a"), kind: KindPath, index: 2},
		{argv: a("mv", "-S", "x", "openwiki/a", "openwiki/b"), kind: KindArg, index: 1},
		{argv: a("rm", "README.md"), kind: KindPath, index: 1},
		{argv: a("rm", "-rf", "openwiki/x", "."), kind: KindPath, index: 3},
		{argv: a("rm", "--no-preserve-root", "-rf", "openwiki"), kind: KindArg, index: 1},
		{argv: a("rm", "-rf", "openwiki/.claims"), kind: KindPath, index: 2},
		{argv: a("rm", "-r", "openwiki/d"), want: a("rm", "--recursive", "--", "openwiki/d")},
		{argv: a("mkdir", "-m", "777", "openwiki/x"), kind: KindArg, index: 1},
		{argv: a("mkdir", "--mo=777", "openwiki/x"), kind: KindArg, index: 1},
		{argv: a("mkdir", "openwiki"), want: a("mkdir", "--", "openwiki")},
		{argv: a("mkdir", "openwiki/assets/x"), kind: KindPath, index: 1},
		{argv: a("touch", "-r", "secrets/k", "openwiki/x"), kind: KindPath, index: 2},
		{argv: a("touch", "--reference=.env", "openwiki/x"), kind: KindPath, index: 1},
		{argv: a("touch", "--ref", "README.md", "openwiki/x"), want: a("touch", "--reference=README.md", "--", "openwiki/x")},
		{argv: a("touch", "-d", "2020-01-01", "openwiki/x"), want: a("touch", "--date=2020-01-01", "--", "openwiki/x")},
		{scope: ro, argv: a("touch", "openwiki/x"), kind: KindPath, index: 1, rule: "read-only"},
		{scope: ro, argv: a("cat", "openwiki/x")},
		{scope: &Scope{}, argv: a("mkdir", "openwiki/x"), kind: KindPath, index: 1, rule: "read-only"},
		{scope: &Scope{Dir: "."}, argv: a("touch", "README.md")},
		{scope: &Scope{Dir: "."}, argv: a("touch", ".git/x"), kind: KindPath, index: 1},
		{scope: &Scope{Dir: "."}, argv: a("touch", ".env"), kind: KindPath, index: 1, rule: ".openwikiignore:1"},

		// argv[0]
		{argv: a("cat\x00", "x"), kind: KindArg, index: 0},
		{argv: a(""), kind: KindCmd, index: 0},
		{argv: a("cat ", "x"), kind: KindCmd, index: 0},
		{argv: a("Cat", "x"), kind: KindCmd, index: 0},
		{argv: a("python3.12", "-c", "x"), kind: KindCmd, index: 0},
		{argv: a("git-upload-pack", "."), kind: KindCmd, index: 0},
		{argv: a("sudo", "cat"), kind: KindCmd, index: 0},
		{argv: a("."), kind: KindCmd, index: 0},

		// git (opt-in)
		{git: true, argv: a("git", "--pag", "log"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "-pc", "x", "log"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "-Pp", "log"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "-C.", "log"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "--git-d=x", "log"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "--exec-path=/tmp", "log"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "--exec-path", "log"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "--", "log"), kind: KindArg, index: 1},
		{git: true, argv: a("git"), kind: KindArg, index: -1},
		{git: true, argv: a("git", "-P"), kind: KindArg, index: -1},
		{git: true, argv: a("git", "log", "--out=x"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "log", "--ext"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "log", "--textc"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "log", "-Oorder"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "log", "-p", "-Oorder"), kind: KindArg, index: 3},
		{git: true, argv: a("git", "diff", "--no-ind", "a", "b"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "show", "HEAD:secrets/k"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "show", "HEAD:README.md"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "log", "README.md"), want: nil},
		{git: true, argv: a("git", "log", "--", "secrets/k"), kind: KindPath, index: 3},
		{git: true, argv: a("git", "log", "--", "../x"), kind: KindPath, index: 3},
		{git: true, argv: a("git", "blame", "--", ".env"), kind: KindPath, index: 3},
		{git: true, argv: a("git", "blame", "--contents", "x", "--", "README.md"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "blame", "a", "b"), kind: KindArg, index: 3},
		{git: true, argv: a("git", "grep", "-f", "secrets/k"), kind: KindPath, index: 3},
		{git: true, argv: a("git", "grep", "-O", "x"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "grep", "--open-files-in-pager=sh", "x"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "grep", "--no-index", "x"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "ls-files", "-X", ".env"), kind: KindPath, index: 3},
		{git: true, argv: a("git", "ls-files", "--", "secrets"), kind: KindPath, index: 3},
		{git: true, argv: a("git", "status", "-uall", "--porcelain=v2")},
		{git: true, argv: a("git", "status", "--", "-x")},
		{git: true, argv: a("git", "status", "-c", "x"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "log", "-1", "--format=%H", "HEAD~3..HEAD", "--", "src")},
		{git: true, argv: a("git", "log", "--max-c=3")},
	})
}

func TestNeverAllowedWins(t *testing.T) {
	cmds := map[string]*Command{
		"awk":  {Name: "awk"},
		"bash": {Name: "bash"},
	}
	for _, argv := range [][]string{a("awk", "1"), a("bash")} {
		_, err := Check(cmds, newFakeView(), dirScope, argv)
		var ref *Refusal
		require.True(t, errors.As(err, &ref))
		require.Equal(t, KindCmd, ref.Kind)
		require.Equal(t, 0, ref.Index)
	}
	for _, n := range []string{"sh", "bash", "dash", "zsh", "ksh", "fish", "busybox", "python", "python3", "python3.11",
		"perl", "perl5.36", "ruby", "node", "nodejs", "awk", "gawk", "mawk", "nawk", "lua5.4", "php8.2", "env", "xargs",
		"timeout", "nice", "ionice", "setsid", "stdbuf", "nohup", "watch", "sudo", "su", "chroot", "tar", "less",
		"more", "most", "man", "vi", "vim", "nano", "emacs", "ed", "curl", "wget", "nc", "ping", "nslookup", "dig", "ssh",
		"ssh-keygen", "scp", "rsync", "git-remote-https", "git-upload-pack", "export", "eval", "exec", "source", ".",
		"SH", "Python3", "jq", "fd"} {
		require.True(t, NeverAllowed(n), n)
	}
	for _, n := range []string{"cat", "ls", "grep", "rg", "git", "sed", "find", "sort", "head"} {
		require.False(t, NeverAllowed(n), n)
	}
}

func TestCheckMalformedInputs(t *testing.T) {
	_, def := catalogs(t)
	v := newFakeView()
	_, err := Check(def, v, Scope{Dir: "openwiki/"}, a("cat", "x"))
	require.True(t, errdefs.IsInvalidArgument(err), "%v", err)
	_, err = Check(def, v, Scope{Dir: "openwiki", Page: "openwiki/a.md"}, a("cat", "x"))
	require.True(t, errdefs.IsInvalidArgument(err), "%v", err)
	_, err = Check(def, v, dirScope, nil)
	var ref *Refusal
	require.True(t, errors.As(err, &ref))
	require.Equal(t, KindCmd, ref.Kind)
	_, err = Check(def, nil, dirScope, a("cat", "x"))
	require.True(t, errors.As(err, &ref))
	require.Equal(t, KindPath, ref.Kind)
	// A grammar keyed under another name is a configuration error.
	_, err = Check(map[string]*Command{"cat": def["ls"]}, v, dirScope, a("cat", "x"))
	require.True(t, errdefs.IsInvalidArgument(err), "%v", err)
	// An invalid grammar fails closed.
	bad := &Command{Name: "cat", Layout: Layout{Operands: []Operand{{Type: "whatever"}}}}
	_, err = Check(map[string]*Command{"cat": bad}, v, dirScope, a("cat", "x"))
	require.True(t, errdefs.IsInvalidArgument(err), "%v", err)
}

// errView fails every resolution with a plain error.
type errView struct{}

func (errView) Resolve(string) (string, error) { return "", errors.New("boom") }
func (errView) Hidden(string) (string, bool)   { return "", false }

type badView struct{}

func (badView) Resolve(string) (string, error) { return "../etc", nil }
func (badView) Hidden(string) (string, bool)   { return "", false }

func TestViewFailuresFailClosed(t *testing.T) {
	_, def := catalogs(t)
	for _, v := range []View{errView{}, badView{}} {
		_, err := Check(def, v, dirScope, a("cat", "README.md"))
		var ref *Refusal
		require.True(t, errors.As(err, &ref), "%v", err)
		require.Equal(t, KindPath, ref.Kind)
		require.Equal(t, 1, ref.Index)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Command
	}{
		{"bad name", Command{Name: "./cat"}},
		{"upper name", Command{Name: "Cat"}},
		{"never allowed", Command{Name: "bash"}},
		{"unknown syntax", Command{Name: "x", Syntax: "shell"}},
		{"unknown type", Command{Name: "x", Layout: Layout{Operands: []Operand{{Type: "path"}}}}},
		{"empty type", Command{Name: "x", Layout: Layout{Operands: []Operand{{}}}}},
		{"enum without values", Command{Name: "x", Options: []Option{{Long: "c", Arg: ArgRequired, Type: TypeEnum}}}},
		{"literal without values", Command{Name: "x", Layout: Layout{Operands: []Operand{{Type: TypeLiteral}}}}},
		{"values on pattern", Command{Name: "x", Layout: Layout{Operands: []Operand{{Type: TypePattern, Values: []string{"a"}}}}}},
		{"value without type", Command{Name: "x", Options: []Option{{Long: "c", Arg: ArgRequired}}}},
		{"type without value", Command{Name: "x", Options: []Option{{Long: "c", Type: TypePattern}}}},
		{"unknown arg mode", Command{Name: "x", Options: []Option{{Long: "c", Arg: "maybe", Type: TypePattern}}}},
		{"no names", Command{Name: "x", Options: []Option{{}}}},
		{"long short", Command{Name: "x", Options: []Option{{Short: "ab"}}}},
		{"dash short", Command{Name: "x", Options: []Option{{Short: "-"}}}},
		{"bad long", Command{Name: "x", Options: []Option{{Long: "--x"}}}},
		{"alias without long", Command{Name: "x", Options: []Option{{Short: "a", Aliases: []string{"b"}}}}},
		{"dup short", Command{Name: "x", Options: []Option{{Short: "a"}, {Short: "a", Long: "b"}}}},
		{"dup long", Command{Name: "x", Options: []Option{{Long: "a"}, {Short: "b", Aliases: []string{"a"}, Long: "c"}}}},
		{"two variadics", Command{Name: "x", Layout: Layout{Operands: []Operand{{Type: TypePattern, Variadic: true}, {Type: TypePattern, Variadic: true}}}}},
		{"min above fixed", Command{Name: "x", Layout: Layout{Operands: []Operand{{Type: TypePattern}}, MinOperands: 2}}},
		{"max above fixed", Command{Name: "x", Layout: Layout{Operands: []Operand{{Type: TypePattern}}, MaxOperands: 2}}},
		{"negative", Command{Name: "x", Layout: Layout{MinOperands: -1}}},
		{"form unknown option", Command{Name: "x", Forms: []Form{{When: []string{"nope"}}}}},
		{"form without when", Command{Name: "x", Forms: []Form{{}}}},
		{"form denied option", Command{Name: "x", Options: []Option{{Long: "a", Deny: "no"}}, Forms: []Form{{When: []string{"a"}}}}},
		{"number option missing", Command{Name: "x", NumberOption: "lines"}},
		{"number option wrong type", Command{Name: "x", NumberOption: "lines", Options: []Option{{Long: "lines", Arg: ArgRequired, Type: TypePattern}}}},
		{"find with options", Command{Name: "find", Syntax: SyntaxFind, Options: []Option{{Short: "a"}}}},
		{"path operands without separator", Command{Name: "x", PathOperands: []Operand{{Type: TypeReadPath}}}},
		{"subcommand and operands", Command{Name: "x", Layout: Layout{Operands: []Operand{{Type: TypePattern}}}, Subcommands: []*Command{{Name: "y"}}}},
		{"nested subcommands", Command{Name: "x", Subcommands: []*Command{{Name: "y", Subcommands: []*Command{{Name: "z"}}}}}},
		{"dup subcommand", Command{Name: "x", Subcommands: []*Command{{Name: "y"}, {Name: "y"}}}},
		{"nil subcommand", Command{Name: "x", Subcommands: []*Command{nil}}},
		{"bad subcommand type", Command{Name: "x", Subcommands: []*Command{{Name: "y", Layout: Layout{Operands: []Operand{{Type: "q"}}}}}}},
		{"empty prepend", Command{Name: "x", Prepend: []string{""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			require.Error(t, err)
			require.True(t, errdefs.IsInvalidArgument(err), "%v", err)
		})
	}
	ok := Command{Name: "x", Options: []Option{{Short: "a", Long: "all"}, {Long: "deny-me", Arg: ArgRequired, Deny: "no"}},
		Layout: Layout{Operands: []Operand{{Type: TypeEnum, Values: []string{"a"}}, {Type: TypeReadPath, Variadic: true}}}}
	require.NoError(t, ok.Validate())
}

func TestParseCatalogStrict(t *testing.T) {
	for _, doc := range []string{
		"commands:\n  - name: cat\n    unknown: 1\n",
		"commands:\n  - name: cat\n    options:\n      - {short: a, bogus: x}\n",
		"commands:\n  - name: cat\n  - name: cat\n",
		"commands:\n  - name: sh\n",
		"commands:\n  -\n",
		"commands: {}\n",
		"commands:\n  - name: cat\n    operands: [{type: read-path, variadic: yes please}]\n",
		"commands:\n  - name: cat\n---\ncommands: [\n", // a malformed second document
		"commands:\n  - name: cat\n---\ncommands: []\n",
	} {
		_, err := ParseCatalog([]byte(doc))
		require.Error(t, err, doc)
		require.True(t, errdefs.IsInvalidArgument(err), "%v", err)
	}
	m, err := ParseCatalog([]byte("commands:\n  - name: cat\n    end-of-options: true\n    operands: [{type: read-path, variadic: true}]\n"))
	require.NoError(t, err)
	require.Contains(t, m, "cat")
}

func TestShippedCatalog(t *testing.T) {
	all, def := catalogs(t)
	for _, n := range []string{"ls", "cat", "echo", "head", "tail", "wc", "grep", "rg", "find", "sort", "uniq", "cut", "tr",
		"diff", "stat", "file", "sed", "cp", "mv", "mkdir", "touch", "rm", "git"} {
		require.Contains(t, all, n)
	}
	require.NotContains(t, def, "git")
	for n, c := range all {
		require.False(t, NeverAllowed(n))
		require.NoError(t, c.Validate())
	}
	require.Equal(t, []string{"--sandbox"}, all["sed"].Prepend)
	require.Equal(t, []string{"--no-config"}, all["rg"].Prepend)
}
