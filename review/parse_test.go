package review

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParsePatchRoundTrip: every patch corral produces is accepted by
// `git apply --check` and parses back to the same change set.
func TestParsePatchRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		cs   *changeset.Set
	}{
		{"modify", set(modify("openwiki/pages/a.md", "# A\n\none\ntwo\nthree\n", "# A\n\none\n2\nthree\nfour\n"))},
		{"create", set(create("openwiki/pages/new.md", "# New\n\ntext\n"))},
		{"create empty", set(create("openwiki/pages/empty.md", ""))},
		{"delete", set(del("openwiki/pages/b.md", "# B\n"))},
		{"no newline at end", set(modify("openwiki/index.md", "# Index\n\nSee pages.\n", "# Index\n\nSee pages."))},
		{"spaces and unicode", set(create("openwiki/pages/my page é.md", "héllo\n"))},
		{"several", set(
			modify("openwiki/index.md", "# Index\n\nSee pages.\n", "# Index\n\nSee [a](pages/a.md).\n"),
			create("openwiki/pages/c.md", "c\n"),
			del("openwiki/pages/b.md", "# B\n"))},
		{"long file, hunks far apart", set(modify("openwiki/long.md", lines(1, 60), strings.Replace(strings.Replace(lines(1, 60), "line 5\n", "line five\n", 1), "line 50\n", "line fifty\nextra\n", 1)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := newRepo(t, "file openwiki/long.md "+strings.ReplaceAll(lines(1, 60), "\n", `\n`))
			// The repository holds the before side of every change.
			for _, c := range tt.cs.Changes {
				if c.Kind != changeset.Create {
					require.NoError(t, os.WriteFile(filepath.Join(repo, c.Path), c.Before, 0o644))
				}
			}
			out, err := git(t, repo, nil, "init", "-q", ".")
			require.NoError(t, err, out)
			out, err = git(t, repo, nil, "add", "-A")
			require.NoError(t, err, out)
			out, err = git(t, repo, nil, "commit", "-qm", "base")
			require.NoError(t, err, out)

			patch, err := changeset.Patch(tt.cs)
			require.NoError(t, err)
			out, err = git(t, repo, patch, "apply", "--check", "-")
			require.NoError(t, err, "git apply --check: %s\n%s", out, patch)

			got, err := ParsePatch(repo, patch, dirScope, nil)
			require.NoError(t, err, "%s", patch)
			require.Len(t, got.Changes, len(tt.cs.Changes))
			for i, want := range sortedChanges(tt.cs) {
				g := got.Changes[i]
				assert.Equal(t, want.Path, g.Path)
				assert.Equal(t, want.Kind, g.Kind)
				assert.Equal(t, want.BeforeSHA256, g.BeforeSHA256)
				assert.Equal(t, want.AfterSHA256, g.AfterSHA256)
				assert.Equal(t, string(want.After), string(g.After))
			}
			// And git's own diff of the same change parses too.
			require.NoError(t, applyForTest(repo, got))
			out, err = git(t, repo, nil, "add", "-A")
			require.NoError(t, err, out)
			gitPatch, err := git(t, repo, nil, "diff", "--cached", "HEAD")
			require.NoError(t, err, gitPatch)
			out, err = git(t, repo, nil, "reset", "-q", "--hard", "HEAD")
			require.NoError(t, err, out)
			got2, err := ParsePatch(repo, []byte(gitPatch), dirScope, nil)
			require.NoError(t, err, "%s", gitPatch)
			require.Len(t, got2.Changes, len(got.Changes))
			for i := range got.Changes {
				assert.Equal(t, got.Changes[i].AfterSHA256, got2.Changes[i].AfterSHA256)
			}
		})
	}
}

func lines(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func sortedChanges(cs *changeset.Set) []changeset.Change {
	out := append([]changeset.Change(nil), cs.Changes...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j].Path < out[i].Path {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// applyForTest applies every change of cs.
func applyForTest(repo string, cs *changeset.Set) error {
	items, err := Review(cs, dirScope, Options{})
	if err != nil {
		return err
	}
	var a []Approval
	for _, it := range items {
		a = append(a, it.Approval())
	}
	_, err = Apply(repo, cs, dirScope, a, Options{Write: true, JournalDir: filepath.Join(repo, "..", filepath.Base(repo)+".journal")})
	return err
}

// hostile patches: each must be refused as a whole with the repository
// byte-identical. These are refused by the write policy or at apply.
func TestParsePatchRefuses(t *testing.T) {
	modA := "@@ -1,5 +1,5 @@\n # A\n \n one\n-two\n+2\n three\n"
	tests := []struct {
		name  string
		patch string
		want  string // substring of the refusal
	}{
		// DIFF-01: headers that escape the tree.
		{"DIFF-01 diff --git climbs out", "diff --git a/openwiki/../../.bashrc b/openwiki/../../.bashrc\n--- a/openwiki/../../.bashrc\n+++ b/openwiki/../../.bashrc\n" + modA, "leaves the repository"},
		{"DIFF-01 .git/config", "diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n", "is owned by git and never writable"},
		{"DIFF-01 openwiki/.git/hooks", "diff --git a/openwiki/.GIT/hooks/post-checkout b/openwiki/.GIT/hooks/post-checkout\nnew file mode 100644\n--- /dev/null\n+++ b/openwiki/.GIT/hooks/post-checkout\n@@ -0,0 +1 @@\n+id\n", "is owned by git and never writable"},
		{"DIFF-01 absolute", "diff --git a//etc/passwd b//etc/passwd\n--- a//etc/passwd\n+++ b//etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "absolute"},
		{"DIFF-01 non-canonical", "diff --git a/openwiki/./pages/a.md b/openwiki/./pages/a.md\n--- a/openwiki/./pages/a.md\n+++ b/openwiki/./pages/a.md\n" + modA, "canonical"},
		{"outside scope", "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-readme\n+pwned\n", "outside the write scope openwiki/"},
		{"scope by whole components", "diff --git a/openwiki-old/x.md b/openwiki-old/x.md\nnew file mode 100644\n--- /dev/null\n+++ b/openwiki-old/x.md\n@@ -0,0 +1 @@\n+x\n", "outside the write scope"},
		{"ignore file", "diff --git a/openwiki/.gitignore b/openwiki/.gitignore\nnew file mode 100644\n--- /dev/null\n+++ b/openwiki/.gitignore\n@@ -0,0 +1 @@\n+*\n", "ignore files"},
		{"claims", "diff --git a/openwiki/.claims/a b/openwiki/.claims/a\nnew file mode 100644\n--- /dev/null\n+++ b/openwiki/.claims/a\n@@ -0,0 +1 @@\n+x\n", ".claims"},
		{"bidi name", "diff --git \"a/openwiki/x\\342\\200\\256.md\" \"b/openwiki/x\\342\\200\\256.md\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/openwiki/x\\342\\200\\256.md\"\n@@ -0,0 +1 @@\n+x\n", "bidirectional"},
		{"newline in name", "diff --git \"a/openwiki/x\\ny.md\" \"b/openwiki/x\\ny.md\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/openwiki/x\\ny.md\"\n@@ -0,0 +1 @@\n+x\n", "control character"},
		// The format's own refusals (DIFF-01 renames and headers, DIFF-02,
		// DIFF-05) are package changeset's TestParsePatchRefuses; one of
		// them here shows a refused format is a *RefusedError too.
		{"DIFF-05 ed script", "1a\n!id\n.\nw\n", "not part of a git-style unified diff"},

		{"binary content", "diff --git a/openwiki/x.md b/openwiki/x.md\nnew file mode 100644\n--- /dev/null\n+++ b/openwiki/x.md\n@@ -0,0 +1 @@\n+a\x00b\n", "binary"},
		{"lying index (result)", "diff --git a/openwiki/pages/b.md b/openwiki/pages/b.md\nindex 0000000000000000000000000000000000000000..1234567 100644\n--- a/openwiki/pages/b.md\n+++ b/openwiki/pages/b.md\n@@ -1 +1 @@\n-# B\n+# Bee\n", "index line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := newRepo(t)
			before := snapshot(t, repo)
			cs, err := ParsePatch(repo, []byte(tt.patch), dirScope, nil)
			require.Error(t, err)
			assert.Nil(t, cs)
			assert.Contains(t, err.Error(), tt.want)
			var refused *RefusedError
			var conflict *ConflictError
			assert.True(t, errors.As(err, &refused) || errors.As(err, &conflict), "%T %v", err, err)
			assert.Equal(t, before, snapshot(t, repo), "the repository changed")
		})
	}
}

// Hunks that do not apply to the repository's current bytes are conflicts.
func TestParsePatchConflicts(t *testing.T) {
	tests := []struct{ name, patch string }{
		{"context differs", "diff --git a/openwiki/pages/b.md b/openwiki/pages/b.md\n--- a/openwiki/pages/b.md\n+++ b/openwiki/pages/b.md\n@@ -1 +1 @@\n-# Not B\n+# Bee\n"},
		{"create exists", "diff --git a/openwiki/pages/b.md b/openwiki/pages/b.md\nnew file mode 100644\n--- /dev/null\n+++ b/openwiki/pages/b.md\n@@ -0,0 +1 @@\n+x\n"},
		{"modify missing", "diff --git a/openwiki/pages/zz.md b/openwiki/pages/zz.md\n--- a/openwiki/pages/zz.md\n+++ b/openwiki/pages/zz.md\n@@ -1 +1 @@\n-a\n+b\n"},
		{"stale index", "diff --git a/openwiki/pages/b.md b/openwiki/pages/b.md\nindex 1234567..89abcde 100644\n--- a/openwiki/pages/b.md\n+++ b/openwiki/pages/b.md\n@@ -1 +1 @@\n-# B\n+# Bee\n"},
		{"partial delete", "diff --git a/openwiki/pages/a.md b/openwiki/pages/a.md\ndeleted file mode 100644\n--- a/openwiki/pages/a.md\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-# A\n-\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := newRepo(t)
			before := snapshot(t, repo)
			_, err := ParsePatch(repo, []byte(tt.patch), dirScope, nil)
			require.Error(t, err)
			assert.True(t, errdefs.IsFailedPrecondition(err) || errdefs.IsPermissionDenied(err), "%v", err)
			assert.Equal(t, before, snapshot(t, repo))
		})
	}
}

// A symbolic link in the repository on the way to a patched file is
// refused: nothing is read through it.
func TestParsePatchSymlinkInRepo(t *testing.T) {
	outside := t.TempDir()
	createTree(t, outside, "file secret.md # B\\n")
	repo := newRepo(t, "symlink openwiki/linked "+outside)
	patch := "diff --git a/openwiki/linked/secret.md b/openwiki/linked/secret.md\n--- a/openwiki/linked/secret.md\n+++ b/openwiki/linked/secret.md\n@@ -1 +1 @@\n-# B\n+# Bee\n"
	_, err := ParsePatch(repo, []byte(patch), dirScope, nil)
	require.Error(t, err)
	assert.True(t, errdefs.IsPermissionDenied(err), "%v", err)
	assert.Contains(t, err.Error(), "symbolic link")
}

// Page mode accepts only the page.
func TestParsePatchPageScope(t *testing.T) {
	repo := newRepo(t)
	page := allowlist.Scope{Page: "openwiki/pages/a.md"}
	ok := "diff --git a/openwiki/pages/a.md b/openwiki/pages/a.md\n--- a/openwiki/pages/a.md\n+++ b/openwiki/pages/a.md\n@@ -1,5 +1,5 @@\n # A\n \n one\n-two\n+2\n three\n"
	cs, err := ParsePatch(repo, []byte(ok), page, nil)
	require.NoError(t, err)
	require.Len(t, cs.Changes, 1)
	sibling := "diff --git a/openwiki/pages/b.md b/openwiki/pages/b.md\n--- a/openwiki/pages/b.md\n+++ b/openwiki/pages/b.md\n@@ -1 +1 @@\n-# B\n+# Bee\n"
	_, err = ParsePatch(repo, []byte(ok+sibling), page, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "only the assigned page")
	delPage := "diff --git a/openwiki/pages/b.md b/openwiki/pages/b.md\ndeleted file mode 100644\n--- a/openwiki/pages/b.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-# B\n"
	_, err = ParsePatch(repo, []byte(delPage), allowlist.Scope{Page: "openwiki/pages/b.md"}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "page mode cannot delete")
	_, err = ParsePatch(repo, []byte(ok), allowlist.Scope{ReadOnly: true}, nil)
	assert.True(t, errdefs.IsPermissionDenied(err), "%v", err)
}
