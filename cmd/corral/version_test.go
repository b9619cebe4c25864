package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/internal/version"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

// TestVersionOnePlace: `corral version`, the session record's
// corral_version (sandbox.Version) and the MCP server's default serverInfo
// version are the same string.
func TestVersionOnePlace(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, execute(context.Background(), []string{"version", "--json"}, strings.NewReader(""), &stdout, &stderr), stderr.String())
	var out struct {
		Version   string `json:"version"`
		GoVersion string `json:"go_version"`
		String    string `json:"string"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out))
	require.Equal(t, version.String(), out.String)
	require.Equal(t, sandbox.Version(), out.String)
	require.NotEmpty(t, out.GoVersion)

	stdout.Reset()
	require.Equal(t, 0, execute(context.Background(), []string{"version"}, strings.NewReader(""), &stdout, &stderr))
	require.True(t, strings.HasPrefix(stdout.String(), "corral "+version.String()+"\n"), stdout.String())
}
