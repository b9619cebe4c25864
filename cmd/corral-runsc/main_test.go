package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRewrite(t *testing.T) {
	states := map[string]string{"made": "created", "running": "running", "done": "stopped"}
	status := func(root, id string) string {
		require.Equal(t, "/r/ns", root)
		return states[id]
	}
	g := []string{"--root", "/r/ns", "--log", "/l", "--log-format", "json"}
	for _, c := range []struct{ in, want []string }{
		{append(g, "kill", "--all", "made", "9"), append(g, "delete", "--force", "made")},
		{append(g, "kill", "made", "15"), append(g, "delete", "--force", "made")},
		{append(g, "kill", "--all", "running", "9"), append(g, "kill", "--all", "running", "9")},
		{append(g, "delete", "c1"), append(g, "delete", "--force", "c1")},
		{append(g, "delete", "--force", "c1"), append(g, "delete", "--force", "c1")},
		{append(g, "start", "c1"), append(g, "start", "c1")},
		// "kill" as a flag's value is no subcommand.
		{[]string{"--root", "/r/ns", "--log", "kill", "start", "made"}, []string{"--root", "/r/ns", "--log", "kill", "start", "made"}},
		// No root: the runtime's default, left alone.
		{[]string{"kill", "made", "9"}, []string{"kill", "made", "9"}},
		{[]string{"--root", "/r/ns", "kill", "made"}, []string{"--root", "/r/ns", "kill", "made"}},
	} {
		got, stopped := rewrite(append([]string(nil), c.in...), status)
		require.False(t, stopped, "%q", c.in)
		require.Equal(t, c.want, got, "%q", c.in)
	}
	_, stopped := rewrite(append(g, "kill", "--all", "done", "9"), status)
	require.True(t, stopped)
}
