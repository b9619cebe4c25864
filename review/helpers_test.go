package review

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/stretchr/testify/require"
)

var dirScope = allowlist.Scope{Dir: "openwiki"}

// createTree builds a tree under root from declarative entries, in the
// spirit of securejoin's test helper: "file P CONTENT", "dir P",
// "symlink P TARGET", "fifo P". Content may hold spaces; "\n" in it is a
// newline.
func createTree(t testing.TB, root string, entries ...string) {
	t.Helper()
	for _, e := range entries {
		f := strings.SplitN(e, " ", 3)
		p := filepath.Join(root, filepath.FromSlash(f[1]))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		switch f[0] {
		case "file":
			content := ""
			if len(f) == 3 {
				content = strings.ReplaceAll(f[2], `\n`, "\n")
			}
			require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		case "dir":
			require.NoError(t, os.MkdirAll(p, 0o755))
		case "symlink":
			require.NoError(t, os.Symlink(f[2], p))
		default:
			t.Fatalf("unknown tree entry %q", e)
		}
	}
}

// snapshot records every entry under root: type, mode and content (or
// link target).
func snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "symlink " + target
		case info.IsDir():
			out[rel] = "dir " + info.Mode().Perm().String()
		default:
			b, _ := os.ReadFile(p)
			out[rel] = info.Mode().String() + " " + string(b)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// newRepo makes a repository with a few documentation pages.
func newRepo(t testing.TB, extra ...string) string {
	t.Helper()
	repo := t.TempDir()
	createTree(t, repo, append([]string{
		"file README.md readme\\n",
		"file openwiki/index.md # Index\\n\\nSee pages.\\n",
		"file openwiki/pages/a.md # A\\n\\none\\ntwo\\nthree\\n",
		"file openwiki/pages/b.md # B\\n",
	}, extra...)...)
	return repo
}

func read(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

// change builds a consistent Change from its path and contents ("" with
// present false for an absent side).
func modify(p, before, after string) changeset.Change {
	return changeset.Change{Path: p, Kind: changeset.Modify, BeforeSHA256: changeset.SHA256([]byte(before)), AfterSHA256: changeset.SHA256([]byte(after)),
		Size: int64(len(after)), Mode: 0o644, Before: []byte(before), After: []byte(after)}
}

func create(p, after string) changeset.Change {
	return changeset.Change{Path: p, Kind: changeset.Create, AfterSHA256: changeset.SHA256([]byte(after)),
		Size: int64(len(after)), Mode: 0o644, After: []byte(after)}
}

func del(p, before string) changeset.Change {
	return changeset.Change{Path: p, Kind: changeset.Delete, BeforeSHA256: changeset.SHA256([]byte(before)), Before: []byte(before)}
}

func set(changes ...changeset.Change) *changeset.Set {
	return &changeset.Set{Changes: changes, Violations: []changeset.Problem{}}
}

// approveAll approves every change of cs as Review shows it.
func approveAll(t testing.TB, cs *changeset.Set, scope allowlist.Scope) []Approval {
	t.Helper()
	items, err := Review(cs, scope, Options{})
	require.NoError(t, err)
	var out []Approval
	for _, it := range items {
		out = append(out, it.Approval())
	}
	return out
}

// git runs git in dir with a clean configuration.
func git(t testing.TB, dir string, stdin []byte, args ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
