package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/review"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// exitConflict is the exit code of an apply whose base no longer matches
// the repository: nothing was written.
const exitConflict = 3

const applyExitCodes = `Exit codes: 0 applied, or a dry run with nothing in the way; 3 conflict (a
base no longer matches the repository; nothing written); 126 refused (a
violation, a path outside the scope, an approval that matches no change, a
dry-run-only class, a symbolic link in the repository; nothing written);
125 corral failed.`

// applyFlags are the review choices shared by `corral apply` and
// `corral session apply`.
type applyFlags struct {
	approve    []string
	dryRunOnly []string
	json       bool
	noDiff     bool
}

func (a *applyFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&a.approve, "approve", nil, "approve the change with this token (repeatable); approved changes are written, all or none")
	f.StringSliceVar(&a.dryRunOnly, "dry-run-only", nil, "risk classes that are never applied, even when approved (low, medium, high)")
	f.BoolVar(&a.json, "json", false, "print the report as JSON")
	f.BoolVar(&a.noDiff, "no-diff", false, "do not print each change's diff")
}

// isTerminal reports whether r is an interactive terminal; tests replace
// it.
var isTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func newApplyCommand(g *globalFlags) *cobra.Command {
	af := &applyFlags{}
	var repo, patchFile, profile, page, scopeDir, agent string
	var recoverOnly bool
	cmd := &cobra.Command{
		Use:   "apply --repo DIR --patch FILE [--approve TOKEN]... | apply --recover",
		Short: "Review a patch and write the approved changes to the repository (dry run by default)",
		Long: `Reads a patch artifact (corral run --diff-out, CI, git diff) and puts it
through the same validation as a sandbox's own change set: only git-style
unified text diffs of regular files inside the write scope are accepted,
and a patch with anything else is refused as a whole. Nothing is ever
shelled out to patch or git apply.

Without --approve it is a dry run: each change is printed with its risk
class (recomputed from the bytes), the reasons, its diff and the token that
approves it. On a terminal, with no --approve, each change is offered in
turn (highest risk first) and the ones answered yes are written.
--approve TOKEN writes the changes those tokens name: a token is bound to
the change's path, kind, content and risk, so it approves nothing else.
Writes are all or none, atomic per file, and never follow a symbolic link
in the repository; a file changed since the patch was made is a conflict.
Each apply is a transaction journaled in STATE-DIR/apply: one interrupted
(the process killed, the machine down) is finished or rolled back by the
next apply, by ` + "`corral gc`" + `, or by ` + "`corral apply --recover`" + `, which does only that.

` + applyExitCodes,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if recoverOnly {
				return recoverApplies(cmd, g, af.json)
			}
			var missing []string
			for name, v := range map[string]string{"patch": patchFile, "repo": repo} {
				if v == "" {
					missing = append(missing, strconv.Quote(name))
				}
			}
			if len(missing) > 0 {
				slices.Sort(missing)
				return usageError(fmt.Errorf("required flag(s) %s not set", strings.Join(missing, ", ")))
			}
			prof, err := loadProfile(profile)
			if err != nil {
				return err
			}
			pol, err := sandbox.NewPolicy(sandbox.SessionConfig{Repo: repo, Profile: prof, Page: page, WriteDir: scopeDir, AgentID: agent})
			if err != nil {
				return applyExit(err)
			}
			data, err := readPatch(cmd, patchFile)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			log, err := audit.Open(g.stateDir, g.audit)
			if err != nil {
				return &exitError{code: exitFailed, err: fmt.Errorf("%w (pass a writable --state-dir)", err)}
			}
			defer log.Close()
			cs, err := review.ParsePatch(pol.Repo, data, pol.Scope, pol.View())
			if err != nil {
				err = fmt.Errorf("patch %s: %w", patchFile, err)
				if aerr := log.Log("", refusalEvent("patch", err)); aerr != nil {
					return &exitError{code: exitFailed, err: errors.Join(err, aerr)}
				}
				return applyExit(err)
			}
			digest, err := audit.DigestJSON(cs)
			if err == nil {
				err = log.Log("", &audit.ChangeSet{SHA256: digest, Changes: len(cs.Changes), Violations: len(cs.Violations)})
			}
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			return applyChangeSet(cmd, af, log, g.stateDir, "", pol.Repo, cs, pol.Scope, pol.View())
		},
	}
	f := cmd.Flags()
	f.StringVar(&repo, "repo", "", "repository root (required)")
	f.StringVar(&patchFile, "patch", "", "the patch to review, or - for standard input (required)")
	f.StringVar(&profile, "profile", profiles.DefaultName, "profile whose hidden paths the patch may not touch: a built-in name or a YAML file")
	f.StringVar(&page, "page", "", "page mode: the only path the patch may change, e.g. openwiki/pages/a.md")
	f.StringVar(&scopeDir, "scope", "", "the writable directory (default openwiki/)")
	f.StringVar(&agent, "agent", "", "agent id: the writable directory is openwiki/agents/ID/")
	f.BoolVar(&recoverOnly, "recover", false, "only finish or roll back interrupted applies (journaled in STATE-DIR/apply), then exit")
	af.add(cmd)
	return cmd
}

// newSessionApplyCommand is `corral session apply ID`: the session's
// change set, collected from its write area, through the same review.
func newSessionApplyCommand(g *globalFlags) *cobra.Command {
	af := &applyFlags{}
	cmd := &cobra.Command{
		Use:   "apply ID [--approve TOKEN]...",
		Short: "Review a session's change set and write the approved changes to its repository (dry run by default)",
		Long: `Collects the session's change set from its write area (validated: a
symbolic link, hard link, device, executable bit, forbidden name or path
outside the scope rejects the whole set) and reviews it as corral apply
does: a dry run by default, printing each change with its risk class,
reasons, diff and approval token; on a terminal each change is offered in
turn; --approve TOKEN writes the changes those tokens name, all or none.

` + applyExitCodes,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.daemonClient(cmd)
			if err != nil {
				return err
			}
			if c != nil {
				defer c.Close()
				return applyRemote(cmd, c, af, args[0])
			}
			// Apply is a way into the session like any call: it rescans
			// the repository (OpenSession without ForChanges).
			exec, sess, cs, err := openSessionChanges(cmd, g, args[0])
			if err != nil {
				return err
			}
			defer exec.Close()
			defer sess.Close()
			// Changes logged the set; Apply logs approvals and the apply
			// to the same log.
			return applyChangeSet(cmd, af, exec.Audit(), g.stateDir, args[0], sess.Repo, cs, sess.Scope, sess.View())
		},
	}
	af.add(cmd)
	return cmd
}

func readPatch(cmd *cobra.Command, name string) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, changeset.MaxPatchBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the patch: %w", err)
	}
	return data, nil
}

// applyChangeSet is the review shared by `corral apply` and `corral
// session apply`: preview, then approvals from --approve or a terminal
// prompt, then review.Apply, which checks them again. It prints to the
// command's output and returns an *exitError for a non-zero exit.
func applyChangeSet(cmd *cobra.Command, af *applyFlags, log *audit.Logger, stateDir, session, repo string, cs *changeset.Set, scope allowlist.Scope, view allowlist.View) error {
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	opts := review.Options{View: view, Audit: log, Session: session, JournalDir: review.JournalDir(stateDir)}
	for _, s := range af.dryRunOnly {
		l, err := review.ParseLevel(s)
		if err != nil {
			return usageError(fmt.Errorf("--dry-run-only: %w", err))
		}
		opts.DryRunOnly = append(opts.DryRunOnly, l)
	}
	if len(cs.Changes) == 0 && len(cs.Violations) == 0 {
		if af.json {
			return writeJSON(out, &review.Report{DryRun: true, Items: []review.Item{}, Written: []string{}})
		}
		fmt.Fprintln(out, "no changes")
		return nil
	}
	rep, perr := review.Preview(repo, cs, scope, opts)
	if rep == nil {
		return applyExit(perr)
	}
	changes := changeDiffs(cs)

	var approvals []review.Approval
	interactive := len(af.approve) == 0 && !af.json && isTerminal(cmd.InOrStdin())
	switch {
	case len(af.approve) > 0:
		a, err := review.ApprovalsFor(cs, scope, af.approve, opts)
		if err != nil {
			if aerr := log.Log(session, refusalEvent("approval", err)); aerr != nil {
				return &exitError{code: exitFailed, err: errors.Join(err, aerr)}
			}
			return applyExit(err)
		}
		approvals = a
	case interactive:
		if perr != nil {
			printReport(out, rep, changes, !af.noDiff)
			return applyExit(perr)
		}
		a, err := prompt(cmd.InOrStdin(), out, rep, changes)
		if err != nil {
			return &exitError{code: exitFailed, err: err}
		}
		if len(a) == 0 {
			fmt.Fprintln(out, "nothing approved; nothing written")
			return nil
		}
		approvals = a
	default:
		if af.json {
			return writeReport(out, rep, perr)
		}
		printReport(out, rep, changes, !af.noDiff)
		printHowToApprove(out, rep)
		if perr != nil {
			return applyExit(perr)
		}
		return nil
	}

	opts.Write = true
	res, err := review.Apply(repo, cs, scope, approvals, opts)
	if err != nil {
		if res != nil && af.json {
			return writeReport(out, res, err)
		}
		return applyExit(err)
	}
	if af.json {
		return writeJSON(out, res)
	}
	for _, p := range res.Written {
		fmt.Fprintf(out, "applied %s\n", p)
	}
	for _, it := range res.Items {
		if it.Status == review.StatusNotApproved {
			fmt.Fprintf(errw, "corral: not approved, left out: %s\n", it.Path)
		}
	}
	return nil
}

// refusalEvent converts a refusal for the audit log.
func refusalEvent(stage string, err error) *audit.Refusal {
	e := &audit.Refusal{Stage: stage, Error: err.Error()}
	var r *allowlist.Refusal
	if errors.As(err, &r) {
		e.Rule = r.Rule
	}
	return e
}

// recoverApplies finishes or rolls back the interrupted applies journaled
// in the state directory, records each in the audit log and prints them
// (with --json: the array of review.Recovered, or, when one could not be
// rolled back, a recoverOutput). A transaction that could not be rolled
// back exits 125 with what to restore by hand.
func recoverApplies(cmd *cobra.Command, g *globalFlags, asJSON bool) error {
	log, err := audit.Open(g.stateDir, g.audit)
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("%w (pass a writable --state-dir)", err)}
	}
	defer log.Close()
	recs, err := recoverAndLog(g.stateDir, log)
	for _, r := range recs {
		if r.Outcome == review.OutcomeStuck {
			err = errors.Join(err, fmt.Errorf("apply %s to %s could not be rolled back", r.TxID, r.Repo))
		}
	}
	out := cmd.OutOrStdout()
	if asJSON {
		if recs == nil {
			recs = []review.Recovered{}
		}
		var werr error
		if err != nil {
			werr = writeJSON(out, recoverOutput{Error: jsonErrorOf(exitFailed, err), Applies: recs, ExitCode: exitFailed})
		} else {
			werr = writeJSON(out, recs)
		}
		if werr != nil {
			return werr
		}
	} else {
		if len(recs) == 0 && err == nil {
			fmt.Fprintln(out, "no interrupted apply")
		}
		for _, r := range recs {
			fmt.Fprintf(out, "%s %s: %s\n", r.TxID, sanitize(r.Repo), r.Outcome)
			for _, p := range r.Left {
				fmt.Fprintf(out, "  restore by hand: %s: %s\n", sanitize(p.Path), sanitize(p.Reason))
			}
		}
	}
	if err != nil {
		return &exitError{code: exitFailed, err: err, printed: asJSON}
	}
	return nil
}

// recoverOutput is `apply --recover --json`'s result when it fails: the
// error, the transactions found (as on success) and exit code 125.
type recoverOutput struct {
	Error    *jsonError         `json:"error"`
	Applies  []review.Recovered `json:"applies"`
	ExitCode int                `json:"exit_code"`
}

// recoverAndLog runs review.Recover on the state directory's journal and
// records each transaction it found.
func recoverAndLog(stateDir string, log *audit.Logger) ([]review.Recovered, error) {
	recs, err := review.Recover(review.JournalDir(stateDir))
	for _, r := range recs {
		var left []string
		for _, p := range r.Left {
			left = append(left, p.Path+": "+p.Reason)
		}
		if aerr := log.Log("", &audit.ApplyRecovered{Repo: r.Repo, TxID: r.TxID, Outcome: r.Outcome, Left: left}); aerr != nil {
			err = errors.Join(err, fmt.Errorf("recovered, but the audit log could not record it: %w", aerr))
		}
	}
	return recs, err
}

// diffFunc returns the patch of the change at path, or why none could be
// made; ok is false when path is no change of the set.
type diffFunc func(path string) (patch string, err error, ok bool)

// changeDiffs renders each change of cs on demand.
func changeDiffs(cs *changeset.Set) diffFunc {
	changes := map[string]changeset.Change{}
	for _, c := range cs.Changes {
		changes[c.Path] = c
	}
	return func(path string) (string, error, bool) {
		ch, ok := changes[path]
		if !ok {
			return "", nil, false
		}
		p, err := changeset.Patch(&changeset.Set{Changes: []changeset.Change{ch}})
		return string(p), err, true
	}
}

// prompt offers each pending change in turn and returns the approvals
// given. A high-risk change needs the full word "yes".
func prompt(in io.Reader, out io.Writer, rep *review.Report, changes diffFunc) ([]review.Approval, error) {
	sc := bufio.NewScanner(in)
	var approvals []review.Approval
	n := 0
	for _, it := range rep.Items {
		if it.Status == review.StatusPending {
			n++
		}
	}
	i := 0
	for _, it := range rep.Items {
		if it.Status != review.StatusPending {
			printItem(out, it, changes, true)
			fmt.Fprintf(out, "  (%s: %s)\n\n", it.Status, it.Detail)
			continue
		}
		i++
		fmt.Fprintf(out, "[%d/%d] ", i, n)
		printItem(out, it, changes, true)
		q, want := "Apply this change? [y/N] ", []string{"y", "yes"}
		if it.Risk.Level == review.High {
			q, want = "This change is HIGH risk. Type \"yes\" to apply it: ", []string{"yes"}
		}
		fmt.Fprint(out, q)
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return nil, err
			}
			fmt.Fprintln(out)
			return nil, errors.New("no answer (end of input): nothing approved")
		}
		ans := strings.ToLower(strings.TrimSpace(sc.Text()))
		for _, w := range want {
			if ans == w {
				approvals = append(approvals, it.Approval())
				break
			}
		}
		fmt.Fprintln(out)
	}
	return approvals, nil
}

// printReport prints every change, highest risk first.
func printReport(out io.Writer, rep *review.Report, changes diffFunc, diff bool) {
	fmt.Fprintf(out, "%d change(s), highest risk first:\n\n", len(rep.Items))
	for _, it := range rep.Items {
		printItem(out, it, changes, diff)
		if it.Status != review.StatusPending && it.Status != "" {
			fmt.Fprintf(out, "  status: %s", it.Status)
			if it.Detail != "" {
				fmt.Fprintf(out, " (%s)", it.Detail)
			}
			fmt.Fprintln(out)
		}
		fmt.Fprintln(out)
	}
}

// printItem prints one change: class, kind, path, token, reasons and,
// when diff is set, its patch with control characters made visible.
func printItem(out io.Writer, it review.Item, changes diffFunc, diff bool) {
	fmt.Fprintf(out, "%-6s  %-6s  %s  (approve: %s)\n", strings.ToUpper(it.Risk.Level.String()), it.Kind, sanitize(it.Path), it.Token)
	for _, r := range it.Risk.Reasons {
		fmt.Fprintf(out, "        - %s\n", sanitize(r))
	}
	if !diff {
		return
	}
	p, err, ok := changes(it.Path)
	if !ok {
		return
	}
	if err != nil {
		fmt.Fprintf(out, "        (no diff: %v)\n", err)
		return
	}
	for _, l := range strings.SplitAfter(string(p), "\n") {
		if l != "" {
			fmt.Fprintf(out, "    %s", sanitize(l))
		}
	}
	if len(p) > 0 && p[len(p)-1] != '\n' {
		fmt.Fprintln(out)
	}
}

func printHowToApprove(out io.Writer, rep *review.Report) {
	var tokens []string
	for _, it := range rep.Items {
		if it.Status == review.StatusPending {
			tokens = append(tokens, "--approve "+it.Token)
		}
	}
	fmt.Fprintln(out, "dry run: nothing written.")
	if len(tokens) > 0 {
		fmt.Fprintf(out, "To write, run the same command with the tokens of the changes you approve, e.g.\n  %s\n", strings.Join(tokens, " "))
	}
}

// sanitize makes terminal control characters, bidirectional and invisible
// format characters visible, so that a change cannot rewrite what the
// reviewer's terminal shows. Tabs and the final newline are kept.
func sanitize(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\t', r == '\n' && i == len(s)-1:
			b.WriteRune(r)
		case r == unicode.ReplacementChar:
			b.WriteString(`\uFFFD`)
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.Is(unicode.Cf, r), r == 0x2028, r == 0x2029:
			fmt.Fprintf(&b, `<U+%04X>`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// applyExit maps a review error to the exit codes of applyExitCodes.
func applyExit(err error) error {
	var (
		conflict *review.ConflictError
		refused  *review.RefusedError
		rejected *changeset.RejectedError
		refusal  *allowlist.Refusal
		rollback *review.RollbackError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &rollback):
		return &exitError{code: exitFailed, err: err}
	case errors.As(err, &conflict):
		return &exitError{code: exitConflict, err: err}
	case errors.As(err, &refused), errors.As(err, &rejected), errors.As(err, &refusal), errors.Is(err, review.ErrNoApproval):
		return &exitError{code: exitRefused, err: err}
	}
	return &exitError{code: exitFailed, err: err}
}
