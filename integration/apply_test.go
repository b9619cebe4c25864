package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/review"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// From a container's writes to the repository: the change set collected
// from the session, its patch (git apply --check clean, and parsed back to
// the same changes), reviewed and applied with approvals.
func TestApplyFromSession(t *testing.T) {
	repo := newRepo(t, map[string]string{
		"README.md":           "readme\n",
		"openwiki/index.md":   "# Index\n",
		"openwiki/pages/a.md": "# A\none\n",
		"openwiki/pages/b.md": "# B\n",
	})
	s := newSession(t, repo)
	sh(t, s, `cd /workspace && printf '# A\nuno\n' > openwiki/pages/a.md && printf '# C\n' > openwiki/pages/c.md && rm openwiki/pages/b.md && mkdir -p openwiki/new && printf 'n\n' > openwiki/new/n.md`)
	cs, err := s.Changes()
	require.NoError(t, err)
	require.NoError(t, cs.Err())
	require.Len(t, cs.Changes, 4)

	patch, err := changeset.Patch(cs)
	require.NoError(t, err)
	gitApplyCheck(t, repo, patch)
	parsed, err := review.ParsePatch(repo, patch, s.Scope, s.View())
	require.NoError(t, err)
	require.Len(t, parsed.Changes, len(cs.Changes))
	for i := range cs.Changes {
		assert.Equal(t, cs.Changes[i].AfterSHA256, parsed.Changes[i].AfterSHA256)
	}

	before := testutil.Snapshot(t, repo)
	opts := review.Options{View: s.View(), JournalDir: t.TempDir()}
	_, err = review.Apply(repo, cs, s.Scope, nil, review.Options{Write: true, View: s.View(), JournalDir: t.TempDir()})
	require.ErrorIs(t, err, review.ErrNoApproval)
	require.Equal(t, before, testutil.Snapshot(t, repo))

	items, err := review.Review(cs, s.Scope, opts)
	require.NoError(t, err)
	var approvals []review.Approval
	for _, it := range items {
		approvals = append(approvals, it.Approval())
	}
	opts.Write = true
	rep, err := review.Apply(repo, cs, s.Scope, approvals, opts)
	require.NoError(t, err)
	assert.Len(t, rep.Written, 4)
	got := func(p string) string {
		b, err := os.ReadFile(filepath.Join(repo, p))
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, "# A\nuno\n", got("openwiki/pages/a.md"))
	assert.Equal(t, "# C\n", got("openwiki/pages/c.md"))
	assert.Equal(t, "n\n", got("openwiki/new/n.md"))
	assert.NoFileExists(t, filepath.Join(repo, "openwiki/pages/b.md"))
}

// DIFF-02/DIFF-03 end to end: a symlink cannot be planted in the write
// area (seccomp), and what the kernel does let the box write but the
// collector rejects (a reserved name) rejects the whole change set; nothing
// reaches the repository, not even the harmless change beside it.
func TestApplyRefusesRejectedSession(t *testing.T) {
	repo := newRepo(t, map[string]string{
		"README.md":           "readme\n",
		"openwiki/pages/a.md": "# A\n",
	})
	s := newSession(t, repo)
	ln := sh(t, s, `cd /workspace && ln -s ../../README.md openwiki/pages/r.md`)
	require.Equal(t, 1, ln.ExitCode)
	require.Contains(t, string(ln.Stderr), "Operation not permitted")
	sh(t, s, `cd /workspace && printf 'ok\n' > openwiki/pages/ok.md && mkdir openwiki/.claims && printf 'x\n' > openwiki/.claims/a`)
	cs, err := s.Changes()
	require.NoError(t, err)
	require.Error(t, cs.Err())
	require.NotContains(t, summary(cs), "create openwiki/pages/r.md")
	before := testutil.Snapshot(t, repo)
	a := []review.Approval{{Path: "openwiki/pages/ok.md", Kind: changeset.Create}}
	_, err = review.Apply(repo, cs, s.Scope, a, review.Options{Write: true, View: s.View(), JournalDir: t.TempDir()})
	var refused *review.RefusedError
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, before, testutil.Snapshot(t, repo))
}

// Page mode: only the page, at low risk.
func TestApplyPageSession(t *testing.T) {
	repo := newRepo(t, map[string]string{
		"openwiki/pages/a.md": "# A\n",
		"openwiki/pages/b.md": "# B\n",
	})
	s := newSession(t, repo, withPage("openwiki/pages/a.md"))
	sh(t, s, `printf '# A, rewritten\n' > /workspace/openwiki/pages/a.md`)
	cs, err := s.Changes()
	require.NoError(t, err)
	items, err := review.Review(cs, s.Scope, review.Options{View: s.View()})
	require.NoError(t, err)
	require.Len(t, items, 1)
	assert.Equal(t, review.Low, items[0].Risk.Level)
	_, err = review.Apply(repo, cs, s.Scope, []review.Approval{items[0].Approval()}, review.Options{Write: true, View: s.View(), JournalDir: t.TempDir()})
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(repo, "openwiki/pages/a.md"))
	require.NoError(t, err)
	assert.Equal(t, "# A, rewritten\n", string(b))
}
