package main

// The CLI through corral's daemon. When a daemon answers (--daemon SOCKET,
// $CORRAL_DAEMON, else the default socket), run, session create, exec,
// ls, rm, diff and apply and serve --mcp go through its API
// (sandbox/client) instead of an executor in this process; --no-daemon
// forces standalone. Output, exit codes and refusal lines are the same
// both ways: the daemon answers with corral's own error types (the client
// rebuilds them) and the change set's bytes, so everything printed is
// rendered here by the same functions.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/corral-sandbox/corral/internal/config"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/review"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/client"
	"github.com/corral-sandbox/corral/sandbox/fsop"
	"github.com/spf13/cobra"
)

// executorFlags configure an executor in this process. A daemon has its
// own configuration, so when any of them is given on the command line the
// default socket is not tried (a configured daemon socket still is).
var executorFlags = []string{"address", "namespace", "state-dir", "runtime", "image", "audit"}

// dialTimeout bounds the first exchange with a daemon.
const dialTimeout = 5 * time.Second

// daemonClient returns a client of the daemon cmd goes through, or nil to
// run standalone: --no-daemon, or no daemon socket configured (--daemon,
// $CORRAL_DAEMON, the config file's daemon_socket) and nothing answering
// on the default one. A configured daemon that does not answer is an
// error (exit 125), never a silent fallback. The caller must Close the
// client.
func (g *globalFlags) daemonClient(cmd *cobra.Command) (*client.Client, error) {
	if g.noDaemon {
		if f := cmd.Flags().Lookup("daemon"); f != nil && f.Changed {
			return nil, usageError(errors.New("--daemon and --no-daemon exclude each other"))
		}
		return nil, nil
	}
	sock := g.cfg.DaemonSocket
	src := g.cfg.Sources[config.KeyDaemonSocket]
	explicit := src != "" && src != "default"
	if !explicit {
		for _, name := range executorFlags {
			if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
				return nil, nil
			}
		}
		if sock == "" {
			sock = api.DefaultSocket
		}
		if _, err := os.Stat(sock); err != nil {
			return nil, nil
		}
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), dialTimeout)
	defer cancel()
	c, err := client.Dial(ctx, sock)
	if err != nil {
		if !explicit {
			return nil, nil
		}
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("%w (the daemon socket from %s; --no-daemon runs standalone)", err, src)}
	}
	return c, nil
}

// profileSource is how a session names profile name: a built-in name, or
// a file's absolute path (what the daemon needs, and what a standalone
// session records).
func profileSource(name string) string {
	if strings.ContainsRune(name, filepath.Separator) || strings.HasSuffix(name, ".yaml") {
		if abs, err := filepath.Abs(name); err == nil {
			return abs
		}
	}
	return name
}

// volumeUsage is the --volume flag's help.
const volumeUsage = "Pod mode: the repository is NAME, one of the calling Pod's own volumes, or the directory SUBPATH beneath it (NAME[/SUBPATH]; needs the node's corral daemon, excludes --repo)"

// errVolumeNeedsDaemon is --volume without a daemon to talk to.
var errVolumeNeedsDaemon = errors.New("--volume names a Pod volume, which only corral's daemon in Pod mode resolves: pass --daemon SOCKET (or set CORRAL_DAEMON_SOCKET)")

// checkRepoOrVolume requires exactly one of --repo and --volume.
func checkRepoOrVolume(repo, volume string) error {
	switch {
	case repo == "" && volume == "":
		return usageError(errors.New("--repo is required (or --volume NAME[/SUBPATH] in a Pod)"))
	case repo != "" && volume != "":
		return usageError(errors.New("--repo and --volume exclude each other"))
	}
	return nil
}

// parseVolume reads --volume NAME[/SUBPATH].
func parseVolume(s string) (*api.Volume, error) {
	name, sub, _ := strings.Cut(s, "/")
	if name == "" {
		return nil, usageError(fmt.Errorf("--volume %q: want NAME[/SUBPATH]", s))
	}
	return &api.Volume{Name: name, SubPath: strings.Trim(sub, "/")}, nil
}

// createRequest is the API's form of a session configuration; volume,
// when set (--volume), replaces the repository.
func createRequest(cfg sandbox.SessionConfig, source, volume string) (api.CreateSession, error) {
	req := api.CreateSession{Profile: source, Scope: cfg.WriteDir, Page: cfg.Page, AgentID: cfg.AgentID, ReadOnly: cfg.ReadOnly}
	if volume != "" {
		v, err := parseVolume(volume)
		if err != nil {
			return api.CreateSession{}, err
		}
		req.Volume = v
	} else {
		repo, err := filepath.Abs(cfg.Repo)
		if err != nil {
			return api.CreateSession{}, &exitError{code: exitFailed, err: err}
		}
		req.Repo = repo
	}
	if cfg.IdleTTL > 0 {
		req.IdleTTL = cfg.IdleTTL.String()
	}
	return req, nil
}

// recordOf is a daemon's session as a standalone session records it.
func recordOf(s *api.Session) sandbox.SessionRecord {
	rec := sandbox.SessionRecord{ID: s.ID, Repo: s.Repo, Profile: s.Profile, ProfileName: s.ProfileName, WriteDir: s.WriteDir,
		Page: s.Page, AgentID: s.AgentID, ReadOnly: s.ReadOnly, Scope: s.Scope, Created: s.Created, Version: s.Version}
	if s.IdleTTLNS > 0 {
		rec.IdleTTL = time.Duration(s.IdleTTLNS).String()
	}
	return rec
}

// remoteProfile is the profile a daemon's session recorded.
func remoteProfile(ctx context.Context, c *client.Client, id string) (*profiles.Profile, error) {
	doc, err := c.Profile(ctx, id)
	if err != nil {
		return nil, err
	}
	p, err := profiles.Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("session %s: its recorded profile: %w", id, err)
	}
	return p, nil
}

// remoteSession is a session of a daemon: the caller of execAndReport
// and the mcpserver.Session of serve --mcp.
type remoteSession struct {
	c  *client.Client
	id string

	mu   sync.Mutex
	last *api.ExecResult   // the latest Exec's, for CallChanges
	prof *profiles.Profile // the session's, once known (see profile)
}

// profile is the profile the daemon's session recorded, fetched on the
// first need.
func (r *remoteSession) profile(ctx context.Context) (*profiles.Profile, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.prof == nil {
		p, err := remoteProfile(ctx, r.c, r.id)
		if err != nil {
			return nil, err
		}
		r.prof = p
	}
	return r.prof, nil
}

func (r *remoteSession) call(ctx context.Context, argv []string, stdout, stderr io.Writer) (*callResult, error) {
	res, err := r.c.Exec(ctx, r.id, argv, stdout, stderr)
	if err != nil {
		return nil, err
	}
	cs := setOf(res.Changes, res.Violations)
	return &callResult{res: resultOf(res), cs: cs, introduced: problemsOf(res.NewViolations), stat: func() string { return res.Stat }}, nil
}

func (r *remoteSession) patch(ctx context.Context, _ *changeset.Set) ([]byte, error) {
	return r.c.Patch(ctx, r.id)
}

// resultOf is an API result as the sandbox gives it (nil lists as the
// sandbox leaves them, so that JSON output is the same).
func resultOf(r *api.ExecResult) *sandbox.Result {
	out := &sandbox.Result{Argv: r.Argv, ExitCode: r.ExitCode, Duration: time.Duration(r.DurationNS), LimitsHit: r.LimitsHit,
		Stdout: r.Stdout, Stderr: r.Stderr, StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated}
	if len(out.LimitsHit) == 0 {
		out.LimitsHit = nil
	}
	return out
}

func problemsOf(ps []api.Problem) []changeset.Problem {
	if len(ps) == 0 {
		return nil
	}
	out := make([]changeset.Problem, len(ps))
	for i, p := range ps {
		out[i] = changeset.Problem{Path: p.Path, Reason: p.Reason}
	}
	return out
}

// setOf is an API change set as package changeset holds it (with the
// bytes when the answer carried them).
func setOf(cs []api.Change, vs []api.Problem) *changeset.Set {
	out := &changeset.Set{Changes: []changeset.Change{}, Violations: problemsOf(vs)}
	for _, c := range cs {
		out.Changes = append(out.Changes, changeset.Change{Path: c.Path, Kind: changeset.Kind(c.Kind), BeforeSHA256: c.BeforeSHA256,
			AfterSHA256: c.AfterSHA256, Size: c.Size, Mode: os.FileMode(c.Mode), Before: c.Before, After: c.After})
	}
	return out
}

// changes is the session's whole change set, with each change's bytes.
func (r *remoteSession) changes(ctx context.Context) (*changeset.Set, error) {
	cs, err := r.c.DiffContents(ctx, r.id)
	if err != nil {
		return nil, err
	}
	return setOf(cs.Changes, cs.Violations), nil
}

// The mcpserver.Session methods.

func (r *remoteSession) Read(ctx context.Context, unsafePath string, o sandbox.ReadOptions) (*fsop.ReadResult, error) {
	unit := "lines"
	if o.Bytes {
		unit = "bytes"
	}
	res, err := r.c.Read(ctx, r.id, api.Read{Path: unsafePath, Offset: o.Offset, Limit: o.Limit, Unit: unit})
	if err != nil {
		return nil, err
	}
	out := fsop.ReadResult(*res)
	return &out, nil
}

func entriesOf(es []api.Entry) []fsop.Entry {
	out := make([]fsop.Entry, len(es))
	for i, e := range es {
		out[i] = fsop.Entry(e)
	}
	return out
}

func (r *remoteSession) List(ctx context.Context, unsafePath string) (*fsop.ListResult, error) {
	res, err := r.c.List(ctx, r.id, api.List{Path: unsafePath})
	if err != nil {
		return nil, err
	}
	return &fsop.ListResult{Path: res.Path, Entries: entriesOf(res.Entries), Truncated: res.Truncated}, nil
}

func (r *remoteSession) Glob(ctx context.Context, pattern string, max int) (*fsop.GlobResult, error) {
	res, err := r.c.Glob(ctx, r.id, api.Glob{Pattern: pattern, Max: max})
	if err != nil {
		return nil, err
	}
	return &fsop.GlobResult{Pattern: res.Pattern, Matches: entriesOf(res.Matches), Truncated: res.Truncated}, nil
}

func (r *remoteSession) Search(ctx context.Context, expr, unsafePath string, o sandbox.SearchOptions) (*fsop.SearchResult, error) {
	res, err := r.c.Search(ctx, r.id, api.Search{Regexp: expr, Path: unsafePath, Include: o.Include, IgnoreCase: o.IgnoreCase, Max: o.MaxResults})
	if err != nil {
		return nil, err
	}
	out := &fsop.SearchResult{Pattern: res.Pattern, Path: res.Path, Matches: make([]fsop.Match, len(res.Matches)), Truncated: res.Truncated,
		FilesSearched: res.FilesSearched, SkippedBinary: res.SkippedBinary, SkippedLarge: res.SkippedLarge}
	for i, m := range res.Matches {
		out.Matches[i] = fsop.Match(m)
	}
	return out, nil
}

func (r *remoteSession) Write(ctx context.Context, unsafePath string, content []byte, expectedSHA256 string) (*fsop.WriteResult, error) {
	req := api.Write{Path: unsafePath, ExpectedSHA256: expectedSHA256}
	if utf8.Valid(content) && len(content) > 0 {
		req.Content = string(content)
	} else {
		req.ContentB64 = content
		if req.ContentB64 == nil {
			req.ContentB64 = []byte{}
		}
	}
	res, err := r.c.Write(ctx, r.id, req)
	if err != nil {
		return nil, err
	}
	out := fsop.WriteResult(*res)
	return &out, nil
}

func (r *remoteSession) Edit(ctx context.Context, unsafePath, oldText, newText, expectedSHA256 string, all bool) (*fsop.WriteResult, error) {
	res, err := r.c.Edit(ctx, r.id, api.Edit{Path: unsafePath, Old: oldText, New: newText, ExpectedSHA256: expectedSHA256, All: all})
	if err != nil {
		return nil, err
	}
	out := fsop.WriteResult(*res)
	return &out, nil
}

func (r *remoteSession) Exec(ctx context.Context, argv []string) (*sandbox.Result, error) {
	res, err := r.c.Exec(ctx, r.id, argv, nil, nil)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.last = res
	r.mu.Unlock()
	return resultOf(res), nil
}

func (r *remoteSession) Changes(ctx context.Context) (*changeset.Set, error) { return r.changes(ctx) }

// CallChanges is the change set after the latest Exec (its answer
// carried it) and the violations that call introduced.
func (r *remoteSession) CallChanges(ctx context.Context) (*changeset.Set, []changeset.Problem, error) {
	r.mu.Lock()
	last := r.last
	r.mu.Unlock()
	if last == nil {
		cs, err := r.changes(ctx)
		return cs, nil, err
	}
	return setOf(last.Changes, last.Violations), problemsOf(last.NewViolations), nil
}

// endedOf is a daemon's removal as a standalone session's end reports it.
func endedOf(r *api.Removed) sandbox.Ended {
	return sandbox.Ended{ID: r.Removed, Repo: r.Repo, Patch: r.Patch, Changes: r.Changes, Violations: problemsOf(r.Violations), Lost: r.Lost}
}

// reportOf is an API report as package review gives it.
func reportOf(r *api.Report) *review.Report {
	if r == nil {
		return nil
	}
	out := &review.Report{Items: make([]review.Item, len(r.Items)), DryRun: r.DryRun, Written: r.Written}
	for i, it := range r.Items {
		lv, _ := review.ParseLevel(it.Risk.Level)
		out.Items[i] = review.Item{Path: it.Path, Kind: changeset.Kind(it.Kind), BeforeSHA256: it.BeforeSHA256, AfterSHA256: it.AfterSHA256,
			Size: it.Size, Risk: review.Risk{Level: lv, Reasons: it.Risk.Reasons}, Token: it.Token, Status: review.Status(it.Status), Detail: it.Detail}
	}
	return out
}

// reportDiffs is each item's patch as the daemon rendered it.
func reportDiffs(r *api.Report) diffFunc {
	byPath := map[string]api.Item{}
	if r != nil {
		for _, it := range r.Items {
			byPath[it.Path] = it
		}
	}
	return func(path string) (string, error, bool) {
		it, ok := byPath[path]
		switch {
		case !ok:
			return "", nil, false
		case it.DiffError != "":
			return "", errors.New(it.DiffError), true
		case it.Diff == "":
			return "", nil, false
		}
		return it.Diff, nil, true
	}
}

// applyRemote is `corral session apply` through a daemon: the review
// there, the report, approvals and exit codes here as applyChangeSet
// has them.
func applyRemote(cmd *cobra.Command, c *client.Client, af *applyFlags, id string) error {
	ctx := cmd.Context()
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	for _, s := range af.dryRunOnly {
		if _, err := review.ParseLevel(s); err != nil {
			return usageError(fmt.Errorf("--dry-run-only: %w", err))
		}
	}
	req := api.Apply{DryRunOnly: af.dryRunOnly, Diffs: !af.json}
	// answer splits an apply's answer into its report and error.
	answer := func(rep *api.Report, err error) (*api.Report, error) {
		var ce *client.Error
		if err != nil && errors.As(err, &ce) && ce.Report != nil {
			rep = ce.Report
		}
		return rep, err
	}
	write := func(tokens []string) error {
		req := req
		req.Approve = tokens
		rep, err := answer(c.Apply(ctx, id, req))
		if err != nil {
			if rep != nil && af.json {
				return writeReport(out, reportOf(rep), err)
			}
			return applyExit(err)
		}
		if len(rep.Items) == 0 {
			return noChanges(out, af.json)
		}
		if af.json {
			return writeJSON(out, reportOf(rep))
		}
		for _, p := range rep.Written {
			fmt.Fprintf(out, "applied %s\n", p)
		}
		for _, it := range rep.Items {
			if it.Status == string(review.StatusNotApproved) {
				fmt.Fprintf(errw, "corral: not approved, left out: %s\n", it.Path)
			}
		}
		return nil
	}
	if len(af.approve) > 0 {
		return write(af.approve)
	}
	arep, perr := answer(c.Apply(ctx, id, req))
	if arep == nil {
		return applyExit(perr)
	}
	if perr == nil && len(arep.Items) == 0 {
		return noChanges(out, af.json)
	}
	rep, diffs := reportOf(arep), reportDiffs(arep)
	if len(af.approve) == 0 && !af.json && isTerminal(cmd.InOrStdin()) {
		if perr != nil {
			printReport(out, rep, diffs, !af.noDiff)
			return applyExit(perr)
		}
		chosen, err := prompt(cmd.InOrStdin(), out, rep, diffs)
		if err != nil {
			return &exitError{code: exitFailed, err: err}
		}
		if len(chosen) == 0 {
			fmt.Fprintln(out, "nothing approved; nothing written")
			return nil
		}
		var tokens []string
		for _, it := range chosen { // approvals
			tokens = append(tokens, it.Token())
		}
		return write(tokens)
	}
	if af.json {
		return writeReport(out, rep, perr)
	}
	printReport(out, rep, diffs, !af.noDiff)
	printHowToApprove(out, rep)
	return applyExit(perr)
}

// noChanges is the answer of an apply to an empty change set.
func noChanges(out io.Writer, asJSON bool) error {
	if asJSON {
		return writeJSON(out, &review.Report{DryRun: true, Items: []review.Item{}, Written: []string{}})
	}
	fmt.Fprintln(out, "no changes")
	return nil
}
