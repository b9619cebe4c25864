package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/audit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const applyPatch = `diff --git a/openwiki/pages/a.md b/openwiki/pages/a.md
--- a/openwiki/pages/a.md
+++ b/openwiki/pages/a.md
@@ -1,2 +1,2 @@
 # A
-one
+uno
diff --git a/openwiki/pages/b.md b/openwiki/pages/b.md
deleted file mode 100644
--- a/openwiki/pages/b.md
+++ /dev/null
@@ -1 +0,0 @@
-# B
diff --git a/openwiki/pages/c.md b/openwiki/pages/c.md
new file mode 100644
--- /dev/null
+++ b/openwiki/pages/c.md
@@ -0,0 +1 @@
+# C
`

// applyRepo makes a repository and a patch file against it.
func applyRepo(t *testing.T) (repo, patch, state string) {
	t.Helper()
	dir := t.TempDir()
	repo, state = filepath.Join(dir, "repo"), filepath.Join(dir, "state")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "openwiki/pages"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "openwiki/pages/a.md"), []byte("# A\none\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "openwiki/pages/b.md"), []byte("# B\n"), 0o644))
	patch = filepath.Join(dir, "p.diff")
	require.NoError(t, os.WriteFile(patch, []byte(applyPatch), 0o644))
	return repo, patch, state
}

// runApplyCLI runs the CLI in-process and returns its output and exit code.
func runApplyCLI(t *testing.T, stdin io.Reader, args ...string) (string, int) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	cmd.SetIn(stdin)
	err := cmd.Execute()
	if err == nil {
		return out.String(), 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			out.WriteString(ee.err.Error())
		}
		return out.String(), ee.code
	}
	return out.String() + err.Error(), exitFailed
}

var applyTokenRE = regexp.MustCompile(`(?m)^(LOW|MEDIUM|HIGH)\s+(\w+)\s+(\S+)\s+\(approve: ([0-9a-f]{16})\)`)

func applyTokens(out string) map[string]string {
	m := map[string]string{}
	for _, s := range applyTokenRE.FindAllStringSubmatch(out, -1) {
		m[s[3]] = s[4]
	}
	return m
}

func TestApplyCommandDryRunThenApprove(t *testing.T) {
	repo, patch, state := applyRepo(t)
	out, code := runApplyCLI(t, nil, "apply", "--state-dir", state, "--repo", repo, "--patch", patch)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "dry run: nothing written")
	assert.Contains(t, out, "+uno")
	tok := applyTokens(out)
	require.Len(t, tok, 3, out)
	assert.Regexp(t, `(?s)HIGH\s+delete.*MEDIUM\s+create.*LOW\s+modify`, out, "highest risk first")
	assert.Equal(t, "# A\none\n", readApplied(t, filepath.Join(repo, "openwiki/pages/a.md")))

	out, code = runApplyCLI(t, nil, "apply", "--state-dir", state, "--repo", repo, "--patch", patch,
		"--approve", tok["openwiki/pages/a.md"], "--approve", tok["openwiki/pages/c.md"])
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "applied openwiki/pages/a.md")
	assert.Contains(t, out, "not approved, left out: openwiki/pages/b.md")
	assert.Equal(t, "# A\nuno\n", readApplied(t, filepath.Join(repo, "openwiki/pages/a.md")))
	assert.Equal(t, "# C\n", readApplied(t, filepath.Join(repo, "openwiki/pages/c.md")))
	assert.FileExists(t, filepath.Join(repo, "openwiki/pages/b.md"))

	// The base moved: a conflict, exit 3.
	out, code = runApplyCLI(t, nil, "apply", "--state-dir", state, "--repo", repo, "--patch", patch)
	assert.Equal(t, exitConflict, code, out)

	recs, err := audit.Read(filepath.Join(state, audit.FileName))
	require.NoError(t, err)
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.Type)
	}
	assert.Equal(t, []string{"changeset", "changeset", "approval", "approval", "apply_started", "apply", "refusal"}, kinds)
	assert.NoFileExists(t, filepath.Join(repo, ".corral-apply"))
	entries, err := os.ReadDir(filepath.Join(state, "apply"))
	require.NoError(t, err)
	assert.Empty(t, entries, "the journal of a finished apply is removed")
}

func TestApplyCommandRecover(t *testing.T) {
	_, _, state := applyRepo(t)
	out, code := runApplyCLI(t, nil, "apply", "--state-dir", state, "--recover")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "no interrupted apply")
	out, code = runApplyCLI(t, nil, "apply", "--state-dir", state, "--recover", "--json")
	require.Equal(t, 0, code, out)
	assert.JSONEq(t, "[]", out)
	out, code = runApplyCLI(t, nil, "apply", "--state-dir", state)
	assert.Equal(t, exitFailed, code, out)
	assert.Contains(t, out, `required flag(s) "patch", "repo" not set`)
}

func TestApplyCommandRefusals(t *testing.T) {
	repo, patch, state := applyRepo(t)
	out, code := runApplyCLI(t, nil, "apply", "--state-dir", state, "--repo", repo, "--patch", patch, "--approve", "0123456789abcdef")
	assert.Equal(t, exitRefused, code, out)
	assert.Contains(t, out, "matches no change")

	bad := filepath.Join(t.TempDir(), "bad.diff")
	require.NoError(t, os.WriteFile(bad, []byte("1a\n!id\n.\n"), 0o644))
	out, code = runApplyCLI(t, nil, "apply", "--state-dir", state, "--repo", repo, "--patch", bad)
	assert.Equal(t, exitRefused, code, out)

	out, code = runApplyCLI(t, nil, "apply", "--state-dir", state, "--repo", repo, "--patch", patch, "--page", "openwiki/pages/a.md")
	assert.Equal(t, exitRefused, code, out)
	assert.Contains(t, out, "only the assigned page")

	// A dry-run-only class that is approved refuses the whole apply.
	out, _ = runApplyCLI(t, nil, "apply", "--state-dir", state, "--repo", repo, "--patch", patch)
	tok := applyTokens(out)
	out, code = runApplyCLI(t, nil, "apply", "--state-dir", state, "--repo", repo, "--patch", patch, "--dry-run-only", "high",
		"--approve", tok["openwiki/pages/b.md"], "--approve", tok["openwiki/pages/a.md"])
	assert.Equal(t, exitRefused, code, out)
	assert.Equal(t, "# A\none\n", readApplied(t, filepath.Join(repo, "openwiki/pages/a.md")))
}

func TestApplyCommandInteractive(t *testing.T) {
	old := isTerminal
	isTerminal = func(io.Reader) bool { return true }
	t.Cleanup(func() { isTerminal = old })
	repo, patch, state := applyRepo(t)
	// Order: HIGH delete b.md ("y" is not enough), MEDIUM create c.md
	// (no), LOW modify a.md (yes).
	out, code := runApplyCLI(t, strings.NewReader("y\nn\ny\n"), "apply", "--state-dir", state, "--repo", repo, "--patch", patch)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, `Type "yes"`)
	assert.Equal(t, "# A\nuno\n", readApplied(t, filepath.Join(repo, "openwiki/pages/a.md")))
	assert.FileExists(t, filepath.Join(repo, "openwiki/pages/b.md"))
	assert.NoFileExists(t, filepath.Join(repo, "openwiki/pages/c.md"))
}

func TestApplyCommandJSON(t *testing.T) {
	repo, patch, state := applyRepo(t)
	out, code := runApplyCLI(t, nil, "apply", "--state-dir", state, "--repo", repo, "--patch", patch, "--json")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, `"dry_run": true`)
	assert.Contains(t, out, `"status": "pending"`)
}

func TestSanitize(t *testing.T) {
	assert.Equal(t, `a\x1b[2Jb<U+202E>c`+"\t\n", sanitize("a\x1b[2Jb\u202ec\t\n"))
	assert.Equal(t, `a\x0d\x0ab`, sanitize("a\r\nb"))
}

func readApplied(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}
