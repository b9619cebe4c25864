package main

import (
	"fmt"

	"github.com/corral-sandbox/corral/internal/version"
	"github.com/spf13/cobra"
)

func newVersionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print corral's version, commit, build date and Go version",
		Long: `Prints the version every surface reports (the MCP server's serverInfo and
each session record carry the same string), then the commit, its date and
the Go version. The Makefile links in ` + "`git describe --always --dirty`" + `; a plain
go build reports the module version Go recorded.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := version.Get()
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, struct {
					version.Info
					String string `json:"string"`
				}{in, in.String()})
			}
			fmt.Fprintf(out, "corral %s\ncommit: %s\ndate: %s\ngo: %s\n", in.String(), orUnknown(in.Commit), orUnknown(in.Date), in.GoVersion)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object")
	return cmd
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
