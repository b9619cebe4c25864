package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/corral-sandbox/corral/internal/config"
	"github.com/stretchr/testify/require"
)

func TestProgressBecomesInfoRecords(t *testing.T) {
	for _, tc := range []struct {
		level string
		def   slog.Level
		want  string
	}{
		{"", defaultCLILevel, ""}, // the CLI's default hides progress
		{"", defaultDaemonLevel, "level=INFO msg=\"building image x on first use\"\n"},
		{"info", defaultCLILevel, "level=INFO msg=\"building image x on first use\"\n"},
		{"debug", defaultCLILevel, "level=INFO msg=\"building image x on first use\"\n"},
		{"error", defaultDaemonLevel, ""},
	} {
		g := &globalFlags{cfg: config.Config{LogLevel: tc.level}}
		var buf bytes.Buffer
		w := g.progress(&buf, tc.def)
		fmt.Fprint(w, "corral: building image x ")
		fmt.Fprint(w, "on first use\n")
		require.Equal(t, tc.want, buf.String(), "level %q", tc.level)
	}
}

func TestLogLevelFlag(t *testing.T) {
	_, stderr, code := runCLI(t, "profiles", "--log-level", "debug")
	require.Equal(t, 0, code)
	require.Contains(t, stderr, `level=DEBUG msg="configuration resolved: where each setting came from"`)
	require.Contains(t, stderr, `log_level="flag --log-level"`)
	_, stderr, code = runCLI(t, "profiles")
	require.Equal(t, 0, code)
	require.Empty(t, stderr)
	_, stderr, code = runCLI(t, "profiles", "--log-level", "loud")
	require.Equal(t, exitFailed, code)
	require.Equal(t, "corral: log level \"loud\" (flag --log-level): want one of debug, info, warn, error\n", stderr)
}
