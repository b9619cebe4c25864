package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// capFlags are the capability a launcher fixes when it creates a session:
// the repository, the profile and the write scope.
type capFlags struct {
	repo     string
	volume   string
	profile  string
	scope    string
	page     string
	agentID  string
	readOnly bool
}

func (c *capFlags) add(f *pflag.FlagSet) {
	f.StringVar(&c.repo, "repo", "", "repository root (required unless --volume)")
	f.StringVar(&c.profile, "profile", profiles.DefaultName, "profile: a built-in name or a YAML file")
	f.StringVar(&c.scope, "scope", "", "writable directory: openwiki/ (the default) or a directory below it")
	f.StringVar(&c.page, "page", "", "page mode: the only writable file, e.g. openwiki/pages/a.md")
	f.StringVar(&c.agentID, "agent-id", "", "agent mode: the writable directory is openwiki/agents/ID/ (ID: a-z, 0-9, '_', '-')")
	f.BoolVar(&c.readOnly, "read-only", false, "no writable path at all")
}

// config loads the profile and returns the session configuration and how
// the profile was named (a built-in name, or the file's absolute path).
func (c *capFlags) config() (sandbox.SessionConfig, string, error) {
	if err := checkRepoOrVolume(c.repo, c.volume); err != nil {
		return sandbox.SessionConfig{}, "", err
	}
	if c.page != "" && c.readOnly {
		return sandbox.SessionConfig{}, "", usageError(errors.New("--page and --read-only exclude each other"))
	}
	prof, err := loadProfile(c.profile)
	if err != nil {
		return sandbox.SessionConfig{}, "", err
	}
	return sandbox.SessionConfig{Repo: c.repo, Profile: prof, Page: c.page, WriteDir: c.scope, AgentID: c.agentID, ReadOnly: c.readOnly}, profileSource(c.profile), nil
}

func newSessionCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Persistent sessions: writes add up across invocations and corral processes",
		Long: `A session fixes a capability once (repository, profile, write scope) and
keeps its write area between invocations: every invocation is still a fresh
container, but what one writes the next one sees. Its state lives under the
state directory and survives a restart of corral; gc leaves it alone.
'corral session rm' removes it; one unused for its idle TTL expires
('corral session prune', and every corral start, keep its change set as a
patch file). The write area is a tmpfs: a reboot loses it. 'session ls',
'session diff' and 'session apply' need no containerd.`,
	}
	cmd.AddCommand(newSessionCreateCommand(g), newSessionExecCommand(g), newSessionLsCommand(g),
		newSessionRmCommand(g), newSessionDiffCommand(g), newSessionApplyCommand(g), newSessionPruneCommand(g))
	return cmd
}

func newSessionCreateCommand(g *globalFlags) *cobra.Command {
	cf := &capFlags{}
	var asJSON bool
	var idleTTL time.Duration
	cmd := &cobra.Command{
		Use:   "create --repo DIR | --volume NAME[/SUBPATH] [--profile NAME] [--scope openwiki/DIR/ | --page openwiki/PATH | --agent-id ID] [--read-only] [--idle-ttl DURATION]",
		Short: "Create a persistent session and print its id",
		Long: `Fixes the session's capability, computes the hidden set from the repository
as it is now, makes the host mounts and prints the session id (a JSON record
with --json). The capability never changes afterwards: nothing an agent
sends, nor a later edit of the profile file or of an ignore file, widens it.

A session unused for its idle TTL (the profile's idle_ttl, default 24h;
--idle-ttl may only shorten it) expires: 'corral session prune', and every
corral start, remove it and keep its change set as a patch file under
STATE-DIR/patches/.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cfg, source, err := cf.config()
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("idle-ttl") {
				if idleTTL <= 0 {
					return usageError(fmt.Errorf("--idle-ttl %s: %w: a session always ends; want a positive duration", idleTTL, errdefs.ErrInvalidArgument))
				}
				cfg.IdleTTL = idleTTL
			}
			c, err := g.daemonClient(cmd)
			if err != nil {
				return err
			}
			var rec sandbox.SessionRecord
			if c != nil {
				defer c.Close()
				req, err := createRequest(cfg, source, cf.volume)
				if err != nil {
					return err
				}
				s, err := c.CreateSession(ctx, req)
				if err != nil {
					return refusalOr(err)
				}
				rec = recordOf(s)
			} else {
				if cf.volume != "" {
					return usageError(errVolumeNeedsDaemon)
				}
				if err := g.checkPlacement(cfg.Repo); err != nil {
					return err
				}
				exec, err := sandbox.New(ctx, g.config(cmd.ErrOrStderr()))
				if err != nil {
					return &exitError{code: exitFailed, err: err}
				}
				defer exec.Close()
				sess, err := exec.CreateSession(ctx, cfg, source)
				if err != nil {
					return refusalOr(err)
				}
				defer sess.Close()
				rec = printable(*sess.Record())
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), &rec)
			}
			fmt.Fprintln(cmd.OutOrStdout(), rec.ID)
			return nil
		},
	}
	cf.add(cmd.Flags())
	cmd.Flags().StringVar(&cf.volume, "volume", "", volumeUsage)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the session record as JSON")
	cmd.Flags().DurationVar(&idleTTL, "idle-ttl", 0, "expire the session after this long unused (at most the profile's idle_ttl, default 24h)")
	return cmd
}

// pruneOutput is `session prune --json`'s result.
type pruneOutput struct {
	Pruned   []sandbox.Ended `json:"pruned"`
	Error    *jsonError      `json:"error,omitempty"`
	ExitCode int             `json:"exit_code"`
}

// pruneSessions removes the expired sessions: the daemon's the caller may
// see (each past its idle TTL), or the state directory's no process
// holds.
func pruneSessions(cmd *cobra.Command, g *globalFlags) ([]sandbox.Ended, error) {
	c, err := g.daemonClient(cmd)
	if err != nil {
		return nil, err
	}
	if c != nil {
		defer c.Close()
		p, err := c.Prune(cmd.Context(), "")
		if err != nil {
			return nil, err
		}
		out := make([]sandbox.Ended, 0, len(p.Pruned))
		for i := range p.Pruned {
			out = append(out, endedOf(&p.Pruned[i]))
		}
		return out, nil
	}
	exec, err := sandbox.New(cmd.Context(), g.config(io.Discard))
	if err != nil {
		return nil, &exitError{code: exitFailed, err: err}
	}
	defer exec.Close()
	return exec.Prune(cmd.Context())
}

func newSessionPruneCommand(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "prune [--json]",
		Short: "Remove expired sessions, keeping each change set as a patch file",
		Long: `Removes every persistent session that has gone unused for longer than its
idle TTL and that no corral process has open. Each non-empty change set is
kept first as STATE-DIR/patches/ID.patch (a unified patch, git apply-able;
changes the set was rejected for are listed, not kept) and listed. Needs no
containerd. Every corral start also prunes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pruned, err := pruneSessions(cmd, g)
			out := pruneOutput{Pruned: pruned}
			if err != nil {
				out.Error, out.ExitCode = jsonErrorOf(exitFailed, err), exitFailed
			}
			if asJSON {
				if werr := writeJSON(cmd.OutOrStdout(), out); werr != nil {
					return werr
				}
			} else {
				for _, p := range pruned {
					fmt.Fprintln(cmd.OutOrStdout(), describeEnded(p))
				}
			}
			if err != nil {
				return &exitError{code: exitFailed, err: err, printed: asJSON}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object: the sessions pruned and their patch files")
	return cmd
}

// describeEnded says in one line what became of an ended session's
// change set.
func describeEnded(p sandbox.Ended) string {
	var what string
	switch {
	case p.Lost != "":
		what = "its change set is lost: " + p.Lost
	case p.Patch != "":
		what = fmt.Sprintf("%d change(s) kept in %s", p.Changes, p.Patch)
	default:
		what = "no change to keep"
	}
	if len(p.Violations) > 0 {
		what += fmt.Sprintf("; %d rejected change(s) not kept:", len(p.Violations))
		for _, v := range p.Violations {
			what += fmt.Sprintf(" %s (%s)", v.Path, v.Reason)
		}
	}
	return fmt.Sprintf("removed %s: %s", p.ID, what)
}

func newSessionExecCommand(g *globalFlags) *cobra.Command {
	var o reportOptions
	cmd := &cobra.Command{
		Use:   "exec [--json] [--quiet] [--diff-out FILE] ID -- CMD ARG...",
		Short: "Run one allowlisted command in a fresh container of the session",
		Long: `Re-opens the session (its recorded capability, profile and hidden set),
checks the argv against the profile before anything starts and runs it in a
fresh container over the session's write area. Output, JSON and exit codes
are those of 'corral run'; the change set reported is the session's whole
change set so far. Exit 123 is the call's that introduced a violation: a
later call exits with the tool's own code (stderr notes that the set is
still rejected), while 'session diff' and 'session apply' refuse the set
until it is fixed.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return usageError(errors.New("usage: corral session exec [flags] ID -- CMD ARG..."))
			}
			ctx := cmd.Context()
			c, err := g.daemonClient(cmd)
			if err != nil {
				return err
			}
			if c != nil {
				// One exchange with the daemon: no profile (see
				// caller.profile), no containerd, no repository.
				defer c.Close()
				return execAndReport(cmd, &remoteSession{c: c, id: args[0]}, args[1:], o, args[0])
			}
			log := cmd.ErrOrStderr()
			if o.quiet {
				log = io.Discard
			}
			exec, err := sandbox.New(ctx, g.config(log))
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			defer exec.Close()
			sess, err := exec.OpenSession(ctx, args[0])
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			defer sess.Close()
			return execAndReport(cmd, localSession{sess}, args[1:], o, sess.ID)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print a JSON result object")
	cmd.Flags().StringVar(&o.diffOut, "diff-out", "", "write the session's change set as a unified patch to FILE")
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, quietUsage)
	return cmd
}

func newSessionLsCommand(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the persistent sessions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := listSessions(cmd, g)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tCREATED\tEXPIRES\tPROFILE\tSCOPE\tMOUNTED\tREPO")
			for _, s := range list {
				if s.Err != "" {
					fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t%v\t(%s)\n", s.ID, s.Mounted, s.Err)
					continue
				}
				scope := s.Scope
				if s.ReadOnly {
					scope = "(read-only)"
				}
				expires := s.Expires.Local().Format(time.DateTime)
				if s.InUse {
					expires = "(in use)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\n", s.ID, s.Created.Local().Format(time.DateTime), expires, s.ProfileName, scope, s.Mounted, s.Repo)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

// listSessions lists the persistent sessions: the daemon's that the
// caller may see, or the state directory's.
func listSessions(cmd *cobra.Command, g *globalFlags) ([]sandbox.SessionInfo, error) {
	c, err := g.daemonClient(cmd)
	if err != nil {
		return nil, err
	}
	if c != nil {
		defer c.Close()
		ss, err := c.Sessions(cmd.Context())
		if err != nil {
			return nil, &exitError{code: exitFailed, err: err}
		}
		list := make([]sandbox.SessionInfo, len(ss))
		for i := range ss {
			list[i] = sandbox.SessionInfo{SessionRecord: recordOf(&ss[i]), Mounted: ss[i].Mounted, Err: ss[i].Error,
				LastUsed: ss[i].LastUsed, Expires: ss[i].LastUsed.Add(time.Duration(ss[i].IdleTTLNS))}
			if ss[i].State == api.StateLost && list[i].Err == "" {
				list[i].Err = "lost: " + ss[i].StateReason
			}
		}
		return list, nil
	}
	exec, err := sandbox.New(cmd.Context(), g.config(cmd.ErrOrStderr()))
	if err != nil {
		return nil, &exitError{code: exitFailed, err: err}
	}
	defer exec.Close()
	list, err := exec.Sessions()
	if err != nil {
		return nil, &exitError{code: exitFailed, err: err}
	}
	for i := range list {
		list[i].SessionRecord = printable(list[i].SessionRecord)
	}
	return list, nil
}

// printable is a session record as the CLI prints it: without the
// repository's device and inode, which the record keeps for its own
// identity check when mounts are made again (they are not part of what
// a session is to its user, and the daemon's API does not carry them).
func printable(rec sandbox.SessionRecord) sandbox.SessionRecord {
	rec.RepoDev, rec.RepoIno = 0, 0
	return rec
}

// rmOutput is `session rm --json`'s result: the sessions removed, and
// the error when one could not be.
type rmOutput struct {
	Removed  []string   `json:"removed"`
	Error    *jsonError `json:"error,omitempty"`
	ExitCode int        `json:"exit_code"`
}

func newSessionRmCommand(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rm ID...",
		Short: "Remove persistent sessions: their containers, host mounts and state",
		Long: `Kills the session's running invocations, unmounts its host mounts and
removes its state directory. What the session wrote and did not apply is
gone: collect it first with 'corral session diff'.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			remove, done, err := sessionRemover(cmd, g)
			if err != nil {
				return err
			}
			defer done()
			var errs []error
			out := rmOutput{Removed: []string{}}
			for _, id := range args {
				if err := remove(id); err != nil {
					errs = append(errs, err)
					continue
				}
				out.Removed = append(out.Removed, id)
				if !asJSON {
					fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", id)
				}
			}
			err = errors.Join(errs...)
			if asJSON {
				if err != nil {
					out.Error, out.ExitCode = jsonErrorOf(exitFailed, err), exitFailed
				}
				if werr := writeJSON(cmd.OutOrStdout(), out); werr != nil {
					return werr
				}
			}
			if err != nil {
				return &exitError{code: exitFailed, err: err, printed: asJSON}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object: the sessions removed")
	return cmd
}

// sessionRemover returns a function that removes a session, through the
// daemon (its change set not kept, as standalone) or in this process, and
// one that lets go of what it holds.
func sessionRemover(cmd *cobra.Command, g *globalFlags) (remove func(id string) error, done func(), err error) {
	ctx := cmd.Context()
	c, err := g.daemonClient(cmd)
	if err != nil {
		return nil, nil, err
	}
	if c != nil {
		return func(id string) error {
			_, err := c.DiscardSession(ctx, id)
			return err
		}, func() { c.Close() }, nil
	}
	exec, err := sandbox.New(ctx, g.config(cmd.ErrOrStderr()))
	if err != nil {
		return nil, nil, &exitError{code: exitFailed, err: err}
	}
	return func(id string) error { return exec.RemoveSession(ctx, id) }, func() { exec.Close() }, nil
}

func newSessionDiffCommand(g *globalFlags) *cobra.Command {
	var format, output string
	cmd := &cobra.Command{
		Use:   "diff ID [--format patch|stat|json] [--output FILE]",
		Short: "Print the session's change set so far",
		Long: `Collects the session's change set from its write area: a unified patch
(git apply-able, the default), a summary (stat) or JSON. A rejected change
set (a symlink, an ignore file, a path outside the scope, ...) exits 123
and prints its violations; no patch is made of it.

What the agent wrote is not trusted to reach a terminal: when standard
output is a terminal, control characters (escape sequences), bidirectional
and invisible format characters are shown escaped (\x1b, <U+202E>), as
apply shows them. The patch keeps its bytes exactly when written to a file:
--output FILE, or standard output redirected. JSON escapes them always.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "patch" && format != "stat" && format != "json" {
				return usageError(fmt.Errorf("--format %q: %w: want patch, stat or json", format, errdefs.ErrInvalidArgument))
			}
			cs, done, err := sessionChanges(cmd, g, args[0], sandbox.ForChanges())
			if err != nil {
				return err
			}
			defer done()
			var buf bytes.Buffer
			rejected := cs.Err()
			switch format {
			case "json":
				v := diffOutput{Set: changeSetJSON(cs)}
				if rejected != nil {
					v.Error, v.ExitCode = jsonErrorOf(exitRejected, rejected), exitRejected
				}
				if err := writeJSON(&buf, v); err != nil {
					return err
				}
			case "stat":
				buf.WriteString(cs.Stat())
			case "patch":
				if rejected != nil {
					errw := cmd.ErrOrStderr()
					fmt.Fprint(errw, forTerminal(errw, cs.Stat()))
					break
				}
				patch, err := changeset.Patch(cs)
				if err != nil {
					return &exitError{code: exitFailed, err: err}
				}
				buf.Write(patch)
			}
			if output != "" {
				if format != "patch" || rejected == nil {
					if err := os.WriteFile(output, buf.Bytes(), 0o644); err != nil {
						return &exitError{code: exitFailed, err: fmt.Errorf("writing --output: %w", err)}
					}
				}
			} else {
				out := cmd.OutOrStdout()
				if _, err := io.WriteString(out, forTerminal(out, buf.String())); err != nil {
					return err
				}
			}
			if rejected != nil {
				return &exitError{code: exitRejected, err: rejected, printed: format == "json"}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "patch", "patch, stat or json")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to FILE (the patch byte for byte) instead of standard output")
	return cmd
}

// diffOutput is `session diff --format json`'s result: the change set,
// and for a rejected one the error and exit code 123.
type diffOutput struct {
	*changeset.Set
	Error    *jsonError `json:"error,omitempty"`
	ExitCode int        `json:"exit_code"`
}

// changeSetJSON is a change set with non-nil lists, for JSON output.
func changeSetJSON(cs *changeset.Set) *changeset.Set {
	out := &changeset.Set{Changes: cs.Changes, Violations: cs.Violations}
	if out.Changes == nil {
		out.Changes = []changeset.Change{}
	}
	if out.Violations == nil {
		out.Violations = []changeset.Problem{}
	}
	return out
}

// sessionChanges collects session id's change set, each change with its
// bytes: from the daemon, or in this process. The caller must call done.
func sessionChanges(cmd *cobra.Command, g *globalFlags, id string, opts ...sandbox.OpenOption) (cs *changeset.Set, done func(), err error) {
	c, err := g.daemonClient(cmd)
	if err != nil {
		return nil, nil, err
	}
	if c != nil {
		cs, err := (&remoteSession{c: c, id: id}).changes(cmd.Context())
		if err != nil {
			c.Close()
			return nil, nil, &exitError{code: exitFailed, err: err}
		}
		return cs, func() { c.Close() }, nil
	}
	exec, sess, cs, err := openSessionChanges(cmd, g, id, opts...)
	if err != nil {
		return nil, nil, err
	}
	return cs, func() { sess.Close(); exec.Close() }, nil
}

// openSessionChanges opens session id in a new executor and collects its
// change set (`session diff`, `session apply`). The caller must close the
// session, then the executor.
// Neither needs containerd: the writes are on a host tmpfs. opts are
// OpenSession's (diff: sandbox.ForChanges, which works after the
// repository moved or vanished; apply: none, so the repository is
// rescanned like at any way into the session).
func openSessionChanges(cmd *cobra.Command, g *globalFlags, id string, opts ...sandbox.OpenOption) (*sandbox.Executor, *sandbox.Session, *changeset.Set, error) {
	ctx := cmd.Context()
	exec, err := sandbox.New(ctx, g.config(cmd.ErrOrStderr()))
	if err != nil {
		return nil, nil, nil, &exitError{code: exitFailed, err: err}
	}
	sess, err := exec.OpenSession(ctx, id, opts...)
	if err != nil {
		exec.Close()
		return nil, nil, nil, &exitError{code: exitFailed, err: err}
	}
	cs, err := sess.Changes()
	if err != nil {
		sess.Close()
		exec.Close()
		return nil, nil, nil, &exitError{code: exitFailed, err: fmt.Errorf("collecting the change set: %w", err)}
	}
	return exec, sess, cs, nil
}
