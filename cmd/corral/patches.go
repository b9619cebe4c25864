package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/corral-sandbox/corral/sandbox/client"
	"github.com/spf13/cobra"
)

// newPatchesCommand is `corral patches`: the change sets a daemon in Pod
// mode kept when a deleted Pod's sessions ended (GET /v1/patches).
func newPatchesCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "patches",
		Short: "Pod mode: the change sets kept when a deleted Pod's sessions ended (the daemon's admins)",
		Long: `A daemon in Pod mode (corral daemon --kubelet-root) ends a Pod's sessions
when the Pod is deleted and keeps each change set as a patch on the node
(STATE-DIR/patches/POD-UID/SESSION-ID.patch). 'patches ls' lists them,
'patches show ID' prints one. Only the daemon's admins may: root on the
node, or a process in the daemon's own Pod (kubectl exec). See
docs/daemon.md.`,
	}
	cmd.AddCommand(newPatchesLsCommand(g), newPatchesShowCommand(g))
	return cmd
}

// patchesClient is the daemon client patches needs: there is no
// standalone form.
func patchesClient(cmd *cobra.Command, g *globalFlags) (*client.Client, error) {
	c, err := g.daemonClient(cmd)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, usageError(errors.New("corral patches asks corral's daemon (Pod mode), and none answers: pass --daemon SOCKET"))
	}
	return c, nil
}

func newPatchesLsCommand(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the patches kept for deleted Pods' sessions, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := patchesClient(cmd, g)
			if err != nil {
				return err
			}
			defer c.Close()
			list, err := c.Patches(cmd.Context())
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tPOD\tENDED\tFILES\tPATCH")
			for _, p := range list {
				path := p.Path
				if path == "" {
					path = "(none)"
				}
				if p.Error != "" {
					path += " (" + sanitize(p.Error) + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.ID, p.PodUID, p.Ended.Local().Format("2006-01-02 15:04:05"), sanitize(strings.Join(p.Files, ",")), path)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

func newPatchesShowCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Print a kept patch (a git-style unified patch)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := patchesClient(cmd, g)
			if err != nil {
				return err
			}
			defer c.Close()
			patch, err := c.PodPatch(cmd.Context(), args[0])
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			_, err = cmd.OutOrStdout().Write(patch)
			return err
		},
	}
}
