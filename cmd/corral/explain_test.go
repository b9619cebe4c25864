package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckExplain: `corral check --explain PATH` names the rule that
// hides PATH, or says "visible", exit 0 either way; --json gives the
// same as an object; a non-canonical PATH is refused (exit 126).
func TestCheckExplain(t *testing.T) {
	repo := t.TempDir()
	for p, c := range map[string]string{
		".openwikiignore":   "# secrets\nsecrets/\n",
		".gitignore":        "# build\n\nbuild/\n",
		"secrets/key.pem":   "KEY",
		"build/out.bin":     "",
		".env":              "TOKEN=1",
		".ssh/id_rsa":       "KEY",
		".git/config":       "",
		"README.md":         "",
		"docs/AGENTS.md":    "",
		"openwiki/index.md": "",
	} {
		full := filepath.Join(repo, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
	require.NoError(t, os.Link(filepath.Join(repo, "secrets/key.pem"), filepath.Join(repo, "notes.txt")))
	require.NoError(t, os.Symlink("/", filepath.Join(repo, "x")))
	require.NoError(t, os.Symlink("../secrets/key.pem", filepath.Join(repo, "docs/key")))
	require.NoError(t, os.Symlink("../README.md", filepath.Join(repo, "docs/readme")))
	for p, want := range map[string]string{
		"build/out.bin":   ".gitignore:3 hides build/",
		"secrets/key.pem": ".openwikiignore:2 hides secrets/",
		".env":            "built-in secrets list: .env (environment files)",
		".ssh/id_rsa":     "built-in secrets list: .ssh/ (private keys)",
		"docs/agents.md":  "profile hides agent config AGENTS.md (AGENTS.md)",
		".git/config":     ".git is hidden at any depth",
		"notes.txt":       "hard link of hidden secrets/key.pem",
		"x":               "symlink leaves the repository",
		"docs/key":        "resolves to secrets/key.pem: .openwikiignore:2 hides secrets/",
		"docs/readme":     "visible",
		"README.md":       "visible",
		"new/file":        "visible",
	} {
		stdout, stderr, code := runCLI(t, "check", "--repo", repo, "--explain", p)
		require.Equal(t, 0, code, "%s: %s", p, stderr)
		require.Equal(t, want+"\n", stdout, p)
		stdout, _, code = runCLI(t, "check", "--repo", repo, "--json", "--explain", p)
		require.Equal(t, 0, code, p)
		v := jsonOut(t, stdout)
		require.Equal(t, p, v["path"])
		require.Equal(t, want != "visible", v["hidden"], p)
		if want != "visible" {
			require.Equal(t, want, v["rule"], p)
		}
	}
	for _, p := range []string{"a//b", "../x", "/etc/passwd", "docs/"} {
		stdout, stderr, code := runCLI(t, "check", "--repo", repo, "--json", "--explain", p)
		require.Equal(t, exitRefused, code, "%s: %s", p, stderr)
		requireJSONError(t, stdout, exitRefused, kindRefused)
	}
	_, stderr, code := runCLI(t, "check", "--repo", repo, "--explain", "README.md", "--", "ls")
	require.Equal(t, exitFailed, code)
	require.True(t, strings.Contains(stderr, "--explain takes no command"), stderr)
	// A profile that exposes the secrets list shows .env.
	prof := filepath.Join(t.TempDir(), "p.yaml")
	require.NoError(t, os.WriteFile(prof, []byte("name: p\ncommands: [cat]\nexpose: [secrets, gitignore]\n"), 0o644))
	for p, want := range map[string]string{".env": "visible", "build/out.bin": "visible", "docs/AGENTS.md": "profile hides agent config AGENTS.md (AGENTS.md)"} {
		stdout, _, code := runCLI(t, "check", "--repo", repo, "--profile", prof, "--explain", p)
		require.Equal(t, 0, code)
		require.Equal(t, want+"\n", stdout, p)
	}
}
