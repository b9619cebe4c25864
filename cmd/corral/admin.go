package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/review"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/spf13/cobra"
)

func newCheckCommand() *cobra.Command {
	sf := &sessionFlags{}
	var explain string
	cmd := &cobra.Command{
		Use:   "check --repo DIR [flags] (-- CMD ARG... | --explain PATH)",
		Short: "Print the policy decision for an argv, or which rule hides a path; runs nothing",
		Long: `Prints the normalized argv that would run, or the refusal naming its rule.
Needs no containerd. Exit 0 when permitted, 126 when refused.

With --explain PATH, prints the rule that hides PATH in the session's view
(".gitignore:3 hides build/", "built-in secrets list: .env (environment files)",
"hard link of hidden secrets/key.pem", "symlink leaves the repository", ...), or
"visible"; a path that resolves through a symlink to a hidden one names where
it resolves. Exit 0 either way; 126 for a PATH that is not a canonical
repository-relative path.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			explaining := cmd.Flags().Changed("explain")
			if explaining && len(args) > 0 {
				return usageError(fmt.Errorf("--explain takes no command"))
			}
			var argv []string
			if !explaining {
				var err error
				if argv, err = argvFrom(cmd, args); err != nil {
					return err
				}
			}
			prof, err := loadProfile(sf.profile)
			if err != nil {
				return err
			}
			pol, err := sandbox.NewPolicy(sandbox.SessionConfig{Repo: sf.repo, Profile: prof, Page: sf.page, ReadOnly: sf.readOnly})
			if err != nil {
				return refusalOr(err)
			}
			if explaining {
				return explainPath(cmd, pol.View(), explain, sf.json)
			}
			d, err := pol.Check(argv)
			if err != nil {
				return refusalOr(err)
			}
			if sf.json {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"allowed": true, "argv": d.Argv})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "allowed: %s\n", quoteArgv(d.Argv))
			return nil
		},
	}
	sf.add(cmd)
	cmd.Flags().StringVar(&explain, "explain", "", "print which rule hides PATH (or \"visible\") instead of checking a command")
	return cmd
}

// explainOutput is `check --explain --json`'s result. Rule is empty when
// Hidden is false; Resolved is set when Path is a symlink resolving
// elsewhere.
type explainOutput struct {
	Path     string `json:"path"`
	Hidden   bool   `json:"hidden"`
	Rule     string `json:"rule,omitempty"`
	Resolved string `json:"resolved,omitempty"`
}

// explainPath prints the rule of view that hides unsafePath, or
// "visible": first the path as written, then where it resolves. A path
// that is not canonical is refused (exit 126).
func explainPath(cmd *cobra.Command, view allowlist.View, unsafePath string, asJSON bool) error {
	p, err := allowlist.CleanPath(unsafePath)
	if err == nil && p != unsafePath {
		err = &allowlist.Refusal{Kind: allowlist.KindPath, Index: -1, Token: unsafePath,
			Rule: fmt.Sprintf("path is not canonical (it means %q)", p)}
	}
	if err != nil {
		return refusalOr(err)
	}
	out := explainOutput{Path: p}
	out.Rule, out.Hidden = view.Hidden(p)
	if !out.Hidden {
		r, err := view.Resolve(p)
		var ref *allowlist.Refusal
		switch {
		case errors.As(err, &ref):
			out.Rule, out.Hidden = ref.Rule, true
		case err != nil:
			return &exitError{code: exitFailed, err: err}
		case r != p:
			out.Resolved = r
			if rule, hidden := view.Hidden(r); hidden {
				out.Rule, out.Hidden = fmt.Sprintf("resolves to %s: %s", r, rule), true
			}
		}
	}
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), out)
	}
	line := "visible"
	if out.Hidden {
		line = out.Rule
	}
	fmt.Fprint(cmd.OutOrStdout(), forTerminal(cmd.OutOrStdout(), line+"\n"))
	return nil
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`;&|<>*?()[]{}#~") {
			q[i] = fmt.Sprintf("%q", a)
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

func newImageCommand(g *globalFlags) *cobra.Command {
	img := &cobra.Command{Use: "image", Short: "Manage the tools image"}
	var asJSON bool
	build := &cobra.Command{
		Use:   "build",
		Short: "Assemble the default tools image from this machine's binaries and import it into containerd",
		Long: `Copies the allowlisted tools and the shared libraries they need into one
deterministic layer and imports it as an OCI image into containerd's corral
namespace. Idempotent: an identical image is left as it is.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			exec, err := sandbox.New(ctx, g.config(cmd.ErrOrStderr()))
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			defer exec.Close()
			spec := sandbox.DefaultImageSpec()
			if g.image != "" {
				spec.Ref = g.image
			}
			client, err := exec.Connect(ctx)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			res, err := sandbox.BuildImage(exec.Context(ctx), client, spec)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			verb := "built"
			if !res.Built {
				verb = "up to date"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s (%s, %.1f MiB, %d tools: %s)\n", res.Ref, verb, res.LayerDigest[:19],
				float64(res.Bytes)/(1<<20), len(res.Tools), strings.Join(res.Tools, " "))
			return nil
		},
	}
	build.Flags().BoolVar(&asJSON, "json", false, "print a JSON object")
	img.AddCommand(build)
	return img
}

func newGCCommand(g *globalFlags) *cobra.Command {
	var force, asJSON bool
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove what a crashed corral left behind (interrupted applies, containers, snapshots, leases, host mounts, half-made sessions)",
		Long: `Finishes or rolls back the applies a crash interrupted (journaled under
STATE-DIR/apply; this needs no containerd), then finds corral's containers
and leases by label, and its host mounts under the state directory with
mountinfo, and removes those whose supervisor is no longer running (all of
them with --force). Session directories go when no process holds them and
they are ephemeral (their process died) or half-made (no complete record);
persistent sessions stay unless expired (pruned, their change set kept as
a patch) or --force. Every corral start does the same for what dead
processes left, cheaply; gc is the explicit, complete form.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log, err := audit.Open(g.stateDir, g.audit)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			defer log.Close()
			applies, rerr := recoverAndLog(g.stateDir, log)
			for _, r := range applies {
				if r.Outcome == review.OutcomeStuck {
					rerr = errors.Join(rerr, fmt.Errorf("apply %s to %s could not be rolled back: %s", r.TxID, r.Repo, r.Left[0].Reason))
				}
			}
			var rep *sandbox.GCReport
			exec, err := sandbox.New(ctx, g.config(cmd.ErrOrStderr()))
			if err == nil {
				defer exec.Close()
				rep, err = exec.GC(ctx, force)
			}
			err = errors.Join(rerr, err)
			if asJSON {
				out := gcOutput{GCReport: gcReportForJSON(rep), Applies: applies}
				if applies == nil {
					out.Applies = []review.Recovered{}
				}
				if err != nil {
					out.Error, out.ExitCode = jsonErrorOf(exitFailed, err), exitFailed
				}
				if werr := writeJSON(cmd.OutOrStdout(), out); werr != nil {
					return werr
				}
			} else {
				if len(applies) > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "recovered %d interrupted apply(s)\n", len(applies))
				}
				if rep != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "removed %d containers, %d leases, %d FIFO directories, %d mounts, %d session directories, %d stray cgroups, %d stray runtime states\n",
						len(rep.Containers), len(rep.Leases), len(rep.FIFODirs), len(rep.Mounts), len(rep.Sessions), len(rep.Cgroups), len(rep.RuntimeStates))
					if len(rep.Cgroups) > 0 {
						fmt.Fprintf(cmd.OutOrStdout(), "cgroups of no container: %s\n", strings.Join(rep.Cgroups, " "))
					}
					if len(rep.RuntimeStates) > 0 {
						fmt.Fprintf(cmd.OutOrStdout(), "runtime states of no container: %s\n", strings.Join(rep.RuntimeStates, " "))
					}
					for _, p := range rep.Pruned {
						fmt.Fprintf(cmd.OutOrStdout(), "expired: %s\n", describeEnded(p))
					}
				}
			}
			if err != nil {
				return &exitError{code: exitFailed, err: err, printed: asJSON}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "also remove what a running corral owns")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object")
	return cmd
}

// gcReportForJSON is rep (nil: nothing removed) with every list non-nil,
// so that `gc --json` prints [] rather than null for an empty one, as it
// does for applies and as `session prune --json` does.
func gcReportForJSON(rep *sandbox.GCReport) *sandbox.GCReport {
	var r sandbox.GCReport
	if rep != nil {
		r = *rep
	}
	for _, l := range []*[]string{&r.Containers, &r.Leases, &r.FIFODirs, &r.Mounts, &r.Cgroups, &r.RuntimeStates, &r.Sessions} {
		if *l == nil {
			*l = []string{}
		}
	}
	if r.Pruned == nil {
		r.Pruned = []sandbox.Ended{}
	}
	return &r
}

// gcOutput is `gc --json`'s result: the interrupted applies recovered,
// what was removed, and the error when something could not be.
type gcOutput struct {
	*sandbox.GCReport
	Applies  []review.Recovered `json:"applies"`
	Error    *jsonError         `json:"error,omitempty"`
	ExitCode int                `json:"exit_code"`
}

// profileOutput is one profile as `profiles --json` shows it. Expose and
// Hides partition the built-in hide lists (agent-config, secrets,
// gitignore): the ones the profile exposes (its expose: list, or the
// older expose_agent_config) and the ones the view applies.
type profileOutput struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Commands    []string          `json:"commands"`
	Expose      []string          `json:"expose"`
	Hides       []string          `json:"hides"`
	Seccomp     string            `json:"seccomp"`
	Resources   map[string]string `json:"resources"`
}

func profileJSON(p *profiles.Profile) profileOutput {
	r := p.Resources
	expose, hides := []string{}, []string{}
	hidden := p.HideLists()
	for _, l := range names.Lists() {
		if slices.Contains(hidden, l) {
			hides = append(hides, string(l))
		} else {
			expose = append(expose, string(l))
		}
	}
	return profileOutput{Name: p.Name, Description: p.Description, Commands: p.Commands, Expose: expose, Hides: hides,
		Seccomp: p.Seccomp, Resources: map[string]string{
			"memory": r.Memory, "pids": fmt.Sprint(r.Pids), "cpus": fmt.Sprint(r.CPUs), "timeout": r.Timeout,
			"output": r.Output, "write_area": r.WriteArea, "write_inodes": fmt.Sprint(r.WriteInodes), "tmp": r.Tmp,
		}}
}

func newProfilesCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "profiles [--json] [NAME]",
		Short: "List the built-in profiles, or show one",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if len(args) == 0 {
				list := []profileOutput{}
				for _, n := range profiles.Builtins() {
					p, err := profiles.Load(n)
					if err != nil {
						return &exitError{code: exitFailed, err: err}
					}
					list = append(list, profileJSON(p))
				}
				if asJSON {
					return writeJSON(out, list)
				}
				for _, p := range list {
					fmt.Fprintf(out, "%s\t%s\n", p.Name, p.Description)
				}
				return nil
			}
			p, err := profiles.Load(args[0])
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			if asJSON {
				return writeJSON(out, profileJSON(p))
			}
			fmt.Fprintf(out, "name: %s\ndescription: %s\ncommands: %s\nhides built-in lists: %s\n",
				p.Name, p.Description, strings.Join(p.Commands, " "), strings.Join(profileJSON(p).Hides, " "))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: an array of profiles, or the one named")
	return cmd
}
