package integration

// TestCases runs every hostile case of testdata/cases.json (a verbatim
// copy of the shared cases) against a real containerd: TestCases/<id>.
// The inputs (argv, ops, trees, in-box steps) are read from the case
// data; this file says only what each one must give, in the order the
// case lists them, and the harness (cases_harness_test.go) checks after
// every case that nothing hidden reached any output, that the repository
// is byte-identical, and that no refusal started a container.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/review"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// notHere are the cases whose subject is applying patches, tested with
// the review package.
var notHere = map[string]string{
	"DIFF-01": "patch headers are re-validated where patches are applied (review)",
	"DIFF-02": "symlink and gitlink modes in a patch are refused where patches are applied (review)",
	"DIFF-05": "only corral's own change set is applied, never another patch format (review)",
}

func TestCases(t *testing.T) {
	cases := loadCases(t)
	w := watchTasks(t)
	tested := map[string]bool{}
	for _, c := range cases {
		if _, ok := notHere[c.ID]; ok {
			continue
		}
		fn := caseTests[c.ID]
		if fn == nil {
			t.Errorf("case %s (%s) has no test", c.ID, c.Class)
			continue
		}
		tested[c.ID] = true
		t.Run(c.ID, func(t *testing.T) { fn(newHarness(t, c, w)) })
	}
	for id := range caseTests {
		if !tested[id] {
			t.Errorf("TestCases has a test for %s but the case data does not", id)
		}
	}
}

// caseTests maps each case id to its test.
var caseTests = map[string]func(h *harness){
	// --- arg-allowlist ---

	"CMD-01": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(false,
			refuseArg(4, "find -exec is not allowed: runs a program"),
			refuseArg(2, "find -execdir is not allowed: runs a program"),
			refuseArg(2, "find -ok is not allowed: runs a program"),
			refuseArg(2, "find -delete is not allowed: deletes files"),
			refuseArg(2, "find -fprint is not allowed: writes a file"),
			refuseArg(2, "find -fprintf is not allowed: writes a file"),
			refuseArg(2, "find -fls is not allowed: writes a file"),
			refuseCmd("fd is never allowed"),
			refuseCmd("fd is never allowed"),
		)
		h.control(literal(func(h *harness, argv []string, r *sandbox.Result) {
			require.Equal(h.t, 0, r.ExitCode, string(r.Stderr))
			require.Contains(h.t, lines(out(r)), "./README.md")
			require.Contains(h.t, lines(out(r)), "./openwiki/index.md")
			h.noHiddenNames(out(r))
		}))
	},

	"CMD-02": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(false,
			refuseArg(2, "command 'e' is not allowed"),
			refuseArg(1, "s flag 'e' is not allowed"),
			refuseArg(2, "command 'w' is not allowed"),
			refuseArg(2, "command 'r' is not allowed"),
			refuseArg(1, "edits files in place"),
			refuseArg(1, "edits files in place"),
			refuseArg(1, "reads a script that corral cannot check"),
		)
		h.control(runs(func(h *harness, argv []string, r *sandbox.Result) {
			require.Equal(h.t, 0, r.ExitCode, string(r.Stderr))
			require.Equal(h.t, h.tree["README.md"], out(r))
			require.Contains(h.t, r.Argv, "--sandbox", "sed always runs sandboxed")
		}))
	},

	"CMD-03": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(false, repeat(5, refuseCmd("awk is never allowed"))...)
	},

	"CMD-04": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, map[string]string{"openwiki/rgrc": "--pre=openwiki/p.sh\n"})
		h.argvs(false,
			refuseArg(1, "runs a program on every file"),
			refuseArg(1, "runs a program on every file"),
			refuseArg(1, "runs a program"),
			refuseArg(1, "runs decompression programs"),
			refuseArg(1, "runs decompression programs"),
			refuseArg(3, "runs a program on every file"),
		)
		// No config file can inject --pre: rg always runs --no-config, and
		// RIPGREP_CONFIG_PATH never reaches the container.
		h.setHostEnv(map[string]string{"RIPGREP_CONFIG_PATH": filepath.Join(h.repo, "openwiki", "rgrc")})
		s := h.shared("run-docs", false)
		r := h.ran(s, []string{"rg", "install", "README.md"})
		require.Equal(h.t, 0, r.ExitCode, string(r.Stderr))
		require.Equal(h.t, []string{"rg", "--no-config"}, r.Argv[:2])
		h.requireFixedEnv(s, "RIPGREP_CONFIG_PATH")
	},

	"CMD-06": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(true,
			refuseArg(1, "sets configuration"),
			refuseArg(1, "sets configuration"),
			refuseArg(1, "sets configuration from the environment"),
			refuseArg(1, "runs a pager"),
			refuseArg(1, "runs a pager"),
			refuseArg(1, "sets configuration"),
			refuseArg(1, "sets configuration"),
		)
		// What a permitted git runs with: pager, fsmonitor and hooks pinned off.
		d, err := h.shared("quiet-git", true, withProfile(gitProfile(h.t))).Check([]string{"git", "log"})
		require.NoError(h.t, err)
		for _, pin := range []string{"--no-pager", "core.pager=cat", "core.fsmonitor=false", "core.hooksPath=/dev/null"} {
			require.Contains(h.t, d.Argv, pin)
		}
	},

	"CMD-07": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(true,
			refuseArg(2, "writes a file"),
			refuseArg(2, "writes a file"),
			refuseArg(2, "runs an external diff program"),
			refuseArg(3, "runs textconv filters"),
			refuseArg(1, "subcommand ls-remote is not allowed"),
			refuseArg(1, "subcommand fetch is not allowed"),
			refuseArg(1, "subcommand rebase is not allowed"),
		)
	},

	"CMD-09": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(true,
			refuseArg(3, "runs a program on every file"),
			refuseArg(2, "writes a file"),
			// After "--" an option-looking operand is a path, and the
			// program is given it so ("./--output=x") that it cannot be
			// read as an option.
			runs(func(h *harness, argv []string, r *sandbox.Result) {
				require.Equal(h.t, []string{"--", "./--output=x"}, r.Argv[len(r.Argv)-2:])
				require.NotEqual(h.t, 0, r.ExitCode) // no repository in the view
			}),
			literal(func(h *harness, argv []string, r *sandbox.Result) {
				require.Equal(h.t, []string{"grep", "--", "x", "./-f"}, r.Argv)
				require.Equal(h.t, 2, r.ExitCode)
				requireMissing(h.t, string(r.Stderr), "./-f")
			}),
		)
		// Names taken from a listing may begin with '-': as a path they
		// reach the program as a file name; bare, they are options, read
		// as the tool reads them (and refused when not allowed).
		s := h.shared("run-docs", false)
		q := h.shared("quiet-docs", true)
		var paths, want []string
		for p := range h.c.Input.Tree {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		cat := []string{"cat"}
		grep := []string{"grep", "--count", "--", "x"}
		content := ""
		for _, p := range paths {
			cat = append(cat, p)
			content += h.tree[p]
			base := path.Base(p)
			grep = append(grep, base)
			want = append(want, "./"+base)
			require.Equal(h.t, allowlist.KindArg, h.refusedAny(q, []string{"grep", "-c", "x", base}).Kind)
		}
		r := h.ran(s, cat)
		require.Equal(h.t, 0, r.ExitCode, "%q: %s", cat, r.Stderr)
		require.Equal(h.t, content, out(r))
		r = h.ran(s, grep)
		require.Equal(h.t, append([]string{"grep", "--count", "--", "x"}, want...), r.Argv)
		for _, w := range want {
			requireMissing(h.t, string(r.Stderr), w)
		}
	},

	"CMD-10": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(false, repeat(10, refuseCmd("is never allowed"))...)
	},

	"CMD-11": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, map[string]string{".env": "SECRET", "secrets/key": "SECRET", "secrets/key.pem": "SECRET"})
		h.argvs(false,
			refusePath(2, ".openwikiignore:1 hides .env"),
			refusePath(2, ".openwikiignore:2 hides secrets/"),
			refuseArg(1, "reads a magic file that corral cannot check"),
			refuseArg(1, "reads file names that corral cannot check"),
			refuseArg(2, "too many operands for uniq"),
			refuseCmd("base64 is not on the allowlist"),
			refuseCmd("jq is never allowed"),
		)
		h.requireHiddenTree()
	},

	"CMD-12": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(false, repeat(5, refuseCmd("is never allowed"))...)
		var names []string
		for k := range h.c.Input.EnvHost {
			names = append(names, k)
		}
		h.setHostEnv(h.c.Input.EnvHost)
		s := h.shared("run-docs", false)
		h.requireFixedEnv(s, append(names, "EDITOR", "VISUAL")...)
	},

	"CMD-13": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(false,
			refuseCmd("tar is never allowed"),
			refuseCmd("tar is never allowed"),
			refuseCmd("tar is never allowed"),
			refuseCmd("tar is never allowed"),
			// No glob is ever expanded: openwiki/* is a name that does not exist.
			literal(func(h *harness, argv []string, r *sandbox.Result) {
				require.Equal(h.t, 1, r.ExitCode)
				require.Empty(h.t, out(r))
				requireMissing(h.t, string(r.Stderr), "openwiki/*")
			}),
		)
	},

	"CMD-14": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(false,
			refuseCmd("must be a bare name"),
			refuseCmd("must be a bare name"),
			refuseCmd("must be a bare name"),
			refuseCmd("must be a bare name"),
			refuseCmd("must be a bare name"),
			refuseCmd("CAT is not on the allowlist"),
		)
		// The repository and the write area are noexec: the planted
		// scripts cannot run even from inside.
		var steps []kernelStep
		for p := range h.c.Input.Tree {
			steps = append(steps, kernelStep{what: p, argv: []string{"probe", "exec", path.Join(mounts.ContainerRoot, p)}, check: func(t *testing.T, out string, rc int) {
				require.Equal(t, "EACCES\n", out, p)
			}})
		}
		h.kernelSteps(h.shared("run-docs", false), steps)
	},

	"CMD-15": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(false,
			// grep reads each metacharacter token as a file name; the URL
			// is a relative path too, given canonically.
			literal(func(h *harness, argv []string, r *sandbox.Result) {
				require.Equal(h.t, []string{"grep", "--", "install", "README.md;", "env", "|", "curl", "http:/x"}, r.Argv)
				require.Equal(h.t, 2, r.ExitCode)
				require.Empty(h.t, out(r))
				for _, f := range []string{"README.md;", "env", "|", "curl", "http:/x"} {
					requireMissing(h.t, string(r.Stderr), f)
				}
			}),
			literal(func(h *harness, argv []string, r *sandbox.Result) {
				require.Equal(h.t, 0, r.ExitCode)
				require.Equal(h.t, argv[1]+"\n", out(r))
			}),
			literal(func(h *harness, argv []string, r *sandbox.Result) {
				require.Equal(h.t, 1, r.ExitCode)
				require.Empty(h.t, out(r))
			}),
			literal(func(h *harness, argv []string, r *sandbox.Result) {
				require.Equal(h.t, 1, r.ExitCode)
				require.Empty(h.t, out(r))
			}),
			literal(func(h *harness, argv []string, r *sandbox.Result) {
				require.NotEqual(h.t, 0, r.ExitCode)
				requireMissing(h.t, string(r.Stderr), ">")
				requireMissing(h.t, string(r.Stderr), "openwiki/out")
			}),
		)
		// Nothing was redirected anywhere.
		cs, err := h.shared("run-docs", false).Changes()
		require.NoError(h.t, err)
		require.NoError(h.t, cs.Err())
		require.Empty(h.t, cs.Changes)
	},

	"CMD-17": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		want := []outcome{
			refuseArg(allowlist.MaxArgs, "too many arguments"),
			refuseArg(1, "argument too large"),
			refuseArg(allowlist.MaxArgs, "too many arguments"),
		}
		require.Len(h.t, want, len(h.c.Input.ArgvGenerated))
		s := h.shared("quiet-docs", true)
		for i, desc := range h.c.Input.ArgvGenerated {
			gen := argvGenerators[desc]
			require.NotNil(h.t, gen, "no generator for %q", desc)
			h.refused(s, gen(), want[i])
		}
		// The instructions planted in AGENTS.md are hidden, and change nothing.
		h.requireHiddenTree()
		h.refused(s, []string{"cat", "AGENTS.md"}, refusePath(1, "profile hides agent config AGENTS.md"))
	},

	"CMD-18": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		// A request's environment cannot even be expressed: Exec takes an
		// argv and nothing else. The supervisor's own environment holding
		// the same variables reaches no container.
		var names []string
		s := h.shared("quiet-docs", true)
		for i, req := range h.c.Input.Requests {
			for k := range req.Env {
				names = append(names, k)
			}
			h.setHostEnv(req.Env)
			want := []outcome{
				refuseCmd("git is not on the allowlist"),
				refuseCmd("environment assignments are not allowed"),
				refuseCmd("export is never allowed"),
			}[i]
			h.refused(s, req.Argv, want)
		}
		h.requireFixedEnv(h.shared("run-docs", false), names...)
	},

	"CMD-20": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(true,
			refuseCmd("ping is never allowed"),
			refuseCmd("nslookup is never allowed"),
			refuseCmd("curl is never allowed"),
			refuseArg(1, "subcommand ls-remote is not allowed"),
		)
		// Even if one were reached: no interface but lo, no inet socket.
		s := h.shared("run-docs", false)
		require.Equal(h.t, "lo\n", out(h.box(s, "probe", "ifaces")))
		require.Equal(h.t, "EPERM\n", out(h.box(s, "probe", "socket-inet")))
	},

	// --- path-confinement ---

	"PATH-01": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, map[string]string{"openwiki/pages/a.md": "# A\n"})
		outside := "outside the write scope openwiki/"
		page := "only the assigned page openwiki/pages/a.md is writable"
		h.ops(
			opWant{policy: refusePath(-1, outside), kernel: "EROFS"},
			opWant{policy: refusePath(-1, outside), kernel: "EROFS"},
			opWant{policy: refusePath(-1, outside), kernel: "EROFS"},
			opWant{policy: refusePath(-1, page), kernel: "EROFS"},
			opWant{policy: refusePath(-1, page), kernel: "EROFS"},
			opWant{policy: refusePath(-1, page), kernel: "ENOTDIR"},
		)
		h.requireNoChanges("docs")
		h.requireNoChanges("page:openwiki/pages/a.md")
	},

	"PATH-02": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		outside := "outside the write scope openwiki/"
		h.ops(
			opWant{policy: refusePath(-1, "path leaves the repository"), kernel: "image"},
			opWant{policy: refusePath(-1, ".git is hidden at every depth"), kernel: "absent"},
			opWant{policy: refusePath(-1, outside), kernel: "EROFS"},
			opWant{policy: refusePath(-1, outside), kernel: "EROFS"},
			opWant{policy: refusePath(-1, outside), kernel: "EROFS"},
			opWant{kernel: "ok"}, // %2e%2e is a literal name inside openwiki/
			opWant{policy: refusePath(-1, "backslash"), kernel: "EROFS"},
			opWant{kernel: "ok"}, // ".. " is a literal name inside openwiki/
			opWant{policy: refusePath(-1, "absolute paths are not allowed"), kernel: "EROFS"},
			opWant{policy: refusePath(-1, "home-directory paths"), kernel: "EROFS"},
			opWant{policy: refusePath(-1, outside), kernel: "ENOENT"}, // openwiki/a does not exist
		)
		// The literal names stayed literal and inside the write scope.
		cs, err := h.shared("run-docs", false).Changes()
		require.NoError(h.t, err)
		require.NoError(h.t, cs.Err())
		require.Equal(h.t, []string{"create openwiki/%2e%2e/x", "create openwiki/.. /x"}, summary(cs))
		patch, err := changeset.Patch(cs)
		require.NoError(h.t, err)
		gitApplyCheck(h.t, h.repo, patch)
	},

	"PATH-04": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.ops(
			opWant{policy: refusePath(-1, "symlink docs/passwd leaves the repository"), kernel: "image"},
			opWant{policy: refusePath(-1, "leaves the repository"), kernel: "absent"},
			opWant{policy: refusePath(1, ".git is hidden at every depth"), kernel: "absent"},
			opWant{policy: refusePath(1, "openwiki/.claims is owned by corral"), kernel: "absent"},
		)
		h.requireHiddenTree()
	},

	"PATH-05": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, map[string]string{"a": "a\n"})
		h.ops(
			opWant{policy: refusePath(-1, "resolves to src/new.js, outside the write scope openwiki/"), kernel: "EROFS"},
			opWant{policy: refusePath(-1, "resolves to README.md, outside the write scope openwiki/"), kernel: "EROFS"},
			opWant{policy: refusePath(2, "resolves to src, outside the write scope openwiki/"), kernel: "fails:Read-only file system"},
		)
		// A link the agent makes is collected as the link itself, and rejected.
		s := h.shared("run-docs", false)
		require.Equal(h.t, "ok\n", out(h.box(s, "probe", "symlink", "../src", "openwiki/assets2")))
		cs, err := s.Changes()
		require.NoError(h.t, err)
		h.requireViolations(cs, map[string]string{"openwiki/assets2": "symbolic link"})
		require.Empty(h.t, cs.Changes)
	},

	"PATH-06": func(h *harness) {
		require.Equal(h.t, "start run", h.c.Input.Op)
		e := testutil.Executor(h.t)
		for i, variant := range h.c.Input.TreeVariants {
			h.run(fmt.Sprintf("variant%d", i), func(h *harness) {
				v := h.fresh()
				v.repoFrom(variant, nil)
				pages := []string{v.page}
				if v.page == "" && variantUnderWriteDir(variant) {
					// A link below openwiki/ that leaves the repository
					// refuses the start in page mode (a mount-target
					// component) and in directory mode (a write through it
					// would land outside the scope).
					pages = append(pages, "openwiki/pages/a.md")
				}
				for _, page := range pages {
					cfg := sandbox.SessionConfig{Repo: v.repo, Profile: docsProfile(h.t), Page: page}
					sessions := filepath.Join(testutil.StateDir(h.t), "sessions")
					before, _ := os.ReadDir(sessions)
					s, err := e.NewSession(context.Background(), cfg)
					after, _ := os.ReadDir(sessions)
					require.Equal(h.t, len(before), len(after), "a refused start left session state")
					require.Error(h.t, err, "the session started on %v (page %q)", variant, page)
					require.Nil(h.t, s)
					require.True(h.t, errdefs.IsFailedPrecondition(err), "REFUSE/START: %v", err)
					require.Contains(h.t, err.Error(), "symlink")
					_, err = sandbox.NewPolicy(cfg)
					require.True(h.t, errdefs.IsFailedPrecondition(err), "%v", err)
				}
			})
		}
	},

	"PATH-07": func(h *harness) {
		for i, variant := range h.c.Input.TreeVariants {
			h.run(fmt.Sprintf("variant%d", i), func(h *harness) {
				v := h.fresh()
				v.repoFrom(variant, nil)
				claims := "openwiki/.claims is owned by corral"
				v.ops(
					opWant{policy: refusePath(1, claims), kernel: "ok"},
					opWant{policy: refusePath(-1, claims), kernel: "ok"},
					opWant{policy: refusePath(-1, claims)}, // the cwd; see ops
					opWant{policy: refusePath(-1, ".git is hidden at every depth"), kernel: "absent"},
					opWant{policy: refusePath(-1, ".git is hidden at every depth"), kernel: "absent"},
				)
				v.requireHiddenTree()
				// What the kernel let the box create under .claims is
				// rejected from the diff.
				cs, err := v.shared("run-docs", false).Changes()
				require.NoError(h.t, err)
				v.requireViolations(cs, map[string]string{"openwiki/.claims": "hidden path (.claims)"})
			})
		}
	},

	"PATH-10": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, map[string]string{"openwiki/d/x.md": "# x\n"})
		h.pathRace()
	},

	"PATH-11": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(true,
			refuseArg(1, "subcommand add is not allowed"),
			refuseArg(1, "changes the repository"),
			refuseArg(1, "changes the repository"),
			refuseArg(1, "changes the work tree"),
			refuseArg(2, "compares files outside the repository"),
		)
	},

	// --- ignore-semantics ---

	"IGN-01": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.ignoreCase(".openwikiignore:")
		h.ops(
			opWant{policy: refusePath(1, ".openwikiignore:1 hides d/"), kernel: "absent"},
			opWant{policy: refusePath(1, ".openwikiignore:3 hides foo"), kernel: "absent"},
		)
	},

	"IGN-02": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.ignoreCase(".openwikiignore:")
		h.ops(
			opWant{policy: refusePath(1, ".openwikiignore:1 hides secrets/"), kernel: "absent"},
			opWant{policy: refusePath(1, ".openwikiignore:2 hides .env"), kernel: "absent"},
		)
	},

	"IGN-05": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.ignoreCase(".openwikiignore:")
		// The case's own reading of git, pinned: a middle slash anchors.
		require.True(h.t, h.visible["sub/config/secret.yml"])
		for _, p := range []string{".env", "x/.env", "a/b", "a/x/y/b", "config/secret.yml"} {
			require.True(h.t, h.hidden[p], p)
		}
	},

	"IGN-06": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		listing := func(h *harness, argv []string, r *sandbox.Result) {
			require.Contains(h.t, []int{0, 1}, r.ExitCode, string(r.Stderr))
			h.noHiddenNames(out(r))
		}
		h.argvs(false,
			runs(listing),
			runs(listing),
			runs(listing),
			runs(func(h *harness, argv []string, r *sandbox.Result) {
				require.Equal(h.t, 1, r.ExitCode, "rg -uuu found hidden bytes: %s", r.Stdout)
			}),
			refusePath(1, ".openwikiignore:1 hides secrets/"),
			refusePath(1, ".openwikiignore:1 hides secrets/"),
			refuseCmd("du is not on the allowlist"),
		)
		// The same argvs in the box: absent from the mount, not filtered
		// per tool.
		s := h.shared("run-docs", false)
		var steps []kernelStep
		for _, argv := range h.c.Input.Argv {
			if argv[0] == "du" {
				argv = append([]string{"busybox"}, argv...)
			}
			steps = append(steps, kernelStep{what: strings.Join(argv, " "), argv: argv, check: func(t *testing.T, out string, rc int) {
				// Error messages repeat the argv's own words; nothing else
				// may name a hidden path.
				for _, a := range argv {
					out = strings.ReplaceAll(out, a, "")
				}
				h.sub(t).noHiddenNames(out)
			}})
		}
		h.kernelSteps(s, steps)
		cs, err := s.Changes()
		require.NoError(h.t, err)
		require.Empty(h.t, cs.Changes, "cp copied a hidden file")
		h.requireHiddenTree()
	},

	"IGN-07": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, map[string]string{
			"openwiki/secret.txt":  "SECRET",
			"sub2/.openwikiignore": "!AGENTS.md\n!.mcp.json\n",
			"sub2/AGENTS.md":       "SECRET",
			"sub2/.mcp.json":       "SECRET",
		})
		h.ignoreCase(".openwikiignore:")
		require.True(h.t, h.visible["sub/secret.txt"], "nested files follow git: sub/secret.txt is visible")
		h.ops(
			opWant{kernel: "ok"}, // permitted; what matters is the view and the diff
			opWant{kernel: "content"},
		)
		cs, err := h.shared("run-docs", false).Changes()
		require.NoError(h.t, err)
		h.requireViolations(cs, map[string]string{"openwiki/.openwikiignore": "ignore files cannot be changed"})
	},

	"IGN-08": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.ops(
			opWant{policy: refusePath(1, ".openwikiignore:1 hides private/"), kernel: "absent"},
			opWant{policy: refusePath(1, ".openwikiignore:1 hides private/"), kernel: "absent"},
			opWant{policy: refusePath(-1, ".openwikiignore:1 hides private/"), kernel: "absent"},
		)
		h.requireHiddenTree()
	},

	// --- config-takeover ---

	"CFG-01": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		// Outside the write scope, or hidden by the profile (agent config):
		// refused either way, naming the rule.
		outside := opWant{policy: refusePath(-1, "outside the write scope openwiki/|profile hides agent config"), kernel: "EROFS"}
		want := repeat(len(h.c.Input.Ops), outside)
		for i, o := range h.c.Input.Ops {
			if strings.HasPrefix(o, "write .git/") {
				want[i] = opWant{policy: refusePath(-1, ".git is owned by git and never writable"), kernel: "EROFS"}
			}
		}
		h.ops(want...)
		h.requireNoChanges("docs")
	},

	"CFG-02": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		// Allowed to run (the policy may refuse those the profile hides);
		// the kernel lets the box write them inside openwiki/.
		h.ops(repeat(len(h.c.Input.Ops), opWant{policy: outcome{kind: "either"}, kernel: "ok"})...)
		s := h.shared("run-docs", false)
		cs, err := s.Changes()
		require.NoError(h.t, err)
		// Each is rejected from the change set, or is a change that
		// review classes high-risk (needs explicit approval).
		for _, o := range parseOps(h.t, h.c.Input.Ops) {
			rejected := slices.ContainsFunc(cs.Violations, func(v changeset.Problem) bool {
				return v.Path == o.path || strings.HasPrefix(o.path, v.Path+"/")
			})
			if rejected {
				continue
			}
			i := slices.IndexFunc(cs.Changes, func(c changeset.Change) bool { return c.Path == o.path })
			require.GreaterOrEqual(h.t, i, 0, "%s is neither a change nor rejected", o.path)
			risk := review.Classify(cs.Changes[i], s.Scope)
			require.Equal(h.t, review.High, risk.Level, "%s: %v", o.path, risk.Reasons)
		}
	},

	"CFG-03": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		ops := parseOps(h.t, h.c.Input.Ops)
		require.Len(h.t, ops, 2)
		require.Equal(h.t, "start", ops[0].verb)
		// Starting reads no repository file for policy and spawns nothing.
		s := h.shared("quiet-docs", true)
		h.requireNothingStarted(s)
		require.Equal(h.t, docsProfile(h.t).Commands, s.Profile.Commands)
		require.False(h.t, slices.Contains(s.Profile.Commands, "sh"))
		h.refused(s, ops[1].argv, refuseCmd("sh is never allowed"))
		// The planted files change neither the image, the network, nor the
		// environment.
		h.setHostEnv(map[string]string{"CORRAL_PROFILE": "./evil.yaml", "CORRAL_IMAGE": "attacker/img"})
		run := h.shared("run-docs", false)
		h.requireFixedEnv(run, "CORRAL_PROFILE", "CORRAL_IMAGE")
		require.Equal(h.t, "lo\n", out(h.box(run, "probe", "ifaces")))
		require.Equal(h.t, "EPERM\n", out(h.box(run, "probe", "socket-inet")))
		h.requireHiddenTree()
	},

	// --- secret-leak ---

	"ENV-01": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		h.argvs(false,
			refuseCmd("env is never allowed"),
			refusePath(1, "absolute paths are not allowed"),
			refusePath(1, "absolute paths are not allowed"),
			refuseCmd("jq is never allowed"),
		)
		var names []string
		for k := range h.c.Input.HostEnv {
			names = append(names, k)
		}
		h.setHostEnv(h.c.Input.HostEnv)
		h.requireFixedEnv(h.shared("run-docs", false), names...)
	},

	// --- diff-apply (the collector) ---

	"DIFF-03": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		s := h.shared("run-docs", false)
		want := []stepWant{
			{exit: 1, stderr: "Operation not permitted"}, // seccomp: no mknod, fifos included
			{exit: 0},
			{stdout: "ok\n"},
			{exit: 0},
			{exit: 1, stderr: "Invalid cross-device link"}, // EXDEV: the repository is another mount
		}
		h.steps(s, want)
		cs, err := s.Changes()
		require.NoError(h.t, err)
		h.requireViolations(cs, map[string]string{
			"openwiki/r":    "symbolic link",
			"openwiki/s":    "socket",
			"openwiki/a.md": "hard link",
			"openwiki/b.md": "hard link",
		})
		require.NotContains(h.t, summary(cs), "create openwiki/c.md")
	},

	"DIFF-07": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		want := []stepWant{
			{exit: 0, violation: [2]string{"openwiki/big", "exceeds the limit"}},
			{exit: -1, full: true}, // the shell stops at the first failed redirection
			// The kernel stops the descent (PATH_MAX for the shell's cd,
			// else the inode limit); the collector rejects past depth 32.
			{exit: -1, violation: [2]string{"openwiki/" + strings.Repeat("d/", 32) + "d", "deeper than 32"}},
			{exit: -1, full: true, violation: [2]string{"openwiki/x", "exceeds the limit"}},
		}
		require.Len(h.t, want, len(h.c.Input.InBox))
		for i, step := range h.c.Input.InBox {
			h.run(fmt.Sprintf("step%d", i), func(h *harness) {
				// Each bomb gets a fresh write area.
				s := h.session()
				h.steps(s, []stepWant{want[i]}, step)
				h.requireWriteAreaIsTmpfs(s)
			})
		}
	},

	"DIFF-09": func(h *harness) {
		require.Equal(h.t, "assigned openwiki/pages/a.md", h.c.Input.Mode)
		page := strings.TrimPrefix(h.c.Input.Mode, "assigned ")
		h.repoFrom(h.c.Input.Tree, map[string]string{page: "# A\n", "openwiki/pages/c.md": "# C\n"})
		s := h.shared("run-page:"+page, false, withPage(page))
		busyOrRO := "Read-only file system|Device or resource busy"
		h.steps(s, []stepWant{
			{exit: 1, stderr: busyOrRO},
			{stdout: "EROFS\n"},
			{exit: 1, stderr: "Read-only file system"},
			{stdout: "EROFS\n"},
		})
		// The policy refuses the same steps before they run.
		q := h.shared("quiet-page:"+page, true, withPage(page))
		for _, step := range h.c.Input.InBox {
			if argv := strings.Fields(step); slices.Contains(q.Profile.Commands, argv[0]) {
				r := h.refusedAny(q, argv)
				require.Equal(h.t, allowlist.KindPath, r.Kind)
			}
		}
		// Writing the page itself works and is the only change.
		require.Equal(h.t, "ok\n", out(h.box(s, "probe", "write", page, "# A\n\nedited\n")))
		cs, err := s.Changes()
		require.NoError(h.t, err)
		require.NoError(h.t, cs.Err())
		require.Equal(h.t, []string{"modify " + page}, summary(cs))
	},

	"DIFF-10": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, map[string]string{"openwiki/pages/a.md": "# A\n", "openwiki/pages/b.md": "# B\n", "openwiki/old.md": "# old\n"})
		s := h.shared("run-docs", false)
		h.steps(s, []stepWant{{exit: 0}, {exit: 0}, {exit: 0}})
		cs, err := s.Changes()
		require.NoError(h.t, err)
		require.NoError(h.t, cs.Err())
		// Whiteouts are deletions inside the scope; the directory that
		// became a file is shown as the deletion of each file plus a create.
		require.Equal(h.t, []string{"delete openwiki/old.md", "create openwiki/pages", "delete openwiki/pages/a.md", "delete openwiki/pages/b.md"}, summary(cs))
		patch, err := changeset.Patch(cs)
		require.NoError(h.t, err)
		gitApplyCheck(h.t, h.repo, patch)
		require.Len(h.t, h.c.Input.UpperDirExtra, 1)
		require.Equal(h.t, "c 0 0 whiteout outside openwiki/ injected by a crafted layer", h.c.Input.UpperDirExtra[0])
		h.craftedLayer()
	},

	// --- container-runtime ---

	"RT-02": func(h *harness) {
		h.repoFrom(h.c.Input.Tree, nil)
		// As TestKernelAttackSurface (isolation_test.go), from the case data.
		var steps []kernelStep
		for _, call := range h.c.Input.InBoxSyscalls {
			probes, script := rtProbes[call].probes, rtProbes[call].busybox
			require.NotEmpty(h.t, probes, "no probe for %q", call)
			for _, p := range probes {
				steps = append(steps, kernelStep{what: call, argv: []string{"probe", p}, check: func(t *testing.T, out string, rc int) {
					require.Equal(t, "EPERM\n", out, "%s (probe %s)", call, p)
				}})
			}
			if script != "" {
				steps = append(steps, kernelStep{what: call, argv: append([]string{"busybox"}, strings.Fields(script)...), check: func(t *testing.T, out string, rc int) {
					require.NotEqual(t, 0, rc, "%s: %s", script, out)
				}})
			}
		}
		steps = append(steps, kernelStep{what: "status", argv: []string{"probe", "status"}, check: func(t *testing.T, out string, rc int) {
			for _, want := range []string{"Uid: 65534 65534 65534 65534", "CapEff: 0000000000000000", "CapBnd: 0000000000000000", "NoNewPrivs: 1", "Seccomp: 2"} {
				require.Contains(t, out, want+"\n")
			}
		}})
		h.kernelSteps(h.shared("run-docs", false), steps)
	},
}

// --- generators and translations of the case data ---

func repeat[T any](n int, v T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// argvGenerators build the argv_generated inputs of CMD-17.
var argvGenerators = map[string]func() []string{
	"grep x + 100000 operands": func() []string {
		return append([]string{"grep", "x"}, repeat(100000, "README.md")...)
	},
	"one 2 MiB argument": func() []string {
		return []string{"grep", strings.Repeat("x", 2<<20), "README.md"}
	},
	"grep + 10000 -e patterns": func() []string {
		argv := []string{"grep"}
		for i := 0; i < 10000; i++ {
			argv = append(argv, "-e", fmt.Sprintf("p%d", i))
		}
		return append(argv, "README.md")
	},
}

// rtProbes are the probe subcommands (and a busybox attempt) for each
// in_box_syscalls entry of RT-02.
var rtProbes = map[string]struct {
	probes  []string
	busybox string
}{
	"unshare -Urm":          {[]string{"unshare-user", "unshare-mount", "clone-newuser"}, "unshare -Urm true"},
	"mount -t tmpfs x /mnt": {[]string{"mount"}, "mount -t tmpfs x /tmp"},
	"ptrace":                {probes: []string{"ptrace"}},
	"bpf":                   {probes: []string{"bpf"}},
	"io_uring_setup":        {probes: []string{"io_uring_setup"}},
	"keyctl":                {probes: []string{"keyctl"}},
	"userfaultfd":           {probes: []string{"userfaultfd"}},
	"mknod":                 {[]string{"mknod"}, "mknod /tmp/n c 1 3"},
}

// inBoxScripts turn the in_box steps written in words into busybox sh; a
// step that is already a shell command runs as written, without a trailing
// "(comment)".
var inBoxScripts = map[string]string{
	"bind a unix socket at openwiki/s": "probe bind-unix openwiki/s",
	"create 1e6 files":                 `i=0; while [ $i -lt 1000000 ]; do : > openwiki/f$i || break; i=$((i+1)); done; echo $i`,
	// 100 levels per mkdir -p, 100 times (a single path would pass PATH_MAX).
	"mkdir -p 10000 levels":         `p=d; i=1; while [ $i -lt 100 ]; do p=$p/d; i=$((i+1)); done; cd openwiki && j=0; while [ $j -lt 100 ]; do mkdir -p $p && cd $p || exit 1; j=$((j+1)); done`,
	"write openwiki/index.md":       "probe write openwiki/index.md x",
	"write openwiki/.claims/a.lock": "probe create openwiki/.claims/a.lock x",
}

var trailingComment = regexp.MustCompile(`\s+\([^()]*\)$`)

func inBoxScript(step string) string {
	if s, ok := inBoxScripts[step]; ok {
		return s
	}
	return trailingComment.ReplaceAllString(step, "")
}

// stepWant is what one in_box step must give.
type stepWant struct {
	exit      int       // exit code; -1: any
	stdout    string    // when set, stdout exactly
	stderr    string    // when set, a regexp stderr matches
	full      bool      // the write area filled up (the kernel stopped it)
	violation [2]string // when set, the change set is rejected for {path, reason}
}

// steps runs the in_box steps (the case's, or the given ones) in s.
func (h *harness) steps(s *sandbox.Session, want []stepWant, steps ...string) {
	t := h.t
	t.Helper()
	if steps == nil {
		steps = h.c.Input.InBox
	}
	require.Len(t, want, len(steps))
	for i, step := range steps {
		w := want[i]
		r := h.boxSh(s, inBoxScript(step))
		if w.exit >= 0 && w.stdout == "" {
			require.Equal(t, w.exit, r.ExitCode, "%s: %s%s", step, r.Stdout, r.Stderr)
		}
		if w.stdout != "" {
			require.Equal(t, w.stdout, out(r), "%s: %s", step, r.Stderr)
		}
		if w.stderr != "" {
			require.Regexp(t, w.stderr, string(r.Stderr), step)
		}
		if w.full {
			require.Contains(t, r.LimitsHit, sandbox.LimitWriteArea, "%s: the kernel did not stop it", step)
		}
		if w.violation[0] != "" {
			cs, err := s.Changes()
			require.NoError(t, err, step)
			h.requireViolations(cs, map[string]string{w.violation[0]: w.violation[1]})
		}
	}
}

// requireWriteAreaIsTmpfs: the session's write area is a size-limited
// tmpfs, so a bomb fills it and not the host's disk.
func (h *harness) requireWriteAreaIsTmpfs(s *sandbox.Session) {
	t := h.t
	t.Helper()
	area := filepath.Join(testutil.StateDir(t), "sessions", s.ID, "area")
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(area))
	require.NoError(t, err)
	require.NotEmpty(t, ms, "no mount at %s", area)
	m := ms[len(ms)-1]
	require.Equal(t, "tmpfs", m.FSType)
	require.Contains(t, m.VFSOptions, "size=")
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(area, &st))
	require.LessOrEqual(t, int64(st.Blocks)*st.Bsize, s.Profile.Limits().WriteAreaBytes)
}

// --- argv cases ---

// argvs checks each input.argv against want (one outcome each, in order)
// under the default profile. With git set, an argv that names git must
// also be refused as a command by the default profile, and want is what
// the opt-in git profile gives. Every refusal of an option is tried again
// with each abbreviation of its long name (getopt accepts them).
func (h *harness) argvs(git bool, want ...outcome) {
	require.Len(h.t, want, len(h.c.Input.Argv), "one outcome per input.argv")
	for i, argv := range h.c.Input.Argv {
		h.run(fmt.Sprintf("argv%d", i), func(h *harness) {
			key, opts := "docs", []sessOpt(nil)
			if git && argv[0] == "git" {
				h.refused(h.shared("quiet-docs", true), argv, refuseCmd("git is not on the allowlist"))
				key, opts = "git", []sessOpt{withProfile(gitProfile(h.t))}
			}
			h.invoke(key, opts, argv, want[i])
		})
	}
}

// control runs input.control.
func (h *harness) control(want outcome) {
	require.NotEmpty(h.t, h.c.Input.Control)
	h.run("control", func(h *harness) { h.invoke("docs", nil, h.c.Input.Control, want) })
}

// invoke gives argv to the case's session of profile key and checks want.
func (h *harness) invoke(key string, opts []sessOpt, argv []string, want outcome) {
	if want.kind == "" {
		s := h.shared("run-"+key, false, opts...)
		r := h.ran(s, argv)
		if want.check != nil {
			want.check(h, argv, r)
		}
		return
	}
	q := h.shared("quiet-"+key, true, opts...)
	h.refused(q, argv, want)
	if want.kind != allowlist.KindArg || want.index <= 0 {
		return
	}
	tok := argv[want.index]
	if !strings.HasPrefix(tok, "--") {
		return
	}
	name, value, hasValue := strings.Cut(tok[2:], "=")
	for n := 1; n < len(name); n++ {
		abbrev := "--" + name[:n]
		if hasValue {
			abbrev += "=" + value
		}
		v := slices.Clone(argv)
		v[want.index] = abbrev
		r := h.refusedAny(q, v)
		require.Equal(h.t, allowlist.KindArg, r.Kind, "%q", v)
		require.Equal(h.t, want.index, r.Index, "%q: %v", v, r)
	}
}

// refusedAny requires some refusal of argv, with nothing started.
func (h *harness) refusedAny(s *sandbox.Session, argv []string) *allowlist.Refusal {
	t := h.t
	t.Helper()
	res, err := s.Exec(context.Background(), argv, nil, nil)
	require.Nil(t, res, "argv %q ran", clipArgv(argv))
	var r *allowlist.Refusal
	require.True(t, errors.As(err, &r), "argv %q: want a refusal, got %v", clipArgv(argv), err)
	h.saw(err.Error())
	h.requireNothingStarted(s)
	return r
}

// noHiddenNames: no word of a listing names a hidden path.
func (h *harness) noHiddenNames(listing string) {
	t := h.t
	t.Helper()
	var tops []string
	for p := range h.hidden {
		top := p
		for q := path.Dir(p); q != "."; q = path.Dir(q) {
			if h.oracle.hidden(q) {
				top = q
			}
		}
		tops = append(tops, top)
	}
	for _, f := range strings.Fields(listing) {
		f = strings.TrimPrefix(f, "./")
		for _, top := range tops {
			require.False(t, f == top || strings.HasPrefix(f, top+"/") || (path.Dir(top) == "." && strings.TrimSuffix(f, ":") == top),
				"listing names hidden %s: %q", top, f)
		}
	}
}

// requireHiddenTree: every tree file the oracle hides is refused by the
// policy (naming a rule) and absent in the box; the view agrees with the
// oracle on every tree path. visible files are read back in the same
// container.
func (h *harness) requireHiddenTree(visible ...string) {
	t := h.t
	t.Helper()
	q := h.shared("quiet-docs", true)
	s := h.shared("run-docs", false)
	for p := range h.tree {
		if strings.HasSuffix(p, "/") {
			continue
		}
		_, hidden := q.View().Hidden(p)
		require.Equal(t, h.oracle.hidden(p), hidden, "view and git disagree on %s", p)
	}
	var hidden []string
	for p := range h.hidden {
		_, err := allowlist.CheckRead(q.View(), p)
		h.refusedPath(err, p, "")
		h.refused(q, []string{"cat", p}, refusePath(1, ""))
		hidden = append(hidden, p)
	}
	slices.Sort(hidden)
	var steps []kernelStep
	if len(hidden) > 0 {
		argv := []string{"probe", "open-each"}
		want := ""
		for _, p := range hidden {
			q := path.Join(path.Dir(p), "corral-never-existed")
			argv = append(argv, p, q)
			want += p + "\tENOENT\n" + q + "\tENOENT\n"
		}
		steps = append(steps, kernelStep{what: "hidden", argv: argv, check: func(t *testing.T, out string, rc int) {
			require.Equal(t, want, out, "a hidden path answers differently from an absent name")
		}})
	}
	if len(visible) > 0 {
		argv := []string{"probe", "open-each"}
		want := ""
		for _, p := range visible {
			argv = append(argv, p)
			want += fmt.Sprintf("%s\tok %x\n", p, sha256.Sum256([]byte(h.tree[p])))
		}
		steps = append(steps, kernelStep{what: "visible", argv: argv, check: func(t *testing.T, out string, rc int) {
			require.Equal(t, want, out, "visible files read back")
		}})
	}
	h.kernelSteps(s, steps)
}

// ignoreCase: the view agrees with git on every path and ancestor of the
// tree; hidden files are refused naming rule and absent in the box;
// visible files read back exactly.
func (h *harness) ignoreCase(rule string) {
	t := h.t
	t.Helper()
	q := h.shared("quiet-docs", true)
	s := h.shared("run-docs", false)
	var visible []string
	for p := range h.visible {
		visible = append(visible, p)
	}
	slices.Sort(visible)
	h.requireHiddenTree(visible...)
	for p := range h.tree {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			_, hidden := q.View().Hidden(d)
			require.Equal(t, h.oracle.hidden(d), hidden, "view and git disagree on %s/", d)
		}
	}
	for p := range h.hidden {
		if strings.Contains(p, ".git") || strings.Contains(p, ".claims") || strings.HasPrefix(p, "docs/AGENTS.md") {
			continue
		}
		_, err := allowlist.CheckRead(q.View(), p)
		var r *allowlist.Refusal
		require.True(t, errors.As(err, &r), p)
		if strings.Contains(r.Rule, "profile hides") {
			continue
		}
		require.Contains(t, r.Rule, rule, p)
	}
	// Every visible file is permitted: one cat of them all through the
	// policy reads them back exactly.
	want := ""
	for _, p := range visible {
		want += h.tree[p]
	}
	r := h.ran(s, append([]string{"cat"}, visible...))
	require.Equal(t, 0, r.ExitCode, "cat: %s", r.Stderr)
	require.Equal(t, want, out(r))
}

// --- ops (the file tools: read P, write P, exec [...]) ---

type op struct {
	raw     string
	verb    string // read, write, exec, start
	path    string
	content string
	argv    []string
	page    string // page mode: the assigned page
	cwd     string
	again   bool // "then run again in the same session"
}

var (
	pageModeRE = regexp.MustCompile(`^page mode(?: \(assigned ([^)]+)\))?: (.*)$`)
	execRE     = regexp.MustCompile(`^exec \[(.*)\](?: with cwd=(\S+))?$`)
)

func parseOps(t *testing.T, raws []string) []op {
	t.Helper()
	var out []op
	page := ""
	for _, raw := range raws {
		o := op{raw: raw}
		s := raw
		if m := pageModeRE.FindStringSubmatch(s); m != nil {
			if m[1] != "" {
				page = m[1]
			}
			require.NotEmpty(t, page, "%q: page mode without an assigned page", raw)
			o.page, s = page, m[2]
		}
		if x, ok := strings.CutSuffix(s, " then run again in the same session"); ok {
			o.again, s = true, x
		}
		s = strings.TrimSuffix(s, " (host API)")
		switch {
		case s == "start run":
			o.verb = "start"
		case execRE.MatchString(s):
			m := execRE.FindStringSubmatch(s)
			o.verb, o.argv, o.cwd = "exec", strings.Split(m[1], ", "), m[2]
		case strings.HasPrefix(s, "read "):
			o.verb, o.path = "read", strings.TrimPrefix(s, "read ")
		case strings.HasPrefix(s, "write "):
			o.verb, o.path, o.content = "write", strings.TrimPrefix(s, "write "), "x\n"
			if i := strings.IndexByte(o.path, ' '); i >= 0 && i+1 < len(o.path) && strings.ContainsRune("'{", rune(o.path[i+1])) {
				o.path, o.content = o.path[:i], strings.Trim(o.path[i+1:], "'")
			}
		default:
			t.Fatalf("unknown op %q", raw)
		}
		out = append(out, o)
	}
	return out
}

// opWant is what one op must give. policy: for read and write the
// host-side check (CheckRead/CheckWrite; kind "" permitted, "either"
// permitted or refused), for exec the argv's outcome. kernel: the same op
// in the box — for a write the probe's errno ("EROFS", "ENOTDIR", "ok"),
// for a read "absent", "content" (the tree's bytes) or "image" (a file of
// the tools image, never the host's), for exec "absent" (not found),
// "ok" or "fails:<stderr>"; "" not tried.
type opWant struct {
	policy outcome
	kernel string
}

// ops runs input.ops, one opWant each, in order: the policy side of each
// op as a subtest, then the kernel side of all of them in one container
// per session (in the same order), then, for an op that asks for it, a
// second invocation that must see the same view.
func (h *harness) ops(want ...opWant) {
	ops := parseOps(h.t, h.c.Input.Ops)
	require.Len(h.t, want, len(ops), "one outcome per input.ops")
	for i, o := range ops {
		h.run(fmt.Sprintf("op%d", i), func(h *harness) { h.opPolicy(o, want[i].policy) })
	}
	var keys []string
	byKey := map[string][]int{}
	for i, o := range ops {
		k := o.sessionKey()
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	for _, k := range keys {
		s := h.shared("run-"+k, false, ops[byKey[k][0]].sessionOpts()...)
		var steps []kernelStep
		var again []op
		for _, i := range byKey[k] {
			if ops[i].again {
				again = append(again, ops[i])
			}
			if st, ok := h.opKernel(ops[i], want[i].kernel); ok {
				steps = append(steps, st)
			}
		}
		var before string
		if len(again) > 0 {
			before = out(h.box(s, "find", "."))
		}
		h.kernelSteps(s, steps)
		for _, o := range again {
			h.requireSameView(s, before, o.path)
		}
	}
}

func (o op) sessionKey() string {
	if o.page != "" {
		return "page:" + o.page
	}
	return "docs"
}

func (o op) sessionOpts() []sessOpt {
	if o.page != "" {
		return []sessOpt{withPage(o.page)}
	}
	return nil
}

// opPolicy checks the policy side of one op.
func (h *harness) opPolicy(o op, want outcome) {
	t := h.t
	t.Helper()
	q := h.shared("quiet-"+o.sessionKey(), true, o.sessionOpts()...)
	switch o.verb {
	case "read", "write":
		var got string
		var err error
		if o.verb == "read" {
			got, err = allowlist.CheckRead(q.View(), o.path)
		} else {
			got, err = allowlist.CheckWrite(q.View(), q.Scope, o.path)
		}
		switch want.kind {
		case "":
			require.NoError(t, err, o.raw)
			clean, cerr := allowlist.CleanPath(o.path)
			require.NoError(t, cerr)
			require.Equal(t, clean, got, "%s: the canonical path", o.raw)
		case "either":
			if err != nil {
				h.refusedPath(err, o.path, "")
			}
		default:
			require.Equal(t, -1, want.index)
			h.refusedPath(err, o.path, want.rule)
		}
	case "exec":
		if o.cwd != "" {
			// The working directory is a read path: refused when hidden.
			_, err := allowlist.CheckRead(q.View(), o.cwd)
			h.refusedPath(err, o.cwd, want.rule)
			h.run("cwd", func(h *harness) {
				h.t.Skip("an invocation has no working directory in the API yet: exec with cwd=" + o.cwd + " cannot be tried")
			})
			return
		}
		if want.kind == "" {
			r := h.ran(h.shared("run-"+o.sessionKey(), false, o.sessionOpts()...), o.argv)
			if want.check != nil {
				want.check(h, o.argv, r)
			}
		} else {
			h.refused(q, o.argv, want)
		}
	default:
		t.Fatalf("op %q cannot be run here", o.raw)
	}
}

// kernelStep is one command of a batched in-box script and the check of
// what it printed (stdout and stderr together) and its exit status.
type kernelStep struct {
	what  string
	argv  []string
	check func(t *testing.T, out string, rc int)
}

// opKernel is the kernel side of op (in the box, without the policy).
func (h *harness) opKernel(o op, want string) (kernelStep, bool) {
	if want == "" {
		return kernelStep{}, false
	}
	st := kernelStep{what: o.raw}
	switch o.verb {
	case "write":
		st.argv = []string{"probe", "create", o.path, o.content}
		st.check = func(t *testing.T, out string, rc int) { require.Equal(t, want+"\n", out, o.raw) }
	case "read":
		switch want {
		case "absent":
			q := path.Join(path.Dir(o.path), "corral-never-existed")
			st.argv = []string{"probe", "open-each", o.path, q}
			st.check = func(t *testing.T, out string, rc int) {
				require.Equal(t, o.path+"\tENOENT\n"+q+"\tENOENT\n", out, "%s: hidden answers as absent", o.raw)
			}
		case "content":
			st.argv = []string{"probe", "open-each", o.path}
			st.check = func(t *testing.T, out string, rc int) {
				require.Equal(t, fmt.Sprintf("%s\tok %x\n", o.path, sha256.Sum256([]byte(h.tree[o.path]))), out, o.raw)
			}
		case "image":
			// A link or path that leaves the repository reaches the tools
			// image's root inside the container, never the host's.
			resolved := path.Join(mounts.ContainerRoot, o.path)
			if target, ok := strings.CutPrefix(h.tree[o.path], "-> "); ok && path.IsAbs(target) {
				resolved = target
			}
			host, _ := os.ReadFile(resolved)
			st.argv = []string{"cat", o.path}
			st.check = func(t *testing.T, out string, rc int) {
				if len(host) > 0 {
					require.NotContains(t, out, string(host), "%s printed the host's %s", o.raw, resolved)
				}
			}
		default:
			h.t.Fatalf("unknown kernel outcome %q for %s", want, o.raw)
		}
	case "exec":
		st.argv = o.argv
		st.check = func(t *testing.T, out string, rc int) {
			switch {
			case want == "absent":
				require.NotEqual(t, 0, rc, o.raw)
				require.Contains(t, out, "No such file or directory", o.raw)
			case want == "ok":
				require.Equal(t, 0, rc, "%s: %s", o.raw, out)
			case strings.HasPrefix(want, "fails:"):
				require.NotEqual(t, 0, rc, o.raw)
				require.Contains(t, out, strings.TrimPrefix(want, "fails:"), o.raw)
			default:
				t.Fatalf("unknown kernel outcome %q", want)
			}
		}
	default:
		return kernelStep{}, false
	}
	return st, true
}

var stepMark = regexp.MustCompile(`(?m)^@@corral-step (\d+) rc (\d+)$`)

// kernelSteps runs steps in one container, in order (a busybox sh script;
// test image only), and checks each.
func (h *harness) kernelSteps(s *sandbox.Session, steps []kernelStep) {
	t := h.t
	t.Helper()
	if len(steps) == 0 {
		return
	}
	var b strings.Builder
	for i, st := range steps {
		fmt.Fprintf(&b, "%s 2>&1; printf '\\n@@corral-step %d rc %%d\\n' $?; ", shellQuote(st.argv), i)
	}
	r := h.boxSh(s, b.String())
	text := out(r)
	marks := stepMark.FindAllStringSubmatchIndex(text, -1)
	require.Len(t, marks, len(steps), "in-box steps: %s%s", text, r.Stderr)
	from := 0
	for i, m := range marks {
		require.Equal(t, fmt.Sprint(i), text[m[2]:m[3]])
		var rc int
		fmt.Sscan(text[m[4]:m[5]], &rc)
		// The printf put a newline before the mark.
		steps[i].check(t, strings.TrimSuffix(text[from:m[0]], "\n"), rc)
		from = m[1] + 1
	}
}

// shellQuote quotes argv for sh, every word in single quotes.
func shellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// requireSameView: a second invocation sees what the first saw (besides
// the file the agent just wrote), and the policy's answers are unchanged.
func (h *harness) requireSameView(s *sandbox.Session, before, wrote string) {
	t := h.t
	t.Helper()
	after := out(h.box(s, "find", "."))
	var got []string
	for _, l := range lines(after) {
		if l != "./"+wrote {
			got = append(got, l)
		}
	}
	require.ElementsMatch(t, lines(before), got, "the view changed within the session")
	var hidden []string
	for p := range h.hidden {
		_, err := allowlist.CheckRead(s.View(), p)
		require.Error(t, err, "%s became readable", p)
		hidden = append(hidden, p)
	}
	slices.Sort(hidden)
	h.requireAbsent(s, hidden...)
}

// requireNoChanges: the session's change set (key as in op) is empty.
func (h *harness) requireNoChanges(key string) {
	t := h.t
	t.Helper()
	s := h.sessions["run-"+key]
	require.NotNil(t, s, "no session %s", key)
	cs, err := s.Changes()
	require.NoError(t, err)
	require.NoError(t, cs.Err())
	require.Empty(t, cs.Changes)
}

// --- the remaining special cases ---

func variantUnderWriteDir(variant map[string]string) bool {
	for k := range variant {
		if strings.HasPrefix(k, sandbox.DefaultWriteDir+"/") {
			return true
		}
	}
	return false
}

// pathRace is PATH-10: the box swaps openwiki/d for a symlink in a loop
// while the host checks writes to openwiki/d/x.md 1000 times and collects
// the change set.
func (h *harness) pathRace() {
	t := h.t
	require.NotEmpty(t, h.c.Input.InBoxLoop)
	ops := h.c.Input.Ops
	require.Len(t, ops, 2)
	require.Equal(t, "host API write openwiki/d/x.md (1000x)", ops[0])
	require.Equal(t, "diff collection of openwiki/d/x.md during the loop", ops[1])
	const timeout = 4 * time.Second
	s := h.session(withResources(t, profiles.Resources{Timeout: timeout.String()}))
	require.Equal(t, "ok\n", out(h.box(s, "probe", "write", "openwiki/d/x.md", "# edited\n")))

	type result struct {
		r   *sandbox.Result
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		r, err := s.ExecWithoutPolicy(context.Background(), []string{"busybox", "sh", "-c", shPrelude + h.c.Input.InBoxLoop}, nil, nil)
		done <- result{r, err}
	}()
	time.Sleep(500 * time.Millisecond)
	// The host's checks resolve through the merged write area, where the
	// box swaps openwiki/d for a link to /repo: each check either allows
	// exactly openwiki/d/x.md or refuses the link; never a path outside.
	for i := 0; i < 1000; i++ {
		got, err := allowlist.CheckWrite(s.View(), s.Scope, "openwiki/d/x.md")
		if err != nil {
			// A refusal of the link, or (the swap raced the lookup) a
			// resolution error: both fail closed, and neither names a
			// path outside the write scope as allowed.
			var r *allowlist.Refusal
			if errors.As(err, &r) && r.Rule != "symlink openwiki/d leaves the repository" {
				require.Contains(t, r.Rule, "resolving openwiki/d/x.md", "check %d", i)
			}
			continue
		}
		require.Equal(t, "openwiki/d/x.md", got, "check %d", i)
	}
	// Collection waits for the container to exit.
	cs, err := s.Changes()
	collected := time.Since(start)
	res := <-done
	require.NoError(t, res.err)
	require.Contains(t, res.r.LimitsHit, sandbox.LimitTimeout)
	h.saw(string(res.r.Stdout), string(res.r.Stderr))
	require.NoError(t, err)
	require.GreaterOrEqual(t, collected, timeout, "the change set was read while the box ran")
	for _, c := range cs.Changes {
		require.True(t, strings.HasPrefix(c.Path, "openwiki/"), c.Path)
	}
	for _, v := range cs.Violations {
		require.True(t, strings.HasPrefix(v.Path, "openwiki/"), v.Path)
	}
}

// craftedLayer is DIFF-10's upper_dir_extra: an upper dir made by hand
// (not by overlayfs) with whiteouts of reserved names and of a base
// symlink that points out of openwiki/, and a device that is no whiteout.
func (h *harness) craftedLayer() {
	t := h.t
	dir := t.TempDir()
	base, upper := filepath.Join(dir, "base"), filepath.Join(dir, "upper")
	require.NoError(t, os.MkdirAll(base, 0o755))
	require.NoError(t, os.MkdirAll(upper, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(base, "old.md"), []byte("# old\n"), 0o644))
	require.NoError(t, os.Symlink("../README.md", filepath.Join(base, "up")))
	for name, dev := range map[string]int{"old.md": 0, ".git": 0, ".claims": 0, "up": 0, "null": int(unix.Mkdev(1, 3))} {
		require.NoError(t, unix.Mknod(filepath.Join(upper, name), unix.S_IFCHR|0o600, dev), name)
	}
	// And what the box could not make (seccomp refuses mknod): a fifo and
	// a block device.
	require.NoError(t, unix.Mkfifo(filepath.Join(upper, "p"), 0o600))
	require.NoError(t, unix.Mknod(filepath.Join(upper, "blk"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))))
	cs, err := changeset.Collect(upper, base, sandbox.DefaultWriteDir, changeset.DefaultLimits())
	require.NoError(t, err)
	h.requireViolations(cs, map[string]string{
		"openwiki/.git":    "hidden path (.git)",
		"openwiki/.claims": "hidden path (.claims)",
		"openwiki/up":      "symbolic link",
		"openwiki/null":    "character device 1:3",
		"openwiki/p":       "fifo",
		"openwiki/blk":     "block device 7:0",
	})
	require.Equal(t, []string{"delete openwiki/old.md"}, summary(cs))
	for _, v := range cs.Violations {
		require.True(t, strings.HasPrefix(v.Path, "openwiki/"), v.Path)
	}
}
