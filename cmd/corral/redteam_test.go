package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRedTeamApplyPatchHiddenPathOracle: `corral apply --patch` reads the
// repository's bytes of every path the (untrusted) patch names before it
// checks the view's hidden set, so a patch aimed at a hidden file inside
// the write scope is an oracle for that file: a hunk that guesses its
// content right is "refused: hidden" (126), a wrong guess is a conflict
// (3, "a hunk does not apply"), a missing file another conflict ("does not
// exist"), and an index line is answered with the hidden file's blob id.
// A hidden path must be refused by its rule, with the same answer whatever
// the file holds and whether or not it exists, before the repository is
// read.
func TestRedTeamApplyPatchHiddenPathOracle(t *testing.T) {
	dir := t.TempDir()
	repo, state := filepath.Join(dir, "repo"), filepath.Join(dir, "state")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "openwiki"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".openwikiignore"), []byte("openwiki/priv*.md\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "openwiki/priv.md"), []byte("PRIVCONTENT\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "openwiki/a.md"), []byte("a\n"), 0o644))

	try := func(name, path, hunkOld, index string) (string, int) {
		p := "diff --git a/" + path + " b/" + path + "\n" + index +
			"--- a/" + path + "\n+++ b/" + path + "\n@@ -1 +1 @@\n-" + hunkOld + "\n+Y\n"
		f := filepath.Join(dir, name+".diff")
		require.NoError(t, os.WriteFile(f, []byte(p), 0o644))
		return runApplyCLI(t, nil, "apply", "--state-dir", state, "--repo", repo, "--patch", f)
	}
	_, right := try("right", "openwiki/priv.md", "PRIVCONTENT", "")
	_, wrong := try("wrong", "openwiki/priv.md", "WRONGGUESS", "")
	_, absent := try("absent", "openwiki/priv2.md", "WRONGGUESS", "")
	outIdx, idx := try("index", "openwiki/priv.md", "WRONGGUESS", "index 1111111..2222222 100644\n")

	assert.Equal(t, exitRefused, right, "right guess")
	assert.Equal(t, right, wrong, "a right and a wrong guess of a hidden file's content get different answers")
	assert.Equal(t, right, absent, "an existing and a missing hidden file get different answers")
	assert.Equal(t, exitRefused, idx, outIdx)
	// git hash-object of "PRIVCONTENT\n"
	assert.NotContains(t, outIdx, "da79451794fcaf60a21bead9a1bb63f036d93261", "the hidden file's blob id is printed")
	assert.Equal(t, "PRIVCONTENT\n", readApplied(t, filepath.Join(repo, "openwiki/priv.md")))
}

// TestRedTeamStateDirInsideRepositoryWritesNothing: a state directory
// inside the repository is refused, but sandbox.New used to create it and
// its audit.log there first, so the refusal itself wrote into the
// repository ("the repository itself is never written"). Each command
// that names a repository must refuse before anything is created.
func TestRedTeamStateDirInsideRepositoryWritesNothing(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "src"), 0o755))
	state := filepath.Join(repo, "src", "state")
	for _, args := range [][]string{
		{"run", "--state-dir", state, "--repo", repo, "--", "echo", "x"},
		{"session", "create", "--state-dir", state, "--repo", repo},
		{"serve", "--mcp", "--state-dir", state, "--repo", repo},
	} {
		out, code := runApplyCLI(t, nil, args...)
		assert.Equal(t, exitFailed, code, "%v: %s", args, out)
		assert.Contains(t, out, "inside the repository", args)
		assert.NoDirExists(t, state, "%v created the state directory inside the repository", args)
	}
}
