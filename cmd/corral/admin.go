package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/review"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/spf13/cobra"
)

func newCheckCommand() *cobra.Command {
	sf := &sessionFlags{}
	cmd := &cobra.Command{
		Use:   "check --repo DIR [flags] -- CMD ARG...",
		Short: "Print the policy decision for an argv; runs nothing",
		Long: `Prints the normalized argv that would run, or the refusal naming its rule.
Needs no containerd. Exit 0 when permitted, 126 when refused.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			argv, err := argvFrom(cmd, args)
			if err != nil {
				return err
			}
			prof, err := loadProfile(sf.profile)
			if err != nil {
				return err
			}
			pol, err := sandbox.NewPolicy(sandbox.SessionConfig{Repo: sf.repo, Profile: prof, Page: sf.page, ReadOnly: sf.readOnly})
			if err != nil {
				return refusalOr(sf.json, cmd.OutOrStdout(), err)
			}
			d, err := pol.Check(argv)
			if err != nil {
				return refusalOr(sf.json, cmd.OutOrStdout(), err)
			}
			if sf.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"allowed": true, "argv": d.Argv})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "allowed: %s\n", quoteArgv(d.Argv))
			return nil
		},
	}
	sf.add(cmd)
	return cmd
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
			res, err := sandbox.BuildImage(exec.Context(ctx), exec.Client(), spec)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
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
		Short: "Remove what a crashed corral left behind (interrupted applies, containers, snapshots, leases, host mounts)",
		Long: `Finishes or rolls back the applies a crash interrupted (journaled under
STATE-DIR/apply; this needs no containerd), then finds corral's containers
and leases by label, and its host mounts under the state directory with
mountinfo, and removes those whose supervisor is no longer running (all of
them with --force).`,
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
			if asJSON {
				if applies == nil {
					applies = []review.Recovered{}
				}
				_ = json.NewEncoder(cmd.OutOrStdout()).Encode(struct {
					*sandbox.GCReport
					Applies []review.Recovered `json:"applies"`
				}{rep, applies})
			} else {
				if len(applies) > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "recovered %d interrupted apply(s)\n", len(applies))
				}
				if rep != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "removed %d containers, %d leases, %d mounts, %d session directories\n",
						len(rep.Containers), len(rep.Leases), len(rep.Mounts), len(rep.Sessions))
				}
			}
			if err := errors.Join(rerr, err); err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "also remove what a running corral owns")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object")
	return cmd
}

func newProfilesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "profiles [NAME]",
		Short: "List the built-in profiles, or show one",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				for _, n := range profiles.Builtins() {
					p, err := profiles.Load(n)
					if err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", n, p.Description)
				}
				return nil
			}
			p, err := profiles.Load(args[0])
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			var lists []string
			for _, l := range p.HideLists() {
				lists = append(lists, string(l))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "name: %s\ndescription: %s\ncommands: %s\nhides built-in lists: %s\n",
				p.Name, p.Description, strings.Join(p.Commands, " "), strings.Join(lists, " "))
			return nil
		},
	}
}
