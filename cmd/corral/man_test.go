package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// TestManPages: `corral man DIR` (make man) writes a page for every
// visible command, each naming its command.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, code := runCLI(t, "man", dir)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "man pages in "+dir)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		page := filepath.Join(dir, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		data, err := os.ReadFile(page)
		require.NoError(t, err, "a page for %q", c.CommandPath())
		require.Contains(t, string(data), `.TH "CORRAL" "1"`)
		require.Contains(t, string(data), strings.ReplaceAll(c.CommandPath(), " ", "-"))
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := newRootCommand()
	root.InitDefaultCompletionCmd()
	walk(root)
	_, err := os.Stat(filepath.Join(dir, "corral-fs.1"))
	require.ErrorIs(t, err, os.ErrNotExist, "the in-container command has no page")
}

// TestCompletion: cobra's completion scripts for bash, zsh and fish.
func TestCompletion(t *testing.T) {
	for shell, marker := range map[string]string{"bash": "__start_corral", "zsh": "#compdef corral", "fish": "complete -c corral"} {
		stdout, stderr, code := runCLI(t, "completion", shell)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, marker, shell)
	}
	// Completion lists the new commands.
	stdout, _, code := runCLI(t, "__complete", "do")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "doctor")
}
