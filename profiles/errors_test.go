package profiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
)

// TestLoadErrorNamesFileAndLine: a profile file's decoding error is one
// line naming the file, the line and the key, never a Go type name.
func TestLoadErrorNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ body, want string }{
		{"name: x\ncommands: [cat]\nbogus: 1\n", `p.yaml:3: unknown key "bogus" (known: `},
		{"name: x\ncommands: [cat]\nresources:\n  memry: 1\n", `p.yaml:4: unknown key "resources.memry" (known: cpus, memory, output, pids, timeout, tmp, write_area, write_inodes)`},
		{"name: x\ncommands: [cat\nresources: {}\n", `p.yaml:2: YAML syntax: did not find expected ',' or ']'`},
	} {
		f := filepath.Join(dir, "p.yaml")
		require.NoError(t, os.WriteFile(f, []byte(tc.body), 0o644))
		_, err := Load(f)
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
		require.Contains(t, err.Error(), tc.want)
		require.True(t, strings.HasPrefix(err.Error(), f+":"), err.Error())
		require.NotContains(t, err.Error(), "profiles.")
	}
}
