package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/config"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/client"
	"github.com/spf13/cobra"
)

// globalFlags are the trusted launcher's choices shared by every command.
type globalFlags struct {
	address    string
	namespace  string
	stateDir   string
	runtime    string
	runtimeBin string
	image      string
	audit      string
	// daemon is the --daemon flag (resolved into cfg.DaemonSocket);
	// noDaemon forces standalone (see daemonClient).
	daemon   string
	noDaemon bool

	// configPath, logLevel and allowForeign are the configuration's own
	// flags (config.go); cfg is the resolved configuration (prepare),
	// configErr why it did not resolve (for doctor).
	configPath   string
	logLevel     string
	allowForeign bool
	cfg          config.Config
	configErr    error
}

// config is the executor configuration of a one-call process: containers
// are created on the call (a container prepared ahead would only be
// thrown away when the process ends). The long-lived server turns that off.
func (g *globalFlags) config(log io.Writer) sandbox.Config {
	return sandbox.Config{Address: g.address, Namespace: g.namespace, StateDir: g.stateDir, Runtime: g.runtime, RuntimeBinary: g.runtimeBin, Image: g.image, Log: g.progress(log, defaultCLILevel), Cold: true,
		AuditFile: g.audit}
}

func newRootCommand() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "corral",
		Short:         "Run each agent tool call in its own locked-down container",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Subcommands must not set PersistentPreRunE of their own (it
		// would replace this one).
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return g.prepare(cmd) },
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.address, "address", "", "containerd socket (default $CORRAL_ADDRESS, $CONTAINERD_ADDRESS, config address, else "+sandbox.DefaultAddress+")")
	pf.StringVar(&g.namespace, "namespace", sandbox.DefaultNamespace, "containerd namespace")
	pf.StringVar(&g.stateDir, "state-dir", sandbox.DefaultStateDir, "corral's state directory (sessions, mounts, FIFOs)")
	pf.StringVar(&g.runtime, "runtime", sandbox.DefaultRuntime, "OCI runtime: "+sandbox.RuntimeNames()+" (docs/runtimes.md), or a containerd shim type io.containerd.<name>.v<N>")
	pf.StringVar(&g.runtimeBin, "runtime-binary", "", "the runtime's binary (a path, or a name in PATH) instead of the runtime's own; runc v2 shim runtimes only")
	pf.StringVar(&g.audit, "audit", "", "also append the audit events (JSON lines) to FILE; they always go to STATE-DIR/audit.log")
	pf.StringVar(&g.image, "image", "", "tools image (default "+sandbox.DefaultImageRef+", built from this machine's binaries on first use)")
	pf.StringVar(&g.daemon, "daemon", "", "go through the corral daemon on this socket (default $"+client.EnvSocket+", config daemon_socket, else "+api.DefaultSocket+" when it answers and no executor flag is given)")
	pf.BoolVar(&g.noDaemon, "no-daemon", false, "run standalone, in this process, even when a daemon answers")
	g.addConfigFlags(pf)
	root.AddCommand(newVersionCommand(), newDoctorCommand(g), newManCommand())
	root.AddCommand(newRunCommand(g), newCheckCommand(), newImageCommand(g), newGCCommand(g), newProfilesCommand(), newApplyCommand(g))
	root.AddCommand(newSessionCommand(g), newServeCommand(g), newFSCommand(), newDaemonCommand(g), newPatchesCommand(g))
	return root
}

// sessionFlags fix a session's capability.
type sessionFlags struct {
	repo     string
	volume   string
	profile  string
	page     string
	readOnly bool
	json     bool
	quiet    bool
}

func (s *sessionFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.repo, "repo", "", "repository root (required unless --volume)")
	f.StringVar(&s.volume, "volume", "", volumeUsage)
	f.StringVar(&s.profile, "profile", profiles.DefaultName, "profile: a built-in name or a YAML file")
	f.StringVar(&s.page, "page", "", "page mode: the only writable file, e.g. openwiki/pages/a.md")
	f.BoolVar(&s.readOnly, "read-only", false, "no writable path at all")
	f.BoolVar(&s.json, "json", false, "print a JSON result object")
	// Everything after the command name belongs to the command.
	f.SetInterspersed(false)
}

func argvFrom(cmd *cobra.Command, args []string) ([]string, error) {
	if cmd.ArgsLenAtDash() < 0 && len(args) > 0 && strings.HasPrefix(args[0], "-") {
		return nil, usageError(fmt.Errorf("put the command after --: corral %s [flags] -- CMD ARG...", cmd.Name()))
	}
	if len(args) == 0 {
		alt := ""
		if cmd.Flags().Lookup("explain") != nil {
			alt = ", or --explain PATH"
		}
		return nil, usageError(fmt.Errorf("no command given: corral %s [flags] -- CMD ARG...%s", cmd.Name(), alt))
	}
	return args, nil
}

// runOutput is the JSON result object of `corral run` and `corral
// session exec`. ExitCode is the process's exit code, ToolExitCode the
// tool's own status (128+N when a signal N ended it; 137 whenever the output
// limit was hit, see sandbox.Result.ExitCode); Error is set when
// corral's verdict replaced the tool's status (a limit, a rejected change
// set).
type runOutput struct {
	*sandbox.Result
	ExitCode     int                 `json:"exit_code"`
	ToolExitCode int                 `json:"tool_exit_code"`
	Error        *jsonError          `json:"error,omitempty"`
	DurationMS   float64             `json:"duration_ms"`
	Stdout       string              `json:"stdout"`
	Stderr       string              `json:"stderr"`
	Changes      []changeset.Change  `json:"changes"`
	Violations   []changeset.Problem `json:"violations"`
	// NewViolations are the violations this call introduced; the exit
	// code is 123 exactly when there are any.
	NewViolations []changeset.Problem `json:"new_violations"`
	Session       string              `json:"session,omitempty"`
}

type refusalOutput struct {
	Kind  allowlist.Kind `json:"kind"`
	Index int            `json:"index"`
	Token string         `json:"token"`
	Rule  string         `json:"rule"`
}

func refusalJSON(r *allowlist.Refusal) *refusalOutput {
	return &refusalOutput{Kind: r.Kind, Index: r.Index, Token: r.Token, Rule: r.Rule}
}

func newRunCommand(g *globalFlags) *cobra.Command {
	sf := &sessionFlags{}
	var diffOut string
	cmd := &cobra.Command{
		Use:   "run --repo DIR [flags] -- CMD ARG...",
		Short: "Run one allowlisted command in a fresh container over the repository",
		Long: `Checks the argv against the profile before anything starts, runs it in a fresh
container (read-only view of the repository minus hidden paths, writable
openwiki/ or one page, no network, seccomp, no capabilities, uid 65534),
streams its output and exits with its exit code. The change set is
collected from the write area; --diff-out writes it as a unified patch.
The repository itself is never written.

Exit codes: the tool's own; 123 this call made the change set rejected;
124 a limit killed the tool; 125 corral failed; 126 refused by policy
(nothing started). With --json the result object's exit_code is the
process's, tool_exit_code the tool's own.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			argv, err := argvFrom(cmd, args)
			if err != nil {
				return err
			}
			return runOnce(cmd, g, sf, diffOut, argv)
		},
	}
	sf.add(cmd)
	cmd.Flags().StringVar(&diffOut, "diff-out", "", "write the change set as a unified patch (git apply-able) to FILE")
	cmd.Flags().BoolVarP(&sf.quiet, "quiet", "q", false, quietUsage)
	return cmd
}

// quietUsage is the --quiet flag's help of run and session exec.
const quietUsage = "print nothing of corral's own on stderr but what explains a non-tool exit code (no change-set summary, no progress)"

func loadProfile(name string) (*profiles.Profile, error) {
	p, err := profiles.Load(name)
	if err != nil {
		return nil, &exitError{code: exitFailed, err: err}
	}
	return p, nil
}

func runOnce(cmd *cobra.Command, g *globalFlags, sf *sessionFlags, diffOut string, argv []string) error {
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()
	prof, err := loadProfile(sf.profile)
	if err != nil {
		return err
	}
	if sf.page != "" && sf.readOnly {
		return usageError(errors.New("--page and --read-only exclude each other"))
	}
	if err := checkRepoOrVolume(sf.repo, sf.volume); err != nil {
		return err
	}
	cfg := sandbox.SessionConfig{Repo: sf.repo, Profile: prof, Page: sf.page, ReadOnly: sf.readOnly}
	o := reportOptions{json: sf.json, quiet: sf.quiet, diffOut: diffOut}
	c, err := g.daemonClient(cmd)
	if err != nil {
		return err
	}
	if c == nil && sf.volume != "" {
		return usageError(errVolumeNeedsDaemon)
	}
	if c != nil {
		// A session of the daemon for this one call, removed after it
		// with what it wrote, as a standalone run's.
		defer c.Close()
		req, err := createRequest(cfg, profileSource(sf.profile), sf.volume)
		if err != nil {
			return err
		}
		s, err := c.CreateSession(ctx, req)
		if err != nil {
			return refusalOr(err)
		}
		defer c.DiscardSession(context.WithoutCancel(ctx), s.ID)
		return execAndReport(cmd, &remoteSession{c: c, id: s.ID, prof: prof}, argv, o, "")
	}
	log := stderr
	if sf.quiet {
		log = io.Discard
	}
	if err := g.checkPlacement(sf.repo); err != nil {
		return err
	}
	exec, err := sandbox.New(ctx, g.config(log))
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	defer exec.Close()
	sess, err := exec.NewSession(ctx, cfg)
	if err != nil {
		return refusalOr(err)
	}
	defer sess.Close()
	return execAndReport(cmd, localSession{sess}, argv, o, "")
}

// caller is the session execAndReport runs a command in: one in this
// process (localSession) or one of corral's daemon (remoteSession).
type caller interface {
	// call runs argv, streaming its output to stdout and stderr unless
	// they are nil, and collects the change set after it.
	call(ctx context.Context, argv []string, stdout, stderr io.Writer) (*callResult, error)
	// patch renders the session's change set cs (as call returned it,
	// without violations) as a unified patch.
	patch(ctx context.Context, cs *changeset.Set) ([]byte, error)
	// profile is the session's profile, which the lines describing a
	// limit hit quote; only a call that hit one asks for it (a daemon's
	// session fetches it then, so that a call within its limits costs
	// one exchange with the daemon and no profile parsing).
	profile(ctx context.Context) (*profiles.Profile, error)
}

// callResult is a call's outcome: the result, the session's change set
// after it, the violations the call introduced and the set's summary.
type callResult struct {
	res        *sandbox.Result
	cs         *changeset.Set
	introduced []changeset.Problem
	stat       func() string
}

// localSession is a session in this process.
type localSession struct{ *sandbox.Session }

func (l localSession) call(ctx context.Context, argv []string, stdout, stderr io.Writer) (*callResult, error) {
	res, err := l.Exec(ctx, argv, stdout, stderr)
	if err != nil {
		return nil, refusalOr(err)
	}
	// Exit 123 belongs to the call that made a violation: a later call
	// exits with the tool's own code while the set stays rejected.
	cs, introduced, err := l.CallChangesContext(ctx)
	if err != nil {
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("collecting the change set: %w", err)}
	}
	return &callResult{res: res, cs: cs, introduced: introduced, stat: cs.Stat}, nil
}

func (l localSession) patch(_ context.Context, cs *changeset.Set) ([]byte, error) {
	return changeset.Patch(cs)
}

func (l localSession) profile(context.Context) (*profiles.Profile, error) { return l.Profile, nil }

// reportOptions are how execAndReport reports.
type reportOptions struct {
	json    bool   // a JSON result object instead of streamed output
	quiet   bool   // no change-set summary on stderr
	diffOut string // write the change set as a patch to this file
}

// execAndReport runs argv in the session and reports like `corral run`:
// streamed output or a JSON object, the change set, the exit code. The
// JSON names session id when it is not "".
func execAndReport(cmd *cobra.Command, sess caller, argv []string, o reportOptions, id string) error {
	asJSON, diffOut := o.json, o.diffOut
	ctx, cancel := context.WithCancelCause(cmd.Context())
	defer cancel(nil)
	stdout := &pipeWriter{w: cmd.OutOrStdout(), cancel: cancel}
	stderr := &pipeWriter{w: cmd.ErrOrStderr(), cancel: cancel}
	var streamOut, streamErr io.Writer = stdout, stderr
	if asJSON {
		streamOut, streamErr = nil, nil
	}
	cr, err := sess.call(ctx, argv, streamOut, streamErr)
	if stdout.broken.Load() || stderr.broken.Load() {
		// The reader went away: the tool was killed (ctx), the caller's
		// deferred Close cleans up; no verdict can be printed.
		return &exitError{code: exitPipe, printed: true}
	}
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return err
		}
		return refusalOr(err)
	}
	res, cs, introduced := cr.res, cr.cs, cr.introduced
	if diffOut != "" && cs.Err() == nil {
		patch, err := sess.patch(ctx, cs)
		if err != nil {
			return &exitError{code: exitFailed, err: err}
		}
		if err := os.WriteFile(diffOut, patch, 0o644); err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("writing --diff-out: %w", err)}
		}
	}
	code := res.ExitCode
	if res.Killed() {
		code = exitLimit
	}
	if len(introduced) > 0 {
		code = exitRejected
	}
	// prof is the profile when the report quotes it (a limit was hit or
	// the output cut), else nil; describeLimit names the limit alone
	// when it could not be had.
	var prof *profiles.Profile
	if len(res.LimitsHit) > 0 || res.StdoutTruncated || res.StderrTruncated {
		prof, _ = sess.profile(ctx)
	}
	var verdict error // corral's reason when code is not the tool's
	switch code {
	case exitRejected:
		verdict = (&changeset.Set{Violations: introduced}).Err()
	case exitLimit:
		var why []string
		for _, l := range res.LimitsHit {
			why = append(why, describeLimit(l, prof))
		}
		verdict = fmt.Errorf("limit hit: %s", strings.Join(why, "; "))
	}
	if asJSON {
		out := runOutput{
			Result: res, ExitCode: code, ToolExitCode: res.ExitCode,
			DurationMS: float64(res.Duration.Microseconds()) / 1000,
			Stdout:     string(res.Stdout), Stderr: string(res.Stderr),
			Changes: cs.Changes, Violations: cs.Violations, NewViolations: introduced,
		}
		if out.Violations == nil {
			out.Violations = []changeset.Problem{}
		}
		if out.NewViolations == nil {
			out.NewViolations = []changeset.Problem{}
		}
		if verdict != nil {
			out.Error = jsonErrorOf(code, verdict)
		}
		out.Session = id
		if err := writeJSON(stdout, out); err != nil || stdout.broken.Load() {
			if stdout.broken.Load() {
				return &exitError{code: exitPipe, printed: true}
			}
			return err
		}
		if code != 0 {
			return &exitError{code: code, printed: true}
		}
		return nil
	}
	for _, l := range res.LimitsHit {
		fmt.Fprintf(stderr, "corral: limit hit: %s\n", describeLimit(l, prof))
	}
	if res.StdoutTruncated || res.StderrTruncated {
		limit := "the profile's output cap"
		if prof != nil {
			limit = prof.Resources.Output
		}
		fmt.Fprintf(stderr, "corral: output cut at %s per stream\n", limit)
	}
	if len(cs.Changes) > 0 && !o.quiet {
		fmt.Fprintf(stderr, "corral: %s", cr.stat())
	}
	switch {
	case len(introduced) > 0:
		fmt.Fprintf(stderr, "corral: this call made the change set rejected: %v\n", verdict)
	case cs.Err() != nil && !o.quiet:
		fmt.Fprintf(stderr, "corral: the change set is still rejected (by an earlier call): %v\n", cs.Err())
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// errBrokenPipe is the cause of a call cancelled because its output's
// reader went away.
var errBrokenPipe = errors.New("the output's reader went away (EPIPE)")

// pipeWriter forwards to w until a write fails with EPIPE: then it
// cancels the call (the tool is killed, as a shell pipeline's SIGPIPE
// would end it) and drops the rest.
type pipeWriter struct {
	w      io.Writer
	cancel context.CancelCauseFunc
	broken atomic.Bool
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	if p.broken.Load() {
		return len(b), nil
	}
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.broken.Store(true)
		p.cancel(errBrokenPipe)
		return len(b), nil
	}
	return n, err
}

// describeLimit says what limit l of profile p (nil: unknown) did.
func describeLimit(l string, p *profiles.Profile) string {
	if p == nil {
		return l
	}
	lim := p.Limits()
	switch l {
	case sandbox.LimitTimeout:
		return fmt.Sprintf("timeout after %s; the tool was killed", lim.Timeout)
	case sandbox.LimitMemory:
		return fmt.Sprintf("out of memory at %d MiB; the OOM killer ended a process", lim.MemoryBytes>>20)
	case sandbox.LimitPids:
		return fmt.Sprintf("process limit %d reached; a fork failed", lim.Pids)
	case sandbox.LimitOutput:
		return fmt.Sprintf("output passed %d bytes; the tool was killed", lim.OutputBytes)
	case sandbox.LimitWriteArea:
		return fmt.Sprintf("write area full (%d MiB, %d inodes)", lim.WriteAreaBytes>>20, lim.WriteInodes)
	}
	return l
}

// refusalOr turns a policy refusal into exit 126 and anything else into
// exit 125; execute prints either as JSON when asked.
// checkPlacement refuses a repository and a state directory nested in
// either order (mounts.CheckPaths) before sandbox.New creates the state
// directory and its audit log, which must never land in the repository.
// An empty repo (a session opened by ID) passes.
func (g *globalFlags) checkPlacement(repo string) error {
	if repo == "" {
		return nil
	}
	state := g.stateDir
	if state == "" {
		state = sandbox.DefaultStateDir
	}
	if err := mounts.CheckPaths(repo, state); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	return nil
}

func refusalOr(err error) error {
	var r *allowlist.Refusal
	if !errors.As(err, &r) {
		return &exitError{code: exitFailed, err: err}
	}
	return &exitError{code: exitRefused, err: r}
}
