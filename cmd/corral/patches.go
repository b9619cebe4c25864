package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/corral-sandbox/corral/sandbox/client"
	"github.com/spf13/cobra"
)

// newPatchesCommand is `corral patches`: the change sets the daemon kept
// when its owners' sessions ended without discard (GET /v1/patches).
func newPatchesCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "patches",
		Short: "The change sets the daemon kept when sessions ended without discard",
		Long: `corral daemon keeps the change set of a session that ends without
discard (its removal, its idle TTL, in Pod mode the Pod's deletion) as a
patch with its owner's: STATE-DIR/patches/uid-N/SESSION-ID.patch for a uid
other than root, STATE-DIR/patches/POD-UID/SESSION-ID.patch in Pod mode
(root's stay STATE-DIR/patches/SESSION-ID.patch). 'patches ls' lists them,
'patches show ID' prints one, 'patches rm ID' removes one (freeing the
owner's --max-kept-patch-bytes budget). The daemon's admins (root, the
admin group; in Pod mode root on the node or a process in the daemon's
own Pod) reach every one; an owner its own. See docs/daemon.md, "Kept
patches".`,
	}
	cmd.AddCommand(newPatchesLsCommand(g), newPatchesShowCommand(g), newPatchesRmCommand(g))
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
		return nil, usageError(errors.New("corral patches asks corral's daemon, and none answers: pass --daemon SOCKET"))
	}
	return c, nil
}

func newPatchesLsCommand(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the kept patches you may see, oldest first",
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
	return onePatchCommand(g, "show ID", "Print a kept patch (a git-style unified patch)",
		func(cmd *cobra.Command, c *client.Client, id string) error {
			patch, err := c.PodPatch(cmd.Context(), id)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			_, err = cmd.OutOrStdout().Write(patch)
			return err
		})
}

func newPatchesRmCommand(g *globalFlags) *cobra.Command {
	return onePatchCommand(g, "rm ID", "Remove a kept patch and its record (audited)",
		func(cmd *cobra.Command, c *client.Client, id string) error {
			rm, err := c.RemovePatch(cmd.Context(), id)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "removed kept patch %s (%s)\n", rm.Removed, orNonePath(rm.Patch))
			return err
		})
}

// onePatchCommand is a `patches` subcommand on the kept patch named by its
// one argument: run gets the daemon's client (closed after it) and the ID.
func onePatchCommand(g *globalFlags, use, short string, run func(cmd *cobra.Command, c *client.Client, id string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := patchesClient(cmd, g)
			if err != nil {
				return err
			}
			defer c.Close()
			return run(cmd, c, args[0])
		},
	}
}

func orNonePath(p string) string {
	if p == "" {
		return "no file"
	}
	return p
}
