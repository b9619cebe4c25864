package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newManCommand is `corral man DIR` (hidden; `make man` runs it): one
// man page per command, generated from the commands' own help, written
// to DIR (section 1).
func newManCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write a man page for every command to DIR (make man)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := writeManPages(cmd.Root(), args[0])
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d man pages in %s\n", n, args[0])
			return nil
		},
	}
}

// writeManPages writes root's command tree as man pages to dir and
// returns how many it wrote. Hidden commands (corral fs, man itself) and
// cobra's help command get none.
func writeManPages(root *cobra.Command, dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	root.DisableAutoGenTag = true // the same bytes for the same corral
	hdr := &doc.GenManHeader{Title: "CORRAL", Section: "1", Source: "corral", Manual: "corral manual"}
	if err := doc.GenManTree(root, hdr, dir); err != nil {
		return 0, fmt.Errorf("writing man pages to %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	return len(entries), nil
}
