package main

import (
	"strings"
	"testing"

	clog "github.com/containerd/log"

	"github.com/stretchr/testify/require"
)

// TestGCJSONListsAreArrays: `gc --json` prints an empty list as [], never
// null, also when containerd does not answer (the report is then empty).
func TestGCJSONListsAreArrays(t *testing.T) {
	stdout, _, code := runCLI(t, "--address", "/nonexistent/containerd.sock", "--state-dir", t.TempDir(), "gc", "--json")
	require.Equal(t, exitFailed, code)
	v := jsonOut(t, stdout)
	for _, k := range []string{"containers", "leases", "fifo_dirs", "mounts", "cgroups", "runtime_states", "sessions", "pruned", "applies"} {
		require.Equal(t, []any{}, v[k], "%s in %s", k, stdout)
	}
}

// TestNoCommandNamesTheAlternatives: check without a command names both
// of its forms; run names its one.
func TestNoCommandNamesTheAlternatives(t *testing.T) {
	repo := t.TempDir()
	_, stderr, code := runCLI(t, "check", "--repo", repo)
	require.Equal(t, exitFailed, code)
	require.Equal(t, "corral: no command given: corral check [flags] -- CMD ARG..., or --explain PATH\n", stderr)
	_, stderr, code = runCLI(t, "run", "--repo", repo)
	require.Equal(t, exitFailed, code)
	require.Equal(t, "corral: no command given: corral run [flags] -- CMD ARG...\n", stderr)
}

// TestApplyAgentIDFlag: apply takes --agent-id, the name session create
// and serve use; its older --agent is still accepted and hidden.
func TestApplyAgentIDFlag(t *testing.T) {
	repo, patch, state := applyRepo(t)
	for _, flag := range []string{"--agent-id", "--agent"} {
		out, code := runApplyCLI(t, nil, "apply", "--state-dir", state, "--repo", repo, "--patch", patch, flag, "bob")
		require.Equal(t, exitRefused, code, out)
		require.Equal(t, "patch "+patch+": refused: openwiki/pages/a.md: outside the write scope openwiki/agents/bob/; "+
			"openwiki/pages/b.md: outside the write scope openwiki/agents/bob/; openwiki/pages/c.md: outside the write scope openwiki/agents/bob/", out, flag)
	}
	out, code := runApplyCLI(t, nil, "apply", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "      --agent-id string ")
	require.NotContains(t, out, "      --agent string ")

	out, code = runApplyCLI(t, nil, "serve", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "repository root (required without --session)")
}

// TestContainerdLoggerFollowsLogLevel: containerd's client logger (logrus,
// info by default, e.g. "fetch failed" while pulling an --image) is held
// to corral's resolved log level.
func TestContainerdLoggerFollowsLogLevel(t *testing.T) {
	defer func() { _ = clog.SetLevel("info") }()
	t.Setenv("CORRAL_LOG_LEVEL", "")
	for args, want := range map[string]clog.Level{
		"profiles":                   clog.WarnLevel,
		"--log-level debug profiles": clog.DebugLevel,
		"--log-level error profiles": clog.ErrorLevel,
	} {
		_, stderr, code := runCLI(t, strings.Fields(args)...)
		require.Equal(t, 0, code, stderr)
		require.Equal(t, want, clog.GetLevel(), args)
	}
}
