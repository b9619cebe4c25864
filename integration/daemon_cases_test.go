package integration

// The hostile-case table through corral's daemon: every call of the table
// (input.argv, control, argv_generated, requests, also) made through the
// daemon's API instead of a session in this process, with the same
// expectations: the same refusal (kind, index, token, rule, one line
// naming argv[i]) with no task started, the same result for what runs.
// The view, the box and the change-set checks of a case act on the
// kernel side, which is the same container spec either way; they run in
// process only (TestCases). What the calls themselves wrote is checked
// here: nothing out of the session's scope, and the table's change set
// where the case's calls are all it runs.
//
// With casesConfig.Volume the table runs as an agent Pod against its
// node's daemon in Pod mode (TestCasesInPod, daemon_cases_pod_test.go;
// driven by integration/kube): each repository is a directory of the
// Pod's own volume, each session names it {volume, subPath}, and the
// cases run in parallel. A Pod reaches no containerd, so the task counts
// the host checks from containerd's events ("a refusal started nothing",
// "a call started exactly one task") become a ledger printed at the end
// (startLedger): per session, the tasks its calls must have started (0
// for the sessions that only refuse), which the outer test checks
// against the node containerd's events.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/client"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestCasesThroughDaemon: the table's calls through the test run's daemon.
func TestCasesThroughDaemon(t *testing.T) { runCases(t, casesConfig{Daemon: testDaemonSocket(t)}) }

// hasCalls reports whether x makes calls through the policy.
func (x *expectation) hasCalls() bool {
	return len(x.Argv)+len(x.ArgvGenerated)+len(x.Requests)+len(x.Also) > 0 || x.Control != nil
}

// daemonCases runs one case's calls through a daemon.
type daemonCases struct {
	h        *harness
	c        *client.Client
	vol      *caseVolume       // the Pod's volume the repository is in (Pod mode)
	ledger   *startLedger      // Pod mode: the task counts the outer test checks
	sessions map[string]string // by key ("run-docs", "quiet-git", ...): session id
	quiet    []string
}

// runCasesThroughDaemon is runCases through the daemon at cfg.Daemon.
func runCasesThroughDaemon(t *testing.T, cfg casesConfig, cases []hostileCase, table map[string]*expectation) {
	var e *sandbox.Executor
	var w *taskWatcher
	var ledger *startLedger
	if cfg.Volume == nil {
		e = testutil.Executor(t) // the task watcher and the containers' check
		w = watchTasks(t, e)
	} else {
		ledger = newStartLedger(t)
	}
	c := client.New(cfg.Daemon)
	t.Cleanup(func() { c.Close() })
	ran := 0
	for _, hc := range cases {
		x := table[hc.ID]
		if x.Elsewhere != "" || !x.hasCalls() {
			continue
		}
		ran++
		t.Run(hc.ID, func(t *testing.T) {
			if cfg.Volume != nil {
				// Each case has its own repository and sessions; the
				// ledger is the one thing they share.
				t.Parallel()
			}
			if len(hc.Input.TreeVariants) == 0 {
				newDaemonCases(t, c, cfg, ledger, newHarness(t, hc, w, e), hc.Input.Tree, x).calls(x)
				return
			}
			for i, variant := range hc.Input.TreeVariants {
				if x.Start != nil {
					continue // a session that must not start: in process only
				}
				t.Run(fmt.Sprintf("variant%d", i), func(t *testing.T) {
					newDaemonCases(t, c, cfg, ledger, newHarness(t, hc, w, e), variant, x).calls(x)
				})
			}
		})
	}
	t.Logf("%d of %d cases make calls through the daemon", ran, len(cases))
	require.NotZero(t, ran, "no case makes calls")
}

func newDaemonCases(t *testing.T, c *client.Client, cfg casesConfig, ledger *startLedger, h *harness, tree map[string]string, x *expectation) *daemonCases {
	if cfg.Volume != nil {
		h.repos = cfg.Volume.Dir
	}
	h.repoFrom(tree, x.Repo)
	d := &daemonCases{h: h, c: c, vol: cfg.Volume, ledger: ledger, sessions: map[string]string{}}
	// Registered after the repository: runs first.
	t.Cleanup(func() {
		for _, id := range d.quiet {
			d.requireNothingStarted(t, id)
		}
		for key, id := range d.sessions {
			if d.ledger != nil {
				d.ledger.add(t.Name()+" "+key, id, h.starts[id])
			}
			_, err := c.DiscardSession(context.Background(), id)
			require.NoError(t, err)
		}
	})
	return d
}

// noGitInPod is why the git-profile calls of the table do not run from a
// Pod.
const noGitInPod = "git profile: in Pod mode a session names a built-in profile only (a profile file would be a node path), and no built-in profile offers git"

// calls runs x's calls in the order phases does.
func (d *daemonCases) calls(x *expectation) {
	h := d.h
	require.Len(h.t, x.Argv, len(h.c.Input.Argv), "one outcome per input.argv")
	for i, argv := range h.c.Input.Argv {
		d.run(fmt.Sprintf("argv%d", i), func(d *daemonCases) {
			key := "docs"
			if x.GitProfile && argv[0] == "git" {
				d.refused(d.session("quiet-docs", true), argv, outcome{word: refuseCmd, kind: allowlist.KindCmd, rule: "git is not on the allowlist"})
				key = "git"
			}
			d.invoke(key, argv, x.Argv[i])
		})
	}
	if x.Control != nil {
		d.run("control", func(d *daemonCases) { d.invoke("docs", h.c.Input.Control, *x.Control) })
	}
	for i, want := range x.ArgvGenerated {
		gen := argvGenerators[h.c.Input.ArgvGenerated[i]]
		require.NotNil(h.t, gen, "no generator for %q", h.c.Input.ArgvGenerated[i])
		d.run(fmt.Sprintf("generated%d", i), func(d *daemonCases) { d.invoke("docs", gen(), want) })
	}
	for i, want := range x.Requests {
		d.run(fmt.Sprintf("request%d", i), func(d *daemonCases) { d.invoke("docs", h.c.Input.Requests[i].Argv, want) })
	}
	for i, a := range x.Also {
		key, _ := profileSession(h.t, a.Profile)
		d.run(fmt.Sprintf("also%d", i), func(d *daemonCases) { d.invoke(key, a.Argv, a.Want) })
	}
	keys := make([]string, 0, len(d.sessions))
	for k := range d.sessions {
		if strings.HasPrefix(k, "run-") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		d.run("changes:"+strings.TrimPrefix(k, "run-"), func(d *daemonCases) { d.changes(k, x) })
	}
}

// changes: what the calls of session key wrote stays in the session's
// write scope (openwiki/, the default) and is no violation; where the
// case runs nothing but calls, the change set is the one the table gives.
func (d *daemonCases) changes(key string, x *expectation) {
	t := d.h.t
	cs, err := d.c.Diff(context.Background(), d.sessions[key])
	require.NoError(t, err)
	require.Empty(t, cs.Violations, "the calls wrote what the session rejects")
	var got []string
	for _, c := range cs.Changes {
		require.True(t, strings.HasPrefix(c.Path, "openwiki/"), "the calls wrote %s, outside the write scope openwiki/", c.Path)
		got = append(got, c.Kind+" "+c.Path)
	}
	want, ok := x.Changes[strings.TrimPrefix(key, "run-")]
	if !ok || len(x.Ops)+len(x.InBox)+len(x.Box) > 0 || x.Custom != "" {
		return // the table's change set includes what runs in the box
	}
	if want.Summary != nil {
		if len(*want.Summary) == 0 {
			require.Empty(t, got)
		} else {
			require.Equal(t, *want.Summary, got)
		}
	}
	for _, c := range want.NotInSummary {
		require.NotContains(t, got, c)
	}
}

// run runs fn as subtest name with the case's state.
func (d *daemonCases) run(name string, fn func(d *daemonCases)) {
	d.h.t.Run(name, func(t *testing.T) {
		sub := *d
		sub.h = d.h.sub(t)
		fn(&sub)
		d.quiet = sub.quiet
	})
}

// session returns the case's daemon session named key ("run-docs",
// "quiet-git", ...), creating it on first use.
func (d *daemonCases) session(key string, quiet bool) string {
	t := d.h.t
	t.Helper()
	if id, ok := d.sessions[key]; ok {
		return id
	}
	req := api.CreateSession{Repo: d.h.repo}
	if d.vol != nil {
		if strings.HasSuffix(key, "git") {
			t.Skip(noGitInPod)
		}
		sub, err := filepath.Rel(d.vol.Dir, d.h.repo)
		require.NoError(t, err)
		req = api.CreateSession{Volume: &api.Volume{Name: d.vol.Name, SubPath: sub}}
	}
	if strings.HasSuffix(key, "git") {
		doc, err := yaml.Marshal(gitProfile(t))
		require.NoError(t, err)
		f := filepath.Join(d.h.root.TempDir(), "git.yaml")
		require.NoError(t, os.WriteFile(f, doc, 0o644))
		req.Profile = f
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := d.c.CreateSession(ctx, req)
	require.NoError(t, err)
	d.sessions[key] = s.ID
	if quiet {
		d.quiet = append(d.quiet, s.ID)
	}
	return s.ID
}

// requireNothingStarted: no call of session id ever ran. (A daemon makes
// containers and their tasks ahead of calls, started on runc and crun, so
// a created task is no call, nor is a started one whose corral-init runs
// alone, waiting for a request.) In Pod mode the ledger holds it for the
// outer test.
func (d *daemonCases) requireNothingStarted(t *testing.T, id string) {
	t.Helper()
	if d.ledger != nil {
		return
	}
	require.Zero(t, d.h.w.count(id, "exit"), "a task of session %s exited: a call ran", id)
	ctx := d.h.e.Context(context.Background())
	cs, err := d.h.e.Client().Containers(ctx, fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, id))
	require.NoError(t, err)
	for _, c := range cs {
		task, err := c.Task(ctx, nil)
		if errdefs.IsNotFound(err) {
			continue
		}
		require.NoError(t, err)
		st, err := task.Status(ctx)
		if errdefs.IsNotFound(err) {
			continue // deleted meanwhile
		}
		require.NoError(t, err)
		if st.Status == containerd.Running {
			pids, err := task.Pids(ctx)
			require.NoError(t, err)
			require.Len(t, pids, 1, "session %s has a task that runs a tool, in container %s", id, c.ID())
			continue
		}
		require.Equal(t, containerd.Created, st.Status, "session %s has a task that started, in container %s", id, c.ID())
	}
}

// invoke is harness.invoke through the daemon.
func (d *daemonCases) invoke(key string, argv []string, want outcome) {
	h, t := d.h, d.h.t
	t.Helper()
	switch want.word {
	case runs, literal:
		r := d.ran(d.session("run-"+key, false), argv)
		if want.word == literal {
			h.requireLiteral(argv, r)
		}
		h.checkResult(argv, r, want.result)
		return
	case permits:
		dec, err := d.c.Check(context.Background(), d.session("quiet-"+key, true), argv)
		require.NoError(t, err, "argv %q", clipArgv(argv))
		h.checkResult(argv, &sandbox.Result{Argv: dec.Argv}, want.result)
		return
	}
	require.True(t, want.refuses(), "%s is no outcome of a call", want.word)
	q := d.session("quiet-"+key, true)
	if want.anyIndex {
		r := d.refusal(q, argv)
		require.Equal(t, want.kind, r.Kind, "argv %q: %v", clipArgv(argv), r)
		return
	}
	d.refused(q, argv, want)
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
		r := d.refusal(q, v)
		require.Equal(t, allowlist.KindArg, r.Kind, "%q", v)
		require.Equal(t, want.index, r.Index, "%q: %v", v, r)
	}
}

// refusal requires some refusal of argv through session id, with nothing
// started.
func (d *daemonCases) refusal(id string, argv []string) *allowlist.Refusal {
	t := d.h.t
	t.Helper()
	res, err := d.c.Exec(context.Background(), id, argv, nil, nil)
	require.Nil(t, res, "argv %q ran", clipArgv(argv))
	var r *allowlist.Refusal
	require.True(t, errors.As(err, &r), "argv %q: want a refusal, got %v", clipArgv(argv), err)
	require.True(t, errdefs.IsPermissionDenied(err), "argv %q: %v", clipArgv(argv), err)
	require.Equal(t, r.Error(), err.Error(), "the daemon's message is the refusal's line")
	d.h.saw(err.Error())
	d.requireNothingStarted(t, id)
	return r
}

// refused is harness.refused through the daemon.
func (d *daemonCases) refused(id string, argv []string, want outcome) {
	t := d.h.t
	t.Helper()
	r := d.refusal(id, argv)
	require.Equal(t, want.kind, r.Kind, "argv %q: %v", clipArgv(argv), r)
	require.Equal(t, want.index, r.Index, "argv %q: %v", clipArgv(argv), r)
	requireRule(t, r.Rule, want.rule)
	if r.Index >= 0 && r.Index < len(argv) && len(argv[r.Index]) < 256 {
		require.Equal(t, argv[r.Index], r.Token, "the refusal names the token")
		require.Contains(t, r.Error(), fmt.Sprintf("argv[%d]", r.Index))
	}
}

// ran runs argv through session id: permitted, exactly one container ran
// it (one task exit).
func (d *daemonCases) ran(id string, argv []string) *sandbox.Result {
	h, t := d.h, d.h.t
	t.Helper()
	if d.ledger == nil {
		h.w.waitCount(t, id, "exit", h.starts[id])
	}
	res, err := d.c.Exec(context.Background(), id, argv, nil, nil)
	require.NoError(t, err, "argv %q", clipArgv(argv))
	h.starts[id]++
	h.saw(string(res.Stdout), string(res.Stderr))
	if d.ledger == nil {
		h.w.waitCount(t, id, "exit", h.starts[id])
	}
	return &sandbox.Result{Argv: res.Argv, ExitCode: res.ExitCode, Duration: time.Duration(res.DurationNS), LimitsHit: res.LimitsHit,
		Stdout: res.Stdout, Stderr: res.Stderr, StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated}
}

// startLedger records, per daemon session of the table, how many tasks
// its calls must have started (0 for a session that only refuses), and
// prints them when the table ends, as one line for whoever watches the
// daemon's containerd (a Pod cannot):
//
//	corral-cases-ledger: [{"case":"TestCasesInPod/CMD-01 quiet-docs","session":"…","starts":0}, …]
type startLedger struct {
	mu      sync.Mutex
	entries []ledgerEntry
}

type ledgerEntry struct {
	Case    string `json:"case"`
	Session string `json:"session"`
	Starts  int    `json:"starts"`
}

// ledgerPrefix starts the ledger's line on stdout.
const ledgerPrefix = "corral-cases-ledger: "

// newStartLedger returns a ledger printed when t ends (after its
// subtests, parallel ones included).
func newStartLedger(t *testing.T) *startLedger {
	l := &startLedger{}
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		b, err := json.Marshal(l.entries)
		require.NoError(t, err)
		fmt.Printf("\n%s%s\n", ledgerPrefix, b)
	})
	return l
}

func (l *startLedger) add(name, session string, starts int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, ledgerEntry{Case: name, Session: session, Starts: starts})
}
