package mounts

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
)

// TestCheckStart is PATH-06: a write directory or page that is, or passes
// through, a symlink (or is of the wrong type) refuses the start, and the
// error says which component and why.
func TestCheckStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree map[string]string // "-> target" makes a symlink; "/" suffix a directory
		page string
		want string // substring of the error; "" = starts
	}{
		{name: "real directory", tree: map[string]string{"openwiki/": ""}},
		{name: "absent directory", tree: map[string]string{}},
		{name: "page", tree: map[string]string{"openwiki/pages/a.md": "a"}, page: "openwiki/pages/a.md"},
		{name: "absent page", tree: map[string]string{"openwiki/": ""}, page: "openwiki/pages/a.md"},
		{name: "write dir absolute link", tree: map[string]string{"openwiki": "-> /home/user"}, want: "openwiki is a symlink"},
		{name: "write dir relative link", tree: map[string]string{"openwiki": "-> ../.."}, want: "openwiki is a symlink"},
		{name: "write dir a file", tree: map[string]string{"openwiki": "x"}, want: "openwiki exists but is not a directory"},
		{name: "page dir link", tree: map[string]string{"openwiki/pages": "-> /tmp"}, page: "openwiki/pages/a.md", want: "openwiki/pages is a symlink"},
		{name: "page link", tree: map[string]string{"openwiki/pages/a.md": "-> ../../../.bashrc"}, page: "openwiki/pages/a.md", want: "openwiki/pages/a.md is a symlink"},
		{name: "page a directory", tree: map[string]string{"openwiki/pages/a.md/": ""}, page: "openwiki/pages/a.md", want: "is not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := t.TempDir()
			for p, c := range tc.tree {
				full := filepath.Join(repo, filepath.FromSlash(p))
				require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
				switch {
				case len(p) > 0 && p[len(p)-1] == '/':
					require.NoError(t, os.MkdirAll(full, 0o755))
				case len(c) > 3 && c[:3] == "-> ":
					require.NoError(t, os.Symlink(c[3:], full))
				default:
					require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
				}
			}
			err := CheckStart(Plan{Repo: repo, WriteDir: "openwiki", Page: tc.page})
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCheckStartRefusesLinksLeavingTheRepository(t *testing.T) {
	for _, tc := range []struct {
		link, target string
		refused      bool
	}{
		{"openwiki/pages", "/tmp", true},
		{"openwiki/a.md", "../../etc/passwd", true},
		{"openwiki/deep/b.md", "../../../x", true},
		{"openwiki/assets", "../src", false},
		{"openwiki/pages/x.md", "../../README.md", false},
	} {
		t.Run(tc.link, func(t *testing.T) {
			repo := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(repo, filepath.Dir(tc.link)), 0o755))
			require.NoError(t, os.Symlink(tc.target, filepath.Join(repo, tc.link)))
			err := CheckStart(Plan{Repo: repo, WriteDir: "openwiki"})
			if !tc.refused {
				require.NoError(t, err)
				return
			}
			require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
			require.Contains(t, err.Error(), tc.link+" is a symlink to "+tc.target)
		})
	}
}
