package integration

// The harness of TestCases (cases_test.go): the case data, the repository
// a case runs on, the oracle, the sessions, the calls and their checks,
// and the checks every case shares — nothing hidden in any output, the
// repository byte-identical afterwards, no container for a refusal,
// exactly one program for a call that runs, no mount left behind.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/mounts/hidden"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// hostileCase is one entry of testdata/cases.json (a verbatim copy of the
// shared hostile cases). Decoding is strict: a field this file does not
// know fails the test instead of being ignored.
type hostileCase struct {
	ID       string    `json:"id"`
	Title    string    `json:"title"`
	Source   string    `json:"source"`
	Class    string    `json:"class"`
	Input    caseInput `json:"input"`
	Expected string    `json:"expected"`
}

type caseInput struct {
	Argv          [][]string          `json:"argv"`
	ArgvGenerated []string            `json:"argv_generated"`
	Control       []string            `json:"control"`
	Requests      []caseRequest       `json:"requests"`
	Tree          map[string]string   `json:"tree"`
	TreeVariants  []map[string]string `json:"tree_variants"`
	Ops           []string            `json:"ops"`
	Op            string              `json:"op"`
	Mode          string              `json:"mode"`
	InBox         []string            `json:"in_box"`
	InBoxLoop     string              `json:"in_box_loop"`
	InBoxSyscalls []string            `json:"in_box_syscalls"`
	UpperDirExtra []string            `json:"upper_dir_extra"`
	EnvHost       map[string]string   `json:"env_host"`
	HostEnv       map[string]string   `json:"host_env"`
	Note          string              `json:"note"`
	PatchHeaders  []string            `json:"patch_headers"`
	Patch         string              `json:"patch"`
	PatchVariants []string            `json:"patch_variants"`
}

type caseRequest struct {
	Argv []string          `json:"argv"`
	Env  map[string]string `json:"env"`
}

func loadCases(t *testing.T) []hostileCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var cases []hostileCase
	require.NoError(t, dec.Decode(&cases), "testdata/cases.json")
	ids := map[string]bool{}
	for _, c := range cases {
		require.NotEmpty(t, c.ID)
		require.False(t, ids[c.ID], "case %s listed twice", c.ID)
		ids[c.ID] = true
	}
	return cases
}

// secretMarker is the content planted in every hidden file whose case
// content is a placeholder ("S", "SECRET") or empty; it must never appear
// in anything an agent sees.
const secretMarker = "SECRET-c0rra1-"

// baseTree is merged under every case's tree (the case's entries win, and
// an entry of the case replaces every base entry above or below it). Its
// secrets sit where every profile hides them.
var baseTree = map[string]string{
	"README.md":                  "# demo\n\ninstall: run the installer\n",
	"src/main.go":                "package main\n",
	"openwiki/index.md":          "# index\n",
	"openwiki/a.md":              "# a\n",
	".git/config":                "[core]\n\tsecret = " + secretMarker + "git\n",
	"openwiki/.claims/base.lock": secretMarker + "claims\n",
	"docs/AGENTS.md":             secretMarker + "agents\n",
}

// harness runs one case; sub gives the same case state to a subtest.
type harness struct {
	t *testing.T
	*caseState
}

// caseState is shared by a case and its subtests.
type caseState struct {
	root    *testing.T // the case's test: sessions live as long as it
	c       hostileCase
	w       *taskWatcher
	e       *sandbox.Executor
	repos   string // the directory repositories are made in; "" = t.TempDir()
	repo    string
	tree    map[string]string // as built (after merging and notation)
	page    string            // the page a "(page mode)" tree entry names
	snap    map[string]string
	secrets []string // bytes of hidden files and host secrets
	never   []string // bytes the table says no output may hold
	hidden  map[string]bool
	visible map[string]bool
	oracle  *oracle

	mu       sync.Mutex
	outputs  []string // everything the agent could see
	quiet    []*sandbox.Session
	sessions map[string]*sandbox.Session
	starts   map[string]int // calls run so far (tasks exited), by session id
}

func newHarness(t *testing.T, c hostileCase, w *taskWatcher, e *sandbox.Executor) *harness {
	h := &harness{t: t, caseState: &caseState{root: t, c: c, w: w, e: e, hidden: map[string]bool{}, visible: map[string]bool{},
		sessions: map[string]*sandbox.Session{}, starts: map[string]int{}}}
	t.Cleanup(h.finish)
	return h
}

// fresh is a new case state for the subtest h runs in, for a subtest
// that builds its own repository (one per tree variant).
func (h *harness) fresh() *harness { return newHarness(h.t, h.c, h.w, h.e) }

// sub is h for the subtest t.
func (h *harness) sub(t *testing.T) *harness { return &harness{t: t, caseState: h.caseState} }

// run runs fn as subtest name with the case's state.
func (h *harness) run(name string, fn func(h *harness)) {
	h.t.Run(name, func(t *testing.T) { fn(h.sub(t)) })
}

// finish runs after the case's sessions are closed (it is registered
// first): the shared invariants.
func (h *harness) finish() {
	t := h.t
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.secrets {
		for _, o := range h.outputs {
			require.NotContains(t, o, s, "hidden bytes reached the agent")
		}
	}
	for _, s := range h.never {
		for _, o := range h.outputs {
			require.NotContains(t, o, s, "an output holds bytes the case forbids")
		}
	}
	for _, s := range h.quiet {
		h.requireNothingStarted(s)
	}
}

func (h *harness) saw(outs ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outputs = append(h.outputs, outs...)
}

// --- the repository ---

// repoFrom builds the case's repository from the base tree, tree (the
// case's own, in the cases' notation) and extra (entries a test adds), and
// plants and records the secrets. It returns the repository.
func (h *harness) repoFrom(tree, extra map[string]string) string {
	t := h.t
	t.Helper()
	merged := map[string]string{}
	for k, v := range baseTree {
		merged[k] = v
	}
	for _, add := range []map[string]string{tree, extra} {
		for k, v := range add {
			for b := range merged {
				if b == k || strings.HasPrefix(b, k+"/") || strings.HasPrefix(k, b+"/") {
					delete(merged, b)
				}
			}
			merged[k] = v
		}
	}
	files := map[string]string{}
	var placeholders []string
	for k, v := range merged {
		switch {
		case v == "(absent)":
			continue
		case strings.HasPrefix(v, "-> "):
			target := strings.TrimPrefix(v, "-> ")
			if body, ok := strings.CutSuffix(target, " (page mode)"); ok {
				target, h.page = body, k
			}
			files[k] = "-> " + target
		case strings.HasPrefix(v, "file: "):
			files[k] = strings.TrimPrefix(v, "file: ")
		case strings.HasSuffix(k, "/"):
			files[k] = ""
		case v == "" || v == "S" || v == "SECRET":
			placeholders = append(placeholders, k)
			files[k] = v
		default:
			files[k] = v
		}
	}
	sort.Strings(placeholders)
	for _, k := range placeholders {
		hs := fnv.New32a()
		hs.Write([]byte(h.c.ID + "/" + k))
		files[k] = fmt.Sprintf("%s%s-%08x\n", secretMarker, h.c.ID, hs.Sum32())
	}
	h.tree = files
	h.repo = newRepoIn(t, h.repos, files)
	// Scripts planted in the repository are executable, so that a noexec
	// mount, not a missing bit, is what stops them.
	for k, v := range files {
		if strings.HasPrefix(v, "#!") {
			require.NoError(t, os.Chmod(filepath.Join(h.repo, k), 0o755))
		}
	}
	h.classify()
	h.snap = testutil.Snapshot(t, h.repo)
	// Registered after the repository's TempDir and before any session:
	// runs once the sessions are closed and before the tree is removed.
	repo := h.repo
	t.Cleanup(func() {
		require.Equal(t, h.snap, testutil.Snapshot(t, repo), "the repository changed")
	})
	return h.repo
}

// classify asks the oracle which tree files are hidden and records the
// bytes of each as a secret.
func (h *harness) classify() {
	o := newOracle(h.t, h.repo, docsProfile(h.t).HideLists())
	for p, content := range h.tree {
		if strings.HasPrefix(content, "-> ") || strings.HasSuffix(p, "/") {
			continue
		}
		if o.hidden(p) {
			h.hidden[p] = true
			if len(content) >= 8 {
				h.secrets = append(h.secrets, content)
			}
			continue
		}
		h.visible[p] = true
	}
	h.oracle = o
}

// --- the oracle ---

// oracle answers "is this path hidden" from git itself where git has an
// answer, never from corral's walk: git check-ignore --no-index over a
// mirror of the repository whose .openwikiignore files are named
// .gitignore, and, with the gitignore list, over a second mirror holding
// the repository's own .gitignore files (each rule set on its own: a
// negation in one never re-includes what the other hides). The built-in
// name lists are asked of the name table (names.Hidden, folded, at any
// depth); .git at any depth and openwiki/.claims by definition; a
// symlink whose target leaves the repository by resolving it with
// filepath.EvalSymlinks (lexically when it dangles).
type oracle struct {
	t                   *testing.T
	repo                string
	lists               []names.List
	ignores, gitignores string
	home                string
	cache               map[string]bool
}

func newOracle(t *testing.T, repo string, lists []names.List) *oracle {
	t.Helper()
	o := &oracle{t: t, repo: repo, lists: lists, ignores: t.TempDir(), home: t.TempDir(), cache: map[string]bool{}}
	mirrors := []string{o.ignores}
	if slices.Contains(lists, names.Gitignore) {
		o.gitignores = t.TempDir()
		mirrors = append(mirrors, o.gitignores)
	}
	for _, dst := range mirrors {
		// keep is the ignore file whose content this mirror keeps, as
		// .gitignore.
		keep := hidden.DefaultIgnoreFileName
		if dst == o.gitignores {
			keep = ".gitignore"
		}
		err := filepath.Walk(repo, func(p string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(repo, p)
			if rel == "." {
				return nil
			}
			if isGitOrClaims(filepath.ToSlash(rel)) {
				if info.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			out := filepath.Join(dst, rel)
			switch {
			case info.Mode()&os.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				return os.Symlink(target, out)
			case info.IsDir():
				return os.Mkdir(out, 0o755)
			case info.Name() == keep && info.Mode().IsRegular():
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				return os.WriteFile(filepath.Join(filepath.Dir(out), ".gitignore"), data, 0o644)
			case info.Name() == ".gitignore" && keep != ".gitignore":
				// Replaced by keep's content, whichever comes first.
				if _, err := os.Lstat(out); err == nil {
					return nil
				}
				return os.WriteFile(out, nil, 0o644)
			default:
				return os.WriteFile(out, nil, 0o644)
			}
		})
		require.NoError(t, err)
		o.git(dst, "init", "-q")
	}
	return o
}

func (o *oracle) git(dir string, args ...string) (int, string) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + o.home, "XDG_CONFIG_HOME=" + o.home, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	require.NoError(o.t, err, string(out))
	return 0, string(out)
}

// isGitOrClaims: a component that folds onto .git, or openwiki/.claims
// (folded), hidden whatever the profile.
func isGitOrClaims(p string) bool {
	if _, hidden := names.Hidden(p, true); hidden {
		return true
	}
	c := strings.Split(p, "/")
	return len(c) >= 2 && names.Fold(c[0]) == "openwiki" && names.Fold(c[1]) == ".claims"
}

// hidden reports whether p or an ancestor is hidden.
func (o *oracle) hidden(p string) bool {
	if v, ok := o.cache[p]; ok {
		return v
	}
	v := o.ask(p)
	o.cache[p] = v
	return v
}

func (o *oracle) ask(p string) bool {
	if isGitOrClaims(p) {
		return true
	}
	if q := path.Dir(p); q != "." && o.hidden(q) {
		return true
	}
	fi, err := os.Lstat(filepath.Join(o.repo, p))
	isDir := err == nil && (fi.IsDir() || fi.Mode()&os.ModeSymlink != 0)
	if _, hidden := names.Hidden(p, isDir, o.lists...); hidden {
		return true
	}
	if err == nil && fi.Mode()&os.ModeSymlink != 0 && o.leaves(p) {
		return true
	}
	for _, dir := range []string{o.ignores, o.gitignores} {
		if dir == "" {
			continue
		}
		code, out := o.git(dir, "check-ignore", "--no-index", "-q", "--", p)
		switch code {
		case 0:
			return true
		case 1:
		default:
			o.t.Fatalf("git check-ignore %s: exit %d: %s", p, code, out)
		}
	}
	return false
}

// leaves reports whether the symlink p resolves outside the repository.
func (o *oracle) leaves(p string) bool {
	root, err := filepath.EvalSymlinks(o.repo)
	require.NoError(o.t, err)
	full := filepath.Join(o.repo, p)
	if r, err := filepath.EvalSymlinks(full); err == nil {
		return r != root && !strings.HasPrefix(r, root+"/")
	}
	target, err := os.Readlink(full)
	require.NoError(o.t, err)
	lexical := path.Join(path.Dir(p), target)
	return path.IsAbs(target) || lexical == ".." || strings.HasPrefix(lexical, "../")
}

// --- sessions ---

func withProfile(p *profiles.Profile) sessOpt {
	return func(c *sandbox.SessionConfig) { c.Profile = p }
}

// gitProfile is the opt-in profile that adds git to the default commands
// (what an operator would write knowingly: history exposes hidden files).
func gitProfile(t *testing.T) *profiles.Profile {
	t.Helper()
	d := docsProfile(t)
	p, err := profiles.Parse([]byte(fmt.Sprintf("name: docs-git\ndescription: docs plus git; git history shows every committed file, hidden ones included\ncommands: [%s, git]\n",
		strings.Join(d.Commands, ", "))))
	require.NoError(t, err)
	return p
}

// session opens a session over the case's repository that lives as long
// as the case.
func (h *harness) session(opts ...sessOpt) *sandbox.Session {
	h.t.Helper()
	return newSessionOn(h.root, h.e, h.repo, opts...)
}

// quietSession opens a session that must never start a container: every
// call made through it is refused. Checked after each refusal and when
// the case ends.
func (h *harness) quietSession(opts ...sessOpt) *sandbox.Session {
	h.t.Helper()
	s := h.session(opts...)
	h.quiet = append(h.quiet, s)
	return s
}

// shared returns the case's session named key, opening it on first use
// (quiet: one that must never start a container).
func (h *harness) shared(key string, quiet bool, opts ...sessOpt) *sandbox.Session {
	h.t.Helper()
	if s := h.sessions[key]; s != nil {
		return s
	}
	var s *sandbox.Session
	if quiet {
		s = h.quietSession(opts...)
	} else {
		s = h.session(opts...)
	}
	h.sessions[key] = s
	return s
}

// requireNothingStarted: no container, no task, no host mounts for s.
func (h *harness) requireNothingStarted(s *sandbox.Session) {
	t := h.t
	t.Helper()
	ctx := h.e.Context(context.Background())
	cs, err := h.e.Client().Containers(ctx, fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, s.ID))
	require.NoError(t, err)
	require.Empty(t, cs, "session %s has containers", s.ID)
	require.Zero(t, h.w.count(s.ID, "create"), "a container was created for session %s", s.ID)
	require.Zero(t, h.w.count(s.ID, "start"), "a task was started for session %s", s.ID)
	_, err = os.Stat(filepath.Join(testutil.StateDir(t), "sessions", s.ID))
	require.True(t, errors.Is(err, os.ErrNotExist), "session %s made host mounts", s.ID)
}

// --- calls ---

// argvs checks each input.argv against want (one outcome each, in order)
// under the default profile. With git set, an argv that names git must
// also be refused as a command by the default profile, and want is what
// the opt-in git profile gives.
func (h *harness) argvs(git bool, want []outcome) {
	require.Len(h.t, want, len(h.c.Input.Argv), "one outcome per input.argv")
	for i, argv := range h.c.Input.Argv {
		h.run(fmt.Sprintf("argv%d", i), func(h *harness) {
			key, opts := "docs", []sessOpt(nil)
			if git && argv[0] == "git" {
				h.refused(h.shared("quiet-docs", true), argv, outcome{word: refuseCmd, kind: allowlist.KindCmd, rule: "git is not on the allowlist"})
				key, opts = profileSession(h.t, "git")
			}
			h.invoke(key, opts, argv, want[i])
		})
	}
}

// invoke gives argv to the case's session of profile key and checks want:
// a refusal through a session that never starts a container, a run
// through one that starts exactly one task for it. Every refusal of an
// option "--name" is tried again with each abbreviation getopt accepts.
func (h *harness) invoke(key string, opts []sessOpt, argv []string, want outcome) {
	t := h.t
	t.Helper()
	switch want.word {
	case runs, literal:
		r := h.ran(h.shared("run-"+key, false, opts...), argv)
		if want.word == literal {
			h.requireLiteral(argv, r)
		}
		h.checkResult(argv, r, want.result)
		return
	case permits:
		d, err := h.shared("quiet-"+key, true, opts...).Check(argv)
		require.NoError(t, err, "argv %q", clipArgv(argv))
		h.checkResult(argv, &sandbox.Result{Argv: d.Argv}, want.result)
		return
	}
	require.True(t, want.refuses(), "%s is no outcome of a call", want.word)
	q := h.shared("quiet-"+key, true, opts...)
	if want.anyIndex {
		r := h.refusedAny(q, argv)
		require.Equal(t, want.kind, r.Kind, "argv %q: %v", clipArgv(argv), r)
		return
	}
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
		require.Equal(t, allowlist.KindArg, r.Kind, "%q", v)
		require.Equal(t, want.index, r.Index, "%q: %v", v, r)
	}
}

// checkResult checks r, the result of argv (nil for an in_box step),
// against want.
func (h *harness) checkResult(argv []string, r *sandbox.Result, want resultWant) {
	t := h.t
	t.Helper()
	stdout, stderr := string(r.Stdout), string(r.Stderr)
	if want.Exit != nil {
		require.Equal(t, *want.Exit, r.ExitCode, "%q: %s%s", clipArgv(argv), stdout, stderr)
	}
	if want.ExitNot != nil {
		require.NotEqual(t, *want.ExitNot, r.ExitCode, "%q: %s%s", clipArgv(argv), stdout, stderr)
	}
	if len(want.ExitIn) > 0 {
		require.Contains(t, want.ExitIn, r.ExitCode, "%q: %s", clipArgv(argv), stderr)
	}
	if want.Stdout != nil {
		require.Equal(t, *want.Stdout, stdout, "%q: %s", clipArgv(argv), stderr)
	}
	if len(want.StdoutFiles) > 0 {
		content := ""
		for _, f := range want.StdoutFiles {
			require.Contains(t, h.tree, f, "stdout_files names a file of the tree")
			content += h.tree[f]
		}
		require.Equal(t, content, stdout, "%q: %s", clipArgv(argv), stderr)
	}
	for _, l := range want.StdoutLines {
		require.Contains(t, lines(stdout), l)
	}
	if want.Stderr != "" {
		require.Regexp(t, want.Stderr, stderr)
	}
	if len(want.Argv) > 0 {
		require.Equal(t, want.Argv, r.Argv)
	}
	if n := len(want.ArgvPrefix); n > 0 {
		require.GreaterOrEqual(t, len(r.Argv), n, "%q", r.Argv)
		require.Equal(t, want.ArgvPrefix, r.Argv[:n])
	}
	if n := len(want.ArgvSuffix); n > 0 {
		require.GreaterOrEqual(t, len(r.Argv), n, "%q", r.Argv)
		require.Equal(t, want.ArgvSuffix, r.Argv[len(r.Argv)-n:])
	}
	for _, a := range want.ArgvHas {
		require.Contains(t, r.Argv, a)
	}
	for _, m := range want.Missing {
		requireMissing(t, stderr, m)
	}
	if want.NoHiddenNames {
		h.noHiddenNames(stdout)
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

var shellMeta = regexp.MustCompile("[;|&$`<>()*?!\"'\\\\]")

// requireLiteral: the program that ran is argv[0] itself, every token with
// a shell metacharacter reached it unchanged, and nothing a shell would
// have run (id) printed anything.
func (h *harness) requireLiteral(argv []string, r *sandbox.Result) {
	t := h.t
	t.Helper()
	require.Equal(t, argv[0], r.Argv[0], "the program that ran")
	for _, a := range argv[1:] {
		if shellMeta.MatchString(a) {
			require.Contains(t, r.Argv, a, "token %q did not reach the program as given", a)
		}
	}
	for _, o := range []string{string(r.Stdout), string(r.Stderr)} {
		require.NotContains(t, o, "uid=", "a shell ran id")
	}
}

// refused calls s.Exec with argv and requires the refusal want: its kind,
// argv index and rule, naming the offending token; no container started.
func (h *harness) refused(s *sandbox.Session, argv []string, want outcome) *allowlist.Refusal {
	t := h.t
	t.Helper()
	res, err := s.Exec(context.Background(), argv, nil, nil)
	require.Nil(t, res, "argv %q ran", clipArgv(argv))
	var r *allowlist.Refusal
	require.True(t, errors.As(err, &r), "argv %q: want a refusal, got %v", clipArgv(argv), err)
	require.True(t, errdefs.IsPermissionDenied(err), "argv %q: %v", clipArgv(argv), err)
	require.Equal(t, want.kind, r.Kind, "argv %q: %v", clipArgv(argv), err)
	require.Equal(t, want.index, r.Index, "argv %q: %v", clipArgv(argv), err)
	requireRule(t, r.Rule, want.rule)
	if r.Index >= 0 && r.Index < len(argv) && len(argv[r.Index]) < 256 {
		require.Equal(t, argv[r.Index], r.Token, "the refusal names the token")
		require.Contains(t, err.Error(), fmt.Sprintf("argv[%d]", r.Index))
	}
	h.saw(err.Error())
	h.requireNothingStarted(s)
	return r
}

// refusedPath requires a host-side file-tool refusal (CheckRead or
// CheckWrite) naming rule.
func (h *harness) refusedPath(err error, p, rule string) {
	t := h.t
	t.Helper()
	var r *allowlist.Refusal
	require.True(t, errors.As(err, &r), "%q: want a refusal, got %v", p, err)
	require.Equal(t, allowlist.KindPath, r.Kind, "%q: %v", p, err)
	require.True(t, errdefs.IsPermissionDenied(err))
	requireRule(t, r.Rule, rule)
	h.saw(err.Error())
}

// ran calls s.Exec with argv: permitted, exactly one container ran it
// (one task exit: a container made ahead was started before the call on
// runc and crun, so a start is no call).
func (h *harness) ran(s *sandbox.Session, argv []string) *sandbox.Result {
	t := h.t
	t.Helper()
	// Every earlier exit of the session has been seen; then this call
	// adds exactly one more.
	h.w.waitCount(t, s.ID, "exit", h.starts[s.ID])
	res, err := s.Exec(context.Background(), argv, nil, nil)
	require.NoError(t, err, "argv %q", clipArgv(argv))
	h.starts[s.ID]++
	h.saw(string(res.Stdout), string(res.Stderr))
	h.w.waitCount(t, s.ID, "exit", h.starts[s.ID])
	return res
}

// box runs argv in the container without the policy (the kernel side).
func (h *harness) box(s *sandbox.Session, argv ...string) *sandbox.Result {
	h.t.Helper()
	r := inBox(h.t, s, argv...)
	h.starts[s.ID]++
	h.saw(string(r.Stdout), string(r.Stderr))
	return r
}

// shPrelude makes the busybox applets the tools image lacks callable by
// their names in the in_box scripts (busybox sh, test image only).
var shPrelude = `for a in ` + strings.Join(busyboxApplets, " ") + `; do eval "$a() { busybox $a \"\$@\"; }"; done; `

// busyboxApplets are the commands the in-box steps use that the tools
// image has only as busybox applets.
var busyboxApplets = []string{"ln", "mkfifo", "truncate", "yes", "du", "unshare", "mount", "id", "mknod", "nc", "seq"}

// boxSh runs a busybox sh script in the container (test image only).
func (h *harness) boxSh(s *sandbox.Session, script string) *sandbox.Result {
	h.t.Helper()
	return h.box(s, "busybox", "sh", "-c", shPrelude+script)
}

// requireAbsent: opening each of ps in the box fails with ENOENT, exactly
// as for a name that never existed in the same directory (one container
// for all).
func (h *harness) requireAbsent(s *sandbox.Session, ps ...string) {
	t := h.t
	t.Helper()
	if len(ps) == 0 {
		return
	}
	argv := []string{"probe", "open-each"}
	for _, p := range ps {
		argv = append(argv, p, path.Join(path.Dir(p), "corral-never-existed"))
	}
	r := h.box(s, argv...)
	got := lines(out(r))
	require.Len(t, got, len(argv)-2, string(r.Stderr))
	for i, l := range got {
		require.Equal(t, argv[2+i]+"\tENOENT", l, "a hidden path answers differently from an absent name")
	}
}

// requireViolations: the change set is rejected, listing at least each
// path in want with its reason (a substring).
func (h *harness) requireViolations(cs *changeset.Set, want map[string]string) {
	t := h.t
	t.Helper()
	err := cs.Err()
	require.Error(t, err, "the change set was not rejected")
	var rej *changeset.RejectedError
	require.True(t, errors.As(err, &rej))
	require.True(t, errdefs.IsPermissionDenied(err))
	for p, reason := range want {
		found := slices.ContainsFunc(rej.Violations, func(v changeset.Problem) bool {
			return v.Path == p && strings.Contains(v.Reason, reason)
		})
		require.True(t, found, "no violation %s: %s in %v", p, reason, rej.Violations)
		require.Contains(t, err.Error(), p)
	}
	_, perr := changeset.Patch(cs)
	require.Error(t, perr, "a rejected set rendered a patch")
}

// requireRule: the refusal's rule contains want, or one of want's
// "|"-separated alternatives.
func requireRule(t *testing.T, rule, want string) {
	t.Helper()
	for _, alt := range strings.Split(want, "|") {
		if strings.Contains(rule, alt) {
			return
		}
	}
	t.Fatalf("refusal rule %q does not name %q", rule, want)
}

// requireMissing: stderr reports name (as given, or quoted) as not found.
func requireMissing(t *testing.T, stderr, name string) {
	t.Helper()
	require.Regexp(t, `(^|[\s'"])`+regexp.QuoteMeta(name)+`['"]?:.*No such file or directory`, stderr)
}

func summary(cs *changeset.Set) []string {
	var out []string
	for _, c := range cs.Changes {
		out = append(out, string(c.Kind)+" "+c.Path)
	}
	return out
}

func clipArgv(argv []string) []string {
	out := make([]string, 0, min(len(argv), 12))
	for i, a := range argv {
		if i == 12 {
			out = append(out, fmt.Sprintf("… %d more", len(argv)-12))
			break
		}
		if len(a) > 64 {
			a = a[:64] + "…"
		}
		out = append(out, a)
	}
	return out
}

// --- host environment ---

// setHostEnv puts vars into the supervisor's own environment (where API
// keys live), each value made unique and recorded as a secret.
func (h *harness) setHostEnv(vars map[string]string) {
	for k, v := range vars {
		val := v + "-" + secretMarker + "env-" + k
		h.t.Setenv(k, val)
		h.secrets = append(h.secrets, val)
	}
}

// requireFixedEnv: the container's environment is exactly the profile's
// fixed one, whatever the supervisor's holds.
func (h *harness) requireFixedEnv(s *sandbox.Session, names ...string) {
	t := h.t
	t.Helper()
	// The tool's own environment (a direct call: a shell would add PWD).
	require.ElementsMatch(t, profiles.Env, lines(out(h.box(s, "probe", "env"))))
	// The tool's own /proc/self/environ, read by the tool itself (its
	// children's /proc/self is not under its Landlock rules).
	r := h.box(s, "probe", "read", "/proc/self/environ")
	require.Equal(t, 0, r.ExitCode, out(r))
	require.Contains(t, out(r), "PATH=")
	// Whole entries: GIT_PAGER=cat is fixed, PAGER= is not.
	for _, entry := range strings.Split(out(r), "\x00") {
		for _, n := range names {
			if strings.HasPrefix(entry, n+"=") {
				require.Contains(t, profiles.Env, entry, "%s reached the container", n)
			}
		}
	}
	// PID 1's (corral-init's) is refused by Landlock; under a runtime
	// without Landlock (runsc: gVisor's own /proc) it is exactly the fixed
	// entries, in the order that runtime keeps them (gVisor's differs).
	h.kernelSteps(s, []kernelStep{{what: "/proc/1/environ", argv: []string{"probe", "read", "/proc/1/environ"}, check: func(t *testing.T, out string, rc int) {
		if out != "EACCES\n" {
			require.True(t, strings.HasSuffix(out, "\x00"), "%q", out)
			require.ElementsMatch(t, profiles.Env, strings.Split(strings.TrimSuffix(out, "\x00"), "\x00"))
		}
	}}})
}

// --- the view ---

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
		h.refused(q, []string{"cat", p}, outcome{word: refusePath, kind: allowlist.KindPath, index: 1})
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
		if strings.Contains(r.Rule, "profile hides") || strings.HasPrefix(r.Rule, "built-in secrets list") {
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

// ops runs input.ops, one opWant each, in order: the policy side of each
// op as a subtest, then the kernel side of all of them in one container
// per session (in the same order), then, for an op that asks for it, a
// second invocation that must see the same view.
func (h *harness) ops(want []opWant) {
	ops := parseOps(h.t, h.c.Input.Ops)
	require.Len(h.t, want, len(ops), "one outcome per input.ops")
	for i, o := range ops {
		h.run(fmt.Sprintf("op%d", i), func(h *harness) { h.opPolicy(o, want[i].Policy) })
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
		var steps []kernelStep
		var again []op
		for _, i := range byKey[k] {
			if ops[i].again {
				again = append(again, ops[i])
			}
			if st, ok := h.opKernel(ops[i], want[i].Kernel); ok {
				steps = append(steps, st)
			}
		}
		if len(steps) == 0 && len(again) == 0 {
			continue
		}
		s := h.shared("run-"+k, false, ops[byKey[k][0]].sessionOpts()...)
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
		switch {
		case want.word == permits:
			require.NoError(t, err, o.raw)
			clean, cerr := allowlist.CleanPath(o.path)
			require.NoError(t, cerr)
			require.Equal(t, clean, got, "%s: the canonical path", o.raw)
		case want.word == either:
			if err != nil {
				h.refusedPath(err, o.path, "")
			}
		case want.kind == allowlist.KindPath && !want.anyIndex:
			require.Equal(t, -1, want.index, "%s: a file tool's path has no argv index", o.raw)
			h.refusedPath(err, o.path, want.rule)
		default:
			t.Fatalf("%s: %s is no outcome of a file tool", o.raw, want.word)
		}
	case "start":
		// A session opens without reading any repository file for policy:
		// the operator's commands, and nothing started.
		require.Equal(t, starts, want.word, o.raw)
		h.requireNothingStarted(q)
		require.Equal(t, docsProfile(t).Commands, q.Profile.Commands)
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
		h.invoke(o.sessionKey(), o.sessionOpts(), o.argv, want)
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

// requireWriteAreaIsTmpfs: the session's write area is a size-limited
// tmpfs, so a bomb fills it and not the host's disk.
func (h *harness) requireWriteAreaIsTmpfs(s *sandbox.Session) {
	t := h.t
	t.Helper()
	area := filepath.Join(testutil.StateDir(t), "sessions", s.ID, "layout", "area") // every session's mounts are under layout/
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

// --- inputs written in words ---

func repeat[T any](n int, v T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// argvGenerators build the argv_generated inputs, by their words.
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

// trailingComment is a "(comment)" ending an in_box step written as a
// shell command.
var trailingComment = regexp.MustCompile(`\s+\([^()]*\)$`)

// --- containerd events ---

// taskWatcher records the containers created and the tasks started and
// exited in the test namespace, by session id, from containerd's own
// events.
type taskWatcher struct {
	mu     sync.Mutex
	counts map[string]int // "<session> <create|start|exit>"
}

var containerID = regexp.MustCompile(`^corral-([0-9a-f]+)-[0-9]+$`)

func watchTasks(t *testing.T, e *sandbox.Executor) *taskWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(e.Context(context.Background()))
	t.Cleanup(cancel)
	ns := testutil.Namespace
	ch, errs := e.Client().Subscribe(ctx,
		fmt.Sprintf(`topic=="/tasks/start",namespace==%q`, ns),
		fmt.Sprintf(`topic=="/tasks/exit",namespace==%q`, ns),
		fmt.Sprintf(`topic=="/containers/create",namespace==%q`, ns))
	w := &taskWatcher{counts: map[string]int{}}
	go func() {
		for {
			select {
			case env := <-ch:
				if env == nil || env.Event == nil {
					continue
				}
				v, err := typeurl.UnmarshalAny(env.Event)
				if err != nil {
					continue
				}
				switch ev := v.(type) {
				case *apievents.TaskStart:
					w.add(ev.ContainerID, "start")
				case *apievents.TaskExit:
					w.add(ev.ContainerID, "exit")
				case *apievents.ContainerCreate:
					w.add(ev.ID, "create")
				}
			case <-errs:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return w
}

func (w *taskWatcher) add(id, what string) {
	m := containerID.FindStringSubmatch(id)
	if m == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[m[1]+" "+what]++
}

func (w *taskWatcher) count(session, what string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[session+" "+what]
}

// waitCount waits for the event count to reach n and requires it to be
// exactly n.
func (w *taskWatcher) waitCount(t *testing.T, session, what string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for w.count(session, what) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, n, w.count(session, what), "%s events of session %s", what, session)
}
