package integration

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

// sessOpt adjusts a test session.
type sessOpt func(*sandbox.SessionConfig)

func withPage(p string) sessOpt { return func(c *sandbox.SessionConfig) { c.Page = p } }
func readOnly() sessOpt         { return func(c *sandbox.SessionConfig) { c.ReadOnly = true } }
func withResources(t *testing.T, r profiles.Resources) sessOpt {
	return func(c *sandbox.SessionConfig) {
		p := *c.Profile
		p.Resources = r
		require.NoError(t, p.Validate())
		c.Profile = &p
	}
}

func docsProfile(t *testing.T) *profiles.Profile {
	t.Helper()
	p, err := profiles.Load("docs")
	require.NoError(t, err)
	return p
}

// newSession opens a session over repo with the docs profile; closed in
// t.Cleanup, which also checks no host mount is left behind.
func newSession(t *testing.T, repo string, opts ...sessOpt) *sandbox.Session {
	t.Helper()
	return newSessionOn(t, testutil.Executor(t), repo, opts...)
}

// newSessionOn is newSession on the executor e.
func newSessionOn(t *testing.T, e *sandbox.Executor, repo string, opts ...sessOpt) *sandbox.Session {
	t.Helper()
	cfg := sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t)}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := e.NewSession(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, s.Close())
		left, err := mounts.Sweep(filepath.Join(testutil.StateDir(t), "sessions", s.ID))
		require.NoError(t, err)
		require.Empty(t, left, "host mounts left behind by session %s", s.ID)
	})
	return s
}

// run executes argv through the policy and returns the result.
func run(t *testing.T, s *sandbox.Session, argv ...string) *sandbox.Result {
	t.Helper()
	res, err := s.Exec(context.Background(), argv, nil, nil)
	require.NoError(t, err, "argv %q", argv)
	return res
}

// inBox runs argv without the policy: the in_box steps of the hostile
// cases, which test what the kernel enforces where the policy has a hole.
func inBox(t *testing.T, s *sandbox.Session, argv ...string) *sandbox.Result {
	t.Helper()
	res, err := testutil.ExecWithoutPolicy(context.Background(), s, argv, nil, nil)
	require.NoError(t, err, "argv %q", argv)
	return res
}

// sh runs a busybox shell script in the box (test image only).
func sh(t *testing.T, s *sandbox.Session, script string) *sandbox.Result {
	t.Helper()
	return inBox(t, s, "busybox", "sh", "-c", script)
}

func out(r *sandbox.Result) string { return string(r.Stdout) }

// demoRepo copies examples/demo-repo into a temp dir.
func demoRepo(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	src, err := filepath.Abs("../examples/demo-repo")
	require.NoError(t, err)
	cmd := exec.Command("cp", "-a", src+"/.", dst)
	outb, err := cmd.CombinedOutput()
	require.NoError(t, err, string(outb))
	return dst
}

// newRepo builds a repository from a declarative tree.
func newRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	return newRepoIn(t, "", files)
}

// newRepoIn builds a repository from a declarative tree in a new
// directory under parent ("" is t.TempDir()), removed when t ends.
func newRepoIn(t *testing.T, parent string, files map[string]string) string {
	t.Helper()
	var dir string
	if parent == "" {
		dir = t.TempDir()
	} else {
		d, err := os.MkdirTemp(parent, "case-")
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, os.RemoveAll(d)) })
		dir = d
	}
	require.NoError(t, os.Chmod(dir, 0o755))
	testutil.Tree(t, dir, files)
	return dir
}

// gitApplyCheck runs `git apply --check` of patch against a copy of repo.
func gitApplyCheck(t *testing.T, repo string, patch []byte) {
	t.Helper()
	tmp := t.TempDir()
	outb, err := exec.Command("cp", "-a", repo+"/.", tmp).CombinedOutput()
	require.NoError(t, err, string(outb))
	cmd := exec.Command("git", "apply", "--check", "-")
	cmd.Dir = tmp
	cmd.Stdin = bytes.NewReader(patch)
	outb, err = cmd.CombinedOutput()
	require.NoError(t, err, "git apply --check: %s\n%s", outb, patch)
}

// requireNoLeak fails when any of the secrets appears in the result.
func requireNoLeak(t *testing.T, r *sandbox.Result, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		require.NotContains(t, string(r.Stdout), s)
		require.NotContains(t, string(r.Stderr), s)
	}
}

func lines(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func patchOf(cs *changeset.Set) ([]byte, error) { return changeset.Patch(cs) }

// sessionEntries lists what STATE_DIR/sessions holds — session and
// staging directories — without the creators' lock file, which stays
// once the first session was made (sandbox.CreatorsLock).
func sessionEntries(t *testing.T, state string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(state, "sessions"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if e.Name() != sandbox.CreatorsLock {
			names = append(names, e.Name())
		}
	}
	return names
}

// docsProfileFile writes the built-in docs profile, named name, with
// each old, new pair of edits replaced (each old must occur), to a file
// in a directory every uid may read — another uid names it to the
// daemon, which reads it as that uid — removed at cleanup. It returns
// the file's absolute path.
func docsProfileFile(t *testing.T, name string, edits ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "profiles", "builtin", "docs.yaml"))
	require.NoError(t, err)
	text := string(data)
	edits = append([]string{"name: docs", "name: " + name}, edits...)
	for i := 0; i+1 < len(edits); i += 2 {
		require.Contains(t, text, edits[i], "the docs profile has no %q to edit", edits[i])
		text = strings.Replace(text, edits[i], edits[i+1], 1)
	}
	dir, err := os.MkdirTemp("", "corral-it-prof-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	p := filepath.Join(dir, name+".yaml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}
