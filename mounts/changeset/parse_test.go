package changeset

import (
	"errors"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParsePatchRefuses: patches in any other shape than the one Patch
// writes are refused as a whole, naming the line or path at fault.
func TestParsePatchRefuses(t *testing.T) {
	modA := "@@ -1,5 +1,5 @@\n # A\n \n one\n-two\n+2\n three\n"
	tests := []struct {
		name  string
		patch string
		want  string // substring of the refusal
	}{
		{"DIFF-01 +++ climbs out", "--- a/openwiki/x.md\n+++ b/openwiki/../../.bashrc\n@@ -1 +1 @@\n-a\n+b\n", "not part of a git-style unified diff"},
		{"DIFF-01 git +++ climbs out", "diff --git a/openwiki/pages/a.md b/openwiki/pages/a.md\n--- a/openwiki/pages/a.md\n+++ b/openwiki/../../.bashrc\n" + modA, "does not match the diff --git line"},
		{"DIFF-01 rename to ../a.md", "diff --git a/openwiki/a.md b/../a.md\nsimilarity index 100%\nrename from openwiki/a.md\nrename to ../a.md\n", "renames are not accepted"},
		{"DIFF-01 rename same header", "diff --git a/openwiki/pages/a.md b/openwiki/pages/a.md\nsimilarity index 100%\nrename from openwiki/pages/a.md\nrename to ../a.md\n", "renames and copies are not accepted"},
		{"DIFF-01 +++ /etc/cron.d/x", "diff --git a/openwiki/x b/openwiki/x\nnew file mode 100644\n--- /dev/null\n+++ /etc/cron.d/x\n@@ -0,0 +1 @@\n+* * * * * root id\n", "does not match the diff --git line"},
		{"DIFF-01 traditional +++ /etc/cron.d/x", "--- /dev/null\n+++ /etc/cron.d/x\n@@ -0,0 +1 @@\n+* * * * * root id\n", "not part of a git-style unified diff"},
		{"DIFF-01 b/.git/config", "diff --git a/openwiki/x b/.git/config\n--- a/openwiki/x\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n", "renames are not accepted"},
		{"DIFF-02 symlink then write through", "diff --git a/openwiki/l b/openwiki/l\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/openwiki/l\n@@ -0,0 +1 @@\n+../../.git\n\\ No newline at end of file\ndiff --git a/openwiki/l/hooks/post-checkout b/openwiki/l/hooks/post-checkout\nnew file mode 100644\n--- /dev/null\n+++ b/openwiki/l/hooks/post-checkout\n@@ -0,0 +1 @@\n+id\n", "120000"},
		{"DIFF-02 gitlink", "diff --git a/openwiki/sub b/openwiki/sub\nnew file mode 160000\nindex 0000000..1111111\n--- /dev/null\n+++ b/openwiki/sub\n@@ -0,0 +1 @@\n+Subproject commit 1111111111111111111111111111111111111111\n", "160000"},
		{"DIFF-02 type change to symlink", "diff --git a/openwiki/pages/b.md b/openwiki/pages/b.md\nold mode 100644\nnew mode 120000\n", "mode changes"},
		{"executable", "diff --git a/openwiki/x.sh b/openwiki/x.sh\nnew file mode 100755\n--- /dev/null\n+++ b/openwiki/x.sh\n@@ -0,0 +1 @@\n+id\n", "100755"},
		{"DIFF-05 ed script", "1a\n!id\n.\nw\n", "not part of a git-style unified diff"},
		{"DIFF-05 ed script after a header", "diff --git a/openwiki/pages/a.md b/openwiki/pages/a.md\n1a\n!id\n.\n", "unexpected line in a file header"},
		{"DIFF-05 context diff", "*** openwiki/pages/a.md\n--- openwiki/pages/a.md\n***************\n*** 1,2 ****\n  # A\n! one\n--- 1,2 ----\n  # A\n! uno\n", "not part of a git-style unified diff"},
		{"DIFF-05 git binary patch", "diff --git a/openwiki/x.png b/openwiki/x.png\nnew file mode 100644\nindex 0000000..e69de29\nGIT binary patch\nliteral 5\nMcmZ?wbaG|@00B+`Bme*a\n\nliteral 0\nHcmV?d00001\n\n", "binary patches"},
		{"DIFF-05 binary files differ", "diff --git a/openwiki/x.png b/openwiki/x.png\nindex 1111111..2222222 100644\nBinary files a/openwiki/x.png and b/openwiki/x.png differ\n", "binary patches"},
		{"DIFF-05 hunk header lies (fewer)", "diff --git a/openwiki/pages/a.md b/openwiki/pages/a.md\n--- a/openwiki/pages/a.md\n+++ b/openwiki/pages/a.md\n@@ -1,2 +1,2 @@\n # A\n-\n+x\n+evil\n", "not counted by the hunk header"},
		{"DIFF-05 hunk header lies (more)", "diff --git a/openwiki/pages/a.md b/openwiki/pages/a.md\n--- a/openwiki/pages/a.md\n+++ b/openwiki/pages/a.md\n@@ -1,9 +1,9 @@\n # A\n-\n+x\n", "ends inside a hunk"},
		{"DIFF-05 3 files, one hunk header lies", "diff --git a/openwiki/index.md b/openwiki/index.md\n--- a/openwiki/index.md\n+++ b/openwiki/index.md\n@@ -1,3 +1,3 @@\n # Index\n \n-See pages.\n+See the pages.\n" +
			"diff --git a/openwiki/pages/a.md b/openwiki/pages/a.md\n--- a/openwiki/pages/a.md\n+++ b/openwiki/pages/a.md\n@@ -1,3 +1,5 @@\n # A\n \n-one\n+uno\n" +
			"diff --git a/openwiki/pages/b.md b/openwiki/pages/b.md\n--- a/openwiki/pages/b.md\n+++ b/openwiki/pages/b.md\n@@ -1 +1 @@\n-# B\n+# Bee\n", "counts"},
		{"DIFF-05 swallowed header", "diff --git a/openwiki/index.md b/openwiki/index.md\n--- a/openwiki/index.md\n+++ b/openwiki/index.md\n@@ -1,3 +1,5 @@\n # Index\n \n-See pages.\n+See the pages.\n--- a/README.md\n+++ b/README.md\n", "hunk holds more lines"},
		{"DIFF-05 lying new position", "diff --git a/openwiki/pages/a.md b/openwiki/pages/a.md\n--- a/openwiki/pages/a.md\n+++ b/openwiki/pages/a.md\n@@ -1,5 +7,5 @@\n # A\n \n one\n-two\n+2\n three\n", "new position"},
		{"DIFF-05 overlapping hunks", "diff --git a/openwiki/pages/a.md b/openwiki/pages/a.md\n--- a/openwiki/pages/a.md\n+++ b/openwiki/pages/a.md\n" + modA + "@@ -2,1 +2,1 @@\n-\n+x\n", "overlap"},
		{"DIFF-05 trailing garbage", "diff --git a/openwiki/pages/a.md b/openwiki/pages/a.md\n--- a/openwiki/pages/a.md\n+++ b/openwiki/pages/a.md\n" + modA + "!id\n", "not part of a git-style unified diff"},
		{"DIFF-05 preamble", "From: x\nSubject: y\n\ndiff --git a/openwiki/pages/a.md b/openwiki/pages/a.md\n--- a/openwiki/pages/a.md\n+++ b/openwiki/pages/a.md\n" + modA, "not part of a git-style unified diff"},
		{"DIFF-05 empty", "", "empty"},
		{"DIFF-05 nothing but text", "hello\n", "not part of a git-style unified diff"},
		{"DIFF-05 no newline at end", "diff --git a/openwiki/pages/a.md b/openwiki/pages/a.md\n--- a/openwiki/pages/a.md\n+++ b/openwiki/pages/a.md\n" + strings.TrimSuffix(modA, "\n"), "newline"},
		{"duplicate path", "diff --git a/openwiki/pages/b.md b/openwiki/pages/b.md\n--- a/openwiki/pages/b.md\n+++ b/openwiki/pages/b.md\n@@ -1 +1 @@\n-# B\n+# Bee\ndiff --git a/openwiki/pages/b.md b/openwiki/pages/b.md\n--- a/openwiki/pages/b.md\n+++ b/openwiki/pages/b.md\n@@ -1 +1 @@\n-# B\n+# Bea\n", "more than once"},
		{"mode-only change", "diff --git a/openwiki/pages/b.md b/openwiki/pages/b.md\nold mode 100644\nnew mode 100755\n", "mode changes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, err := ParsePatch([]byte(tt.patch), nil)
			require.Error(t, err)
			assert.Nil(t, files)
			assert.Contains(t, err.Error(), tt.want)
			var pe *PatchError
			assert.True(t, errors.As(err, &pe), "%T %v", err, err)
			assert.True(t, errdefs.IsInvalidArgument(err))
		})
	}
}

// TestParsePatchRoundTrip: what Patch writes, ParsePatch reads back, and
// each file applied to its before bytes gives the change again.
func TestParsePatchRoundTrip(t *testing.T) {
	before := map[string]string{"a.md": "one\ntwo\nthree\n", "del.md": "gone\n", "eol.md": "x\ny", "empty.md": ""}
	after := map[string]string{"a.md": "one\n2\nthree\nfour\n", "new.md": "n\n", "eol.md": "x\ny\n", "new empty.md": "", "sp é.md": "é\n"}
	cs := &Set{}
	for _, p := range []string{"a.md", "del.md", "empty.md", "eol.md", "new empty.md", "new.md", "sp é.md"} {
		cs.Changes = append(cs.Changes, diffChange("openwiki/"+p, before, after, p))
	}
	patch, err := Patch(cs)
	require.NoError(t, err)
	var seen []string
	files, err := ParsePatch(patch, func(p string) string { seen = append(seen, p); return "" })
	require.NoError(t, err, "%s", patch)
	require.Len(t, files, len(cs.Changes))
	require.Len(t, seen, len(cs.Changes), "every path is put to the caller's check")
	for i, fp := range files {
		want := cs.Changes[i]
		require.Equal(t, want.Path, fp.Path)
		require.Equal(t, want.Kind, fp.Kind)
		got, err := fp.Apply(want.Before)
		require.NoError(t, err, fp.Path)
		assert.Equal(t, string(want.After), string(got.After), fp.Path)
		assert.Equal(t, string(want.Before), string(got.Before), fp.Path)
		want.Before, want.After, got.Before, got.After = nil, nil, nil, nil
		assert.Equal(t, want, got, fp.Path)
	}
}

// TestParsePatchCheck: the caller's path check refuses before the header
// is judged, for every file of the patch.
func TestParsePatchCheck(t *testing.T) {
	patch := "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/y b/y\nnew file mode 100755\n"
	_, err := ParsePatch([]byte(patch), func(p string) string { return "not " + p })
	require.Error(t, err, "the mode line of y is the scanner's; the scanner refuses it first")
	patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/y b/y\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n"
	_, err = ParsePatch([]byte(patch), func(p string) string { return "not " + p })
	var pe *PatchError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, []Problem{{Path: "x", Reason: "not x"}, {Path: "y", Reason: "not y"}}, pe.Problems)
}

// TestApplyConflicts: a base that is not the patch's is a conflict, a
// patch that contradicts itself is not.
func TestApplyConflicts(t *testing.T) {
	parse := func(patch string) *FilePatch {
		t.Helper()
		files, err := ParsePatch([]byte(patch), nil)
		require.NoError(t, err)
		return &files[0]
	}
	mod := "diff --git a/b.md b/b.md\n--- a/b.md\n+++ b/b.md\n@@ -1 +1 @@\n-# B\n+# Bee\n"
	_, err := parse(mod).Apply([]byte("# Not B\n"))
	var ae *ApplyError
	require.ErrorAs(t, err, &ae)
	assert.True(t, ae.Conflict)
	assert.True(t, errdefs.IsFailedPrecondition(err))
	stale := strings.Replace(mod, "--- a/b.md", "index 1234567..89abcde 100644\n--- a/b.md", 1)
	_, err = parse(stale).Apply([]byte("# B\n"))
	require.ErrorAs(t, err, &ae)
	assert.True(t, ae.Conflict)
	assert.Contains(t, ae.Reason, "index line names blob 1234567")
	partial := "diff --git a/a.md b/a.md\ndeleted file mode 100644\n--- a/a.md\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-# A\n"
	_, err = parse(partial).Apply([]byte("# A\nmore\n"))
	require.ErrorAs(t, err, &ae)
	assert.True(t, errdefs.IsFailedPrecondition(err) || errdefs.IsInvalidArgument(err))
}
