package integration

// TestCases runs every hostile case of testdata/cases.json (a verbatim
// copy of the shared cases) against a real containerd: TestCases/<id>.
// The inputs come from the cases, the expected outcomes from
// testdata/expect.yaml (keyed by case id; its header is the vocabulary),
// and this file is the one interpreter of both, in the spirit of go-git's
// gitignore conformance table. The harness (cases_harness_test.go) checks
// after every case that nothing hidden reached any output, that the
// repository is byte-identical and that no refusal started a container;
// the checks the table cannot state are Go, in cases_custom_test.go.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/review"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"
)

// TestCases runs the table under each runtime: TestCases/<runtime>/<id>.
func TestCases(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) { runCases(t, casesConfig{Runtime: rt.name}) })
}

// TestCaseTable checks the table against the cases without containerd:
// one entry per case, one outcome per input, under every runtime's
// overrides.
func TestCaseTable(t *testing.T) {
	cases := loadCases(t)
	loadExpectations(t, cases, "")
	for _, r := range sandbox.Runtimes() {
		loadExpectations(t, cases, r.Name)
	}
}

// casesConfig is the executor configuration the table runs under; the
// zero value is an executor in this process on containerd's default
// runtime.
type casesConfig struct {
	// Runtime is the runtime the executor uses, a name of
	// sandbox.Runtimes; "" means sandbox.DefaultRuntime. Its overrides of
	// testdata/expect.yaml apply.
	Runtime string
	// Daemon is the socket of a corral daemon the calls go through instead
	// of an executor in this process; "" means in process. Through a
	// daemon only the cases' calls run (daemon_cases_test.go).
	Daemon string
	// Volume, with Daemon, runs the table as an agent Pod against its
	// node's daemon in Pod mode: each repository is a directory of this
	// Pod's volume and each session names it ({volume, subPath}); nil
	// means repositories in temporary directories named by path.
	Volume *caseVolume
}

// caseVolume is a volume of the Pod the table runs in.
type caseVolume struct {
	// Name is the volume's name in the Pod's spec.
	Name string
	// Dir is where it is mounted in the test's container.
	Dir string
}

func (c casesConfig) executor(t *testing.T) *sandbox.Executor {
	t.Helper()
	name := c.Runtime
	if name == "" {
		name = sandbox.DefaultRuntime
	}
	return testRuntime{name: name}.executor(t)
}

// runCases runs the whole table under cfg, one subtest per case id.
func runCases(t *testing.T, cfg casesConfig) {
	cases := loadCases(t)
	table := loadExpectations(t, cases, cfg.Runtime)
	if cfg.Daemon != "" {
		runCasesThroughDaemon(t, cfg, cases, table)
		return
	}
	e := cfg.executor(t)
	w := watchTasks(t, e)
	for _, c := range cases {
		x := table[c.ID]
		if x.Elsewhere != "" {
			continue
		}
		t.Run(c.ID, func(t *testing.T) { newHarness(t, c, w, e).expect(x) })
	}
}

// --- the table ---

// expectation is one case's entry of testdata/expect.yaml; the file's
// header says what each field means.
type expectation struct {
	Elsewhere   string            `yaml:"elsewhere"`
	Repo        map[string]string `yaml:"repo"`
	Hidden      []string          `yaml:"hidden"`
	Visible     []string          `yaml:"visible"`
	NeverOutput []string          `yaml:"never_output"`
	Env         *envWant          `yaml:"env"`
	Start       *startWant        `yaml:"start"`
	Ignore      string            `yaml:"ignore"`

	GitProfile    bool         `yaml:"git_profile"`
	Argv          []outcome    `yaml:"argv"`
	Control       *outcome     `yaml:"control"`
	ArgvGenerated []outcome    `yaml:"argv_generated"`
	Requests      []outcome    `yaml:"requests"`
	Also          []invocation `yaml:"also"`
	Ops           []opWant     `yaml:"ops"`

	Scripts             map[string]string `yaml:"scripts"`
	InBox               []stepWant        `yaml:"in_box"`
	FreshSessionPerStep bool              `yaml:"fresh_session_per_step"`
	WriteAreaTmpfs      bool              `yaml:"write_area_tmpfs"`

	Box        []boxWant     `yaml:"box"`
	Noexec     []string      `yaml:"noexec"`
	Network    string        `yaml:"network"`
	Syscalls   *syscallsWant `yaml:"syscalls"`
	ArgvInBox  *argvInBox    `yaml:"argv_in_box"`
	HiddenTree bool          `yaml:"hidden_tree"`

	Changes map[string]changesWant `yaml:"changes"`
	Custom  string                 `yaml:"custom"`
}

// The outcome words.
const (
	refuseCmd  = "REFUSE/CMD"
	refuseArg  = "REFUSE/ARG"
	refusePath = "REFUSE/PATH"
	permits    = "PERMITS"
	runs       = "RUNS"
	literal    = "LITERAL"
	either     = "EITHER"
	starts     = "STARTS"
)

// outcome is what one invocation must give: written "REFUSE/ARG 2 rule"
// (or a bare word) or {RUNS: {checks}}.
type outcome struct {
	word     string
	kind     allowlist.Kind // of a refusal
	index    int
	anyIndex bool // a bare REFUSE/ARG or REFUSE/PATH
	rule     string
	result   resultWant
}

func (o outcome) refuses() bool { return o.kind != "" }

func (o *outcome) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		return o.parse(n.Value)
	case yaml.MappingNode:
		if len(n.Content) != 2 {
			return fmt.Errorf("line %d: an outcome is one word", n.Line)
		}
		o.word = n.Content[0].Value
		if !slices.Contains([]string{permits, runs, literal}, o.word) {
			return fmt.Errorf("line %d: %q takes no checks", n.Line, o.word)
		}
		if err := knownKeys(n.Content[1], resultWant{}); err != nil {
			return err
		}
		return n.Content[1].Decode(&o.result)
	}
	return fmt.Errorf("line %d: not an outcome", n.Line)
}

func (o *outcome) parse(s string) error {
	word, rest, _ := strings.Cut(s, " ")
	o.word = word
	switch word {
	case permits, runs, literal, either, starts:
		if rest != "" {
			return fmt.Errorf("%q: %s takes no rule", s, word)
		}
	case refuseCmd:
		o.kind, o.rule = allowlist.KindCmd, rest
	case refuseArg, refusePath:
		o.kind = allowlist.Kind(strings.TrimPrefix(word, "REFUSE/"))
		if rest == "" {
			o.anyIndex = true
			return nil
		}
		idx, rule, _ := strings.Cut(rest, " ")
		i, err := strconv.Atoi(idx)
		if err != nil {
			return fmt.Errorf("%q: %s <index> <rule>: %w", s, word, err)
		}
		o.index, o.rule = i, rule
	default:
		return fmt.Errorf("%q: unknown outcome", s)
	}
	return nil
}

// knownKeys fails on a key of mapping n that is no yaml field of v's
// type (the strict decoder does not reach into UnmarshalYAML).
func knownKeys(n *yaml.Node, v any) error {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping of checks", n.Line)
	}
	known := map[string]bool{}
	rt := reflect.TypeOf(v)
	for i := 0; i < rt.NumField(); i++ {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("yaml"), ",")
		known[name] = true
	}
	for i := 0; i < len(n.Content); i += 2 {
		if k := n.Content[i]; !known[k.Value] {
			return fmt.Errorf("line %d: unknown check %q", k.Line, k.Value)
		}
	}
	return nil
}

// resultWant are the checks of a call that ran (for PERMITS, of the argv
// the policy gives).
type resultWant struct {
	Exit          *int     `yaml:"exit"`
	ExitNot       *int     `yaml:"exit_not"`
	ExitIn        []int    `yaml:"exit_in"`
	Stdout        *string  `yaml:"stdout"`
	StdoutFiles   []string `yaml:"stdout_files"`
	StdoutLines   []string `yaml:"stdout_lines"`
	Stderr        string   `yaml:"stderr"`
	Argv          []string `yaml:"argv"`
	ArgvPrefix    []string `yaml:"argv_prefix"`
	ArgvSuffix    []string `yaml:"argv_suffix"`
	ArgvHas       []string `yaml:"argv_has"`
	Missing       []string `yaml:"missing"`
	NoHiddenNames bool     `yaml:"no_hidden_names"`
}

// onlyArgv reports whether w checks nothing but the argv.
func (w resultWant) onlyArgv() bool {
	w.Argv, w.ArgvPrefix, w.ArgvSuffix, w.ArgvHas = nil, nil, nil, nil
	return reflect.ValueOf(w).IsZero()
}

type invocation struct {
	Argv    []string `yaml:"argv"`
	Profile string   `yaml:"profile"` // "" (the default) or "git"
	Want    outcome  `yaml:"want"`
}

type opWant struct {
	Policy outcome `yaml:"policy"`
	Kernel string  `yaml:"kernel"`
}

type stepWant struct {
	resultWant `yaml:",inline"`
	Full       bool              `yaml:"full"`
	Rejected   map[string]string `yaml:"rejected"`
	Policy     *outcome          `yaml:"policy"`
}

type boxWant struct {
	Argv  []string `yaml:"argv"`
	Out   *string  `yaml:"out"`
	Lines []string `yaml:"lines"`
}

type syscallsWant struct {
	Errno string `yaml:"errno"`
	RunAs map[string]struct {
		Probes  []string `yaml:"probes"`
		Busybox string   `yaml:"busybox"`
	} `yaml:"run_as"`
}

type argvInBox struct {
	NoHiddenNames bool `yaml:"no_hidden_names"`
}

type envWant struct {
	Host  map[string]string `yaml:"host"`
	Never []string          `yaml:"never"`
}

type startWant struct {
	Refuse string     `yaml:"refuse"`
	Modes  [][]string `yaml:"modes"`
}

type changesWant struct {
	Summary            *[]string         `yaml:"summary"`
	NotInSummary       []string          `yaml:"not_in_summary"`
	Rejected           map[string]string `yaml:"rejected"`
	RejectedOrHighRisk []string          `yaml:"rejected_or_high_risk"`
	GitApply           bool              `yaml:"git_apply"`
}

// loadExpectations reads testdata/expect.yaml strictly, applies the
// overrides of runtime (each case's "runtimes" entry; "" applies none)
// and requires the result to agree with the cases.
func loadExpectations(t *testing.T, cases []hostileCase, runtime string) map[string]*expectation {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "expect.yaml"))
	require.NoError(t, err)
	data, err = applyRuntime(data, runtime)
	require.NoError(t, err, "testdata/expect.yaml")
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	table := map[string]*expectation{}
	require.NoError(t, dec.Decode(&table), "testdata/expect.yaml (runtime %q)", runtime)
	require.NoError(t, checkTable(cases, table), "testdata/expect.yaml (runtime %q)", runtime)
	return table
}

// applyRuntime returns the table with each case's "runtimes" entry
// resolved for runtime: the entry {<runtime>: {field: value, ...}}
// replaces those top-level fields of the case as a whole (what the
// runtime enforces instead: docs/runtimes.md), and the entry itself goes.
// A runtime the entry names must be one of sandbox.Runtimes.
func applyRuntime(data []byte, runtime string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("want a mapping of case ids")
	}
	known := map[string]bool{}
	for _, r := range sandbox.Runtimes() {
		known[r.Name] = true
	}
	// Each case gets its own nodes, so that an override never reaches a
	// case through a shared anchor.
	top := expandAliases(doc.Content[0])
	doc.Content[0] = top
	for i := 1; i < len(top.Content); i += 2 {
		id, c := top.Content[i-1].Value, top.Content[i]
		if c.Kind != yaml.MappingNode {
			continue
		}
		var kept []*yaml.Node
		var override *yaml.Node
		for j := 1; j < len(c.Content); j += 2 {
			k, v := c.Content[j-1], c.Content[j]
			if k.Value != "runtimes" {
				kept = append(kept, k, v)
				continue
			}
			if v.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("%s: line %d: runtimes: want {runtime: {field: value}}", id, v.Line)
			}
			for r := 1; r < len(v.Content); r += 2 {
				name := v.Content[r-1].Value
				if !known[name] {
					return nil, fmt.Errorf("%s: line %d: runtimes: unknown runtime %q", id, v.Line, name)
				}
				if v.Content[r].Kind != yaml.MappingNode {
					return nil, fmt.Errorf("%s: line %d: runtimes.%s: want {field: value}", id, v.Line, name)
				}
				if name == runtime {
					override = v.Content[r]
				}
			}
		}
		var errnos map[string]string
		if override != nil {
			for o := 1; o < len(override.Content); o += 2 {
				k, v := override.Content[o-1], override.Content[o]
				if k.Value == "errnos" {
					if err := v.Decode(&errnos); err != nil {
						return nil, fmt.Errorf("%s: line %d: runtimes.%s.errnos: want {ERRNO: ERRNO}: %w", id, v.Line, runtime, err)
					}
					continue
				}
				replaced := false
				for j := 0; j < len(kept); j += 2 {
					if kept[j].Value == k.Value {
						kept[j+1], replaced = v, true
					}
				}
				if !replaced {
					kept = append(kept, k, v)
				}
			}
		}
		c.Content = kept
		if len(errnos) > 0 {
			replaceErrnos(c, errnos)
		}
	}
	return yaml.Marshal(&doc)
}

// errnoWord is an errno name as the outcomes write it (EROFS, "EROFS\n").
var errnoWord = regexp.MustCompile(`\bE[A-Z0-9]+\b`)

// replaceErrnos replaces, in every scalar below n, each errno name that
// errnos maps, and its message as a C program prints it (strerror:
// "Read-only file system"): the override "errnos: {EROFS: EACCES}" says
// the runtime answers EACCES wherever the case expects EROFS.
func replaceErrnos(n *yaml.Node, errnos map[string]string) {
	if n.Kind == yaml.ScalarNode {
		n.Value = errnoWord.ReplaceAllStringFunc(n.Value, func(w string) string {
			if r, ok := errnos[w]; ok {
				return r
			}
			return w
		})
		for from, to := range errnos {
			if f, t := strerror(from), strerror(to); f != "" && t != "" {
				n.Value = strings.ReplaceAll(n.Value, f, t)
			}
		}
		return
	}
	for _, c := range n.Content {
		replaceErrnos(c, errnos)
	}
}

// strerror is the C library's message for the errno named name
// ("Read-only file system" for EROFS); "" for an unknown name.
func strerror(name string) string {
	for e := unix.Errno(1); e < 256; e++ {
		if unix.ErrnoName(e) == name {
			msg := e.Error()
			return strings.ToUpper(msg[:1]) + msg[1:]
		}
	}
	return ""
}

// expandAliases returns a deep copy of n with every alias replaced by a
// copy of its anchor's node, and no anchors.
func expandAliases(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	c := *n
	c.Anchor = ""
	c.Content = nil
	for _, sub := range n.Content {
		c.Content = append(c.Content, expandAliases(sub))
	}
	return &c
}

// checkTable: every case has an entry and every entry a case; every input
// has its outcome, and every outcome is one its place allows.
func checkTable(cases []hostileCase, table map[string]*expectation) error {
	var errs []error
	bad := func(id, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", id, fmt.Sprintf(format, args...)))
	}
	ids := map[string]bool{}
	for _, c := range cases {
		ids[c.ID] = true
		x, in := table[c.ID], c.Input
		switch {
		case x == nil:
			bad(c.ID, "no entry")
			continue
		case x.Elsewhere != "":
			continue
		case in.Patch != "" || len(in.PatchHeaders)+len(in.PatchVariants) > 0:
			bad(c.ID, "patches are applied elsewhere: say where")
		}
		var consumed []string
		if cc, ok := customChecks[x.Custom]; ok {
			consumed = cc.consumes
		} else if x.Custom != "" {
			bad(c.ID, "no custom check %q", x.Custom)
		}
		for _, n := range []struct {
			field            string
			inputs, outcomes int
		}{
			{"argv", len(in.Argv), len(x.Argv)},
			{"argv_generated", len(in.ArgvGenerated), len(x.ArgvGenerated)},
			{"requests", len(in.Requests), len(x.Requests)},
			{"ops", len(in.Ops), len(x.Ops)},
			{"in_box", len(in.InBox), len(x.InBox)},
		} {
			if n.inputs != n.outcomes && !slices.Contains(consumed, n.field) {
				bad(c.ID, "%d %s inputs, %d outcomes", n.inputs, n.field, n.outcomes)
			}
		}
		if (len(in.Control) > 0) != (x.Control != nil) {
			bad(c.ID, "control: one outcome for the one control invocation")
		}
		if x.ArgvInBox != nil && len(in.Argv) == 0 {
			bad(c.ID, "argv_in_box without input.argv")
		}
		hostVars := len(in.EnvHost) + len(in.HostEnv)
		for _, r := range in.Requests {
			hostVars += len(r.Env)
		}
		if hostVars > 0 && x.Env == nil {
			bad(c.ID, "the case sets variables in the supervisor: env must pin the container's")
		}
		if in.InBoxLoop != "" && !slices.Contains(consumed, "in_box_loop") ||
			len(in.UpperDirExtra) > 0 && !slices.Contains(consumed, "upper_dir_extra") {
			bad(c.ID, "in_box_loop and upper_dir_extra are read by a custom check")
		}
		if in.Op != "" && (in.Op != "start run" || x.Start == nil) {
			bad(c.ID, "op %q: only \"start run\", with start", in.Op)
		}
		if x.Start != nil && (len(in.TreeVariants) == 0 || len(x.Start.Modes) != len(in.TreeVariants)) {
			bad(c.ID, "start: %d modes for %d tree variants", len(x.Start.Modes), len(in.TreeVariants))
		}
		if in.Mode != "" && !strings.HasPrefix(in.Mode, "assigned ") {
			bad(c.ID, "mode %q", in.Mode)
		}
		for step := range x.Scripts {
			if !slices.Contains(in.InBox, step) {
				bad(c.ID, "a script for %q, which is no in_box step", step)
			}
		}
		if x.Syscalls != nil || len(in.InBoxSyscalls) > 0 {
			if x.Syscalls == nil || len(x.Syscalls.RunAs) != len(in.InBoxSyscalls) {
				bad(c.ID, "syscalls: one run_as per in_box_syscalls entry")
			}
			for _, call := range in.InBoxSyscalls {
				if x.Syscalls != nil && len(x.Syscalls.RunAs[call].Probes) == 0 {
					bad(c.ID, "no probe for %q", call)
				}
			}
		}
		if x.Network != "" && x.Network != "none" {
			bad(c.ID, "network %q: only none", x.Network)
		}
		// Where each outcome word may stand.
		calls := append(append(append(slices.Clone(x.Argv), x.ArgvGenerated...), x.Requests...), nonNil(x.Control)...)
		for _, a := range x.Also {
			calls = append(calls, a.Want)
		}
		for _, o := range calls {
			if o.word == either || o.word == starts {
				bad(c.ID, "%s stands only in ops", o.word)
			}
		}
		for _, o := range append(calls, opPolicies(x.Ops)...) {
			if o.word == permits && !o.result.onlyArgv() {
				bad(c.ID, "PERMITS runs nothing: only argv checks")
			}
		}
		for i, o := range x.Ops {
			if o.Policy.word == "" {
				bad(c.ID, "op %d: no policy outcome", i)
			}
		}
		for _, s := range x.InBox {
			if s.Policy != nil && !s.Policy.refuses() {
				bad(c.ID, "an in_box step's policy outcome is a refusal")
			}
		}
	}
	for id := range table {
		if !ids[id] {
			bad(id, "no such case in cases.json")
		}
	}
	return errors.Join(errs...)
}

func nonNil(o *outcome) []outcome {
	if o == nil {
		return nil
	}
	return []outcome{*o}
}

func opPolicies(ops []opWant) []outcome {
	var out []outcome
	for _, o := range ops {
		out = append(out, o.Policy)
	}
	return out
}

// --- the interpreter ---

// expect runs x on the case's tree, or on each tree variant in its own
// subtest and state.
func (h *harness) expect(x *expectation) {
	if len(h.c.Input.TreeVariants) == 0 {
		h.repoFrom(h.c.Input.Tree, x.Repo)
		h.phases(x)
		return
	}
	for i, variant := range h.c.Input.TreeVariants {
		h.run(fmt.Sprintf("variant%d", i), func(h *harness) {
			v := h.fresh()
			v.repoFrom(variant, x.Repo)
			if x.Start != nil {
				v.refusesStart(x.Start.Refuse, x.Start.Modes[i])
				return
			}
			v.phases(x)
		})
	}
}

// phases runs the fields of x in a fixed order: what only reads first,
// then the calls, the box, the environment, the view, the change sets,
// and last the custom check.
func (h *harness) phases(x *expectation) {
	t := h.t
	h.never = x.NeverOutput
	for _, p := range x.Hidden {
		require.True(t, h.hidden[p], "git hides %s", p)
	}
	for _, p := range x.Visible {
		require.True(t, h.visible[p], "git shows %s", p)
	}
	envNames := h.setCaseEnv(x.Env)
	if x.Ignore != "" {
		h.ignoreCase(x.Ignore)
	}
	h.argvs(x.GitProfile, x.Argv)
	if x.Control != nil {
		h.run("control", func(h *harness) { h.invoke("docs", nil, h.c.Input.Control, *x.Control) })
	}
	for i, want := range x.ArgvGenerated {
		desc := h.c.Input.ArgvGenerated[i]
		gen := argvGenerators[desc]
		require.NotNil(t, gen, "no generator for %q", desc)
		h.run(fmt.Sprintf("generated%d", i), func(h *harness) { h.invoke("docs", nil, gen(), want) })
	}
	for i, want := range x.Requests {
		h.run(fmt.Sprintf("request%d", i), func(h *harness) { h.invoke("docs", nil, h.c.Input.Requests[i].Argv, want) })
	}
	for i, a := range x.Also {
		key, opts := profileSession(h.t, a.Profile)
		h.run(fmt.Sprintf("also%d", i), func(h *harness) { h.invoke(key, opts, a.Argv, a.Want) })
	}
	if len(x.Ops) > 0 {
		h.ops(x.Ops)
	}
	h.inBoxSteps(x)
	h.kernelChecks(x)
	if x.Env != nil {
		h.requireFixedEnv(h.shared("run-docs", false), append(envNames, x.Env.Never...)...)
	}
	if x.HiddenTree {
		h.requireHiddenTree()
	}
	keys := make([]string, 0, len(x.Changes))
	for k := range x.Changes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.run("changes:"+k, func(h *harness) { h.changes(k, x.Changes[k]) })
	}
	if x.Custom != "" {
		customChecks[x.Custom].run(h)
	}
}

func profileSession(t *testing.T, profile string) (string, []sessOpt) {
	switch profile {
	case "":
		return "docs", nil
	case "git":
		return "git", []sessOpt{withProfile(gitProfile(t))}
	}
	t.Fatalf("unknown profile %q", profile)
	return "", nil
}

// caseSession is the key and options of the case's session: page mode
// when input.mode assigns a page, else the default.
func (h *harness) caseSession() (string, []sessOpt) {
	if page, ok := strings.CutPrefix(h.c.Input.Mode, "assigned "); ok {
		return "page:" + page, []sessOpt{withPage(page)}
	}
	return "docs", nil
}

// setCaseEnv puts the case's own host variables and want's into the
// supervisor's environment and returns their names.
func (h *harness) setCaseEnv(want *envWant) []string {
	vars := map[string]string{}
	for _, m := range []map[string]string{h.c.Input.EnvHost, h.c.Input.HostEnv} {
		for k, v := range m {
			vars[k] = v
		}
	}
	for _, r := range h.c.Input.Requests {
		for k, v := range r.Env {
			vars[k] = v
		}
	}
	if want != nil {
		for k, v := range want.Host {
			vars[k] = strings.ReplaceAll(v, "{repo}", h.repo)
		}
	}
	h.setHostEnv(vars)
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// refusesStart: REFUSE/START in each mode, naming rule, leaving no state.
func (h *harness) refusesStart(rule string, pages []string) {
	t := h.t
	if h.page != "" {
		require.Contains(t, pages, h.page, "the tree names page %s", h.page)
	}
	for _, page := range pages {
		cfg := sandbox.SessionConfig{Repo: h.repo, Profile: docsProfile(t), Page: page}
		before := sessionEntries(t, testutil.StateDir(t))
		s, err := h.e.NewSession(t.Context(), cfg)
		require.Equal(t, before, sessionEntries(t, testutil.StateDir(t)), "a refused start left session state")
		require.Error(t, err, "the session started (page %q)", page)
		require.Nil(t, s)
		require.True(t, errdefs.IsFailedPrecondition(err), "REFUSE/START: %v", err)
		require.Contains(t, err.Error(), rule)
		_, err = sandbox.NewPolicy(cfg)
		require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
	}
}

// inBoxSteps runs input.in_box, each step alone in the box (busybox sh)
// in the case's session or a fresh one, then gives its words to the
// policy when the table says what the policy does.
func (h *harness) inBoxSteps(x *expectation) {
	key, opts := h.caseSession()
	for i, step := range h.c.Input.InBox {
		w := x.InBox[i]
		h.run(fmt.Sprintf("step%d", i), func(h *harness) {
			s := h.shared("run-"+key, false, opts...)
			if x.FreshSessionPerStep {
				s = h.session(opts...)
			}
			script, ok := x.Scripts[step]
			if !ok {
				// A step that is already a shell command runs as written,
				// without a trailing "(comment)".
				script = trailingComment.ReplaceAllString(step, "")
			}
			r := h.boxSh(s, script)
			h.checkResult(nil, r, w.resultWant)
			if w.Full {
				require.Contains(h.t, r.LimitsHit, sandbox.LimitWriteArea, "%s: the kernel did not stop it", step)
			}
			if len(w.Rejected) > 0 {
				cs, err := s.Changes()
				require.NoError(h.t, err, step)
				h.requireViolations(cs, w.Rejected)
			}
			if x.WriteAreaTmpfs {
				h.requireWriteAreaIsTmpfs(s)
			}
			if w.Policy != nil {
				h.invoke(key, opts, strings.Fields(step), *w.Policy)
			}
		})
	}
}

// kernelChecks runs box (each step in its own container), then noexec,
// network, syscalls and argv_in_box in one container of the case's
// session, in that order.
func (h *harness) kernelChecks(x *expectation) {
	// Box steps run as the tool itself, each in its own container: a
	// child of the steps' shell is under the tool's Landlock domain but
	// its own /proc/self files are not allowed (cmd/corral-init/confine.go).
	for _, b := range x.Box {
		key, opts := h.caseSession()
		r := h.box(h.shared("run-"+key, false, opts...), b.Argv...)
		if b.Out != nil {
			require.Equal(h.t, *b.Out, out(r), "%q", b.Argv)
		}
		for _, l := range b.Lines {
			require.Contains(h.t, lines(out(r)), l, "%q", b.Argv)
		}
	}
	var steps []kernelStep
	for _, p := range x.Noexec {
		require.Contains(h.t, h.tree, p, "noexec names a file of the tree")
		steps = append(steps, kernelStep{what: "exec " + p, argv: []string{"probe", "exec", path.Join(mounts.ContainerRoot, p)}, check: func(t *testing.T, out string, rc int) {
			require.Equal(t, "EACCES\n", out, p)
		}})
	}
	if x.Network == "none" {
		steps = append(steps,
			kernelStep{what: "interfaces", argv: []string{"probe", "ifaces"}, check: func(t *testing.T, out string, rc int) {
				require.Equal(t, "lo\n", out)
			}},
			kernelStep{what: "inet socket", argv: []string{"probe", "socket-inet"}, check: func(t *testing.T, out string, rc int) {
				require.Equal(t, "EPERM\n", out)
			}})
	}
	if x.Syscalls != nil {
		for _, call := range h.c.Input.InBoxSyscalls {
			run := x.Syscalls.RunAs[call]
			for _, p := range run.Probes {
				steps = append(steps, kernelStep{what: call, argv: []string{"probe", p}, check: func(t *testing.T, out string, rc int) {
					require.Equal(t, x.Syscalls.Errno+"\n", out, "%s (probe %s)", call, p)
				}})
			}
			if run.Busybox != "" {
				steps = append(steps, kernelStep{what: call, argv: append([]string{"busybox"}, strings.Fields(run.Busybox)...), check: func(t *testing.T, out string, rc int) {
					require.NotEqual(t, 0, rc, "%s: %s", run.Busybox, out)
				}})
			}
		}
	}
	if x.ArgvInBox != nil {
		for _, argv := range h.c.Input.Argv {
			words := argv
			if slices.Contains(busyboxApplets, argv[0]) {
				argv = append([]string{"busybox"}, argv...)
			}
			steps = append(steps, kernelStep{what: strings.Join(argv, " "), argv: argv, check: func(t *testing.T, out string, rc int) {
				if x.ArgvInBox.NoHiddenNames {
					// Error messages repeat the argv's own words; nothing
					// else may name a hidden path.
					for _, a := range words {
						out = strings.ReplaceAll(out, a, "")
					}
					h.sub(t).noHiddenNames(out)
				}
			}})
		}
	}
	if len(steps) > 0 {
		key, opts := h.caseSession()
		h.kernelSteps(h.shared("run-"+key, false, opts...), steps)
	}
}

// changes checks the change set of the case's session key, which must
// have run.
func (h *harness) changes(key string, want changesWant) {
	t := h.t
	s := h.sessions["run-"+key]
	require.NotNil(t, s, "no session %s ran", key)
	cs, err := s.Changes()
	require.NoError(t, err)
	if len(want.Rejected) > 0 {
		h.requireViolations(cs, want.Rejected)
	}
	for _, p := range want.RejectedOrHighRisk {
		rejected := slices.ContainsFunc(cs.Violations, func(v changeset.Problem) bool {
			return v.Path == p || strings.HasPrefix(p, v.Path+"/")
		})
		if rejected {
			continue
		}
		i := slices.IndexFunc(cs.Changes, func(c changeset.Change) bool { return c.Path == p })
		require.GreaterOrEqual(t, i, 0, "%s is neither a change nor rejected", p)
		risk := review.Classify(cs.Changes[i], s.Scope)
		require.Equal(t, review.High, risk.Level, "%s: %v", p, risk.Reasons)
	}
	if len(want.Rejected) == 0 && len(want.RejectedOrHighRisk) == 0 {
		require.NoError(t, cs.Err())
	}
	if want.Summary != nil {
		if len(*want.Summary) == 0 {
			require.Empty(t, cs.Changes)
		} else {
			require.Equal(t, *want.Summary, summary(cs))
		}
	}
	for _, c := range want.NotInSummary {
		require.NotContains(t, summary(cs), c)
	}
	if want.GitApply {
		patch, err := changeset.Patch(cs)
		require.NoError(t, err)
		gitApplyCheck(t, h.repo, patch)
	}
}

// TestApplyRuntime: a case's runtimes entry replaces whole fields and
// translates errnos for its runtime only, never through a shared anchor.
func TestApplyRuntime(t *testing.T) {
	in := []byte(`A-01:
  ops: [&ro {kernel: EROFS}]
  box: [{argv: [x], out: "EROFS\n"}, {argv: [y], out: "cp: Read-only file system"}]
  runtimes: {runsc: {errnos: {EROFS: EACCES}, noexec: [a]}}
B-01:
  ops: [*ro]
`)
	var got map[string]map[string]any
	out, err := applyRuntime(in, "runsc")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(out, &got))
	require.Equal(t, map[string]map[string]any{
		"A-01": {"ops": []any{map[string]any{"kernel": "EACCES"}}, "box": []any{map[string]any{"argv": []any{"x"}, "out": "EACCES\n"}, map[string]any{"argv": []any{"y"}, "out": "cp: Permission denied"}}, "noexec": []any{"a"}},
		"B-01": {"ops": []any{map[string]any{"kernel": "EROFS"}}},
	}, got)
	out, err = applyRuntime(in, "runc")
	require.NoError(t, err)
	got = nil
	require.NoError(t, yaml.Unmarshal(out, &got))
	require.Equal(t, "EROFS", got["A-01"]["ops"].([]any)[0].(map[string]any)["kernel"])
	require.NotContains(t, got["A-01"], "runtimes")
	_, err = applyRuntime([]byte("A-01: {runtimes: {gvisor: {}}}\n"), "runc")
	require.ErrorContains(t, err, `unknown runtime "gvisor"`)
}
