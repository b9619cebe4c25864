package main

import (
	"github.com/corral-sandbox/corral/sandbox/fsop"
	"github.com/spf13/cobra"
)

// newFSCommand is the file tools' in-container half: corral's own binary,
// in the tools image at /usr/bin/corral, run by the session as
// `corral fs OP ...` (argv built by corral, never by the agent). It
// prints one JSON answer and runs only as a container's first process.
func newFSCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "fs OP [flags] -- ARG...",
		Short:              "Run one file-tool operation inside a corral container (internal)",
		Long:               "Internal: the half of the file tools that runs inside the container.\n\n" + fsop.Usage,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := fsop.Main(args, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
}
