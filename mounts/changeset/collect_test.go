package changeset

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// diffNeedRoot skips tests that mount or make devices.
func diffNeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (overlay, tmpfs, mknod, trusted xattrs)")
	}
}

// diffWriteTree creates tree under root: a key ending in "/" is a
// directory, any other a 0644 file with the value as content.
func diffWriteTree(t testing.TB, root string, tree map[string]string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(root, 0o755))
	for _, k := range slices.Sorted(maps.Keys(tree)) {
		p := filepath.Join(root, filepath.FromSlash(k))
		if strings.HasSuffix(k, "/") {
			require.NoError(t, os.MkdirAll(p, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(tree[k]), 0o644))
	}
}

// diffReadTree returns the regular files under root (skipping .git at the
// top) keyed by slash path.
func diffReadTree(t testing.TB, root string) map[string]string {
	t.Helper()
	got := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && rel == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			got[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	}))
	return got
}

// diffOverlay is a real overlay like the session's write area: base as
// lowerdir, upper and work on a tmpfs.
type diffOverlay struct {
	base, upper, merged string
	mounted             bool
}

func diffNewOverlay(t testing.TB, tree map[string]string) *diffOverlay {
	t.Helper()
	diffNeedRoot(t)
	// Not t.TempDir: a test name may hold a comma, which overlay options
	// cannot carry.
	root, err := os.MkdirTemp("", "corral-diff-")
	require.NoError(t, err)
	clean := true
	t.Cleanup(func() {
		if clean {
			_ = os.RemoveAll(root)
		}
	})
	o := &diffOverlay{
		base:   filepath.Join(root, "base"),
		upper:  filepath.Join(root, "area", "upper"),
		merged: filepath.Join(root, "merged"),
	}
	diffWriteTree(t, o.base, tree)
	area := filepath.Join(root, "area")
	require.NoError(t, os.Mkdir(area, 0o700))
	require.NoError(t, os.Mkdir(o.merged, 0o755))
	require.NoError(t, unix.Mount("tmpfs", area, "tmpfs", 0, "size=64m,nr_inodes=20000"))
	t.Cleanup(func() {
		if err := unix.Unmount(area, 0); err != nil {
			clean = false
			t.Errorf("unmounting tmpfs: %v", err)
		}
	})
	work := filepath.Join(area, "work")
	require.NoError(t, os.Mkdir(o.upper, 0o755))
	require.NoError(t, os.Mkdir(work, 0o755))
	opts := "lowerdir=" + o.base + ",upperdir=" + o.upper + ",workdir=" + work + ",redirect_dir=off,metacopy=off,index=off"
	require.NoError(t, unix.Mount("overlay", o.merged, "overlay", 0, opts))
	o.mounted = true
	t.Cleanup(func() {
		if !o.unmount(t) {
			clean = false
		}
	})
	return o
}

// unmount unmounts the overlay (once) and reports success.
func (o *diffOverlay) unmount(t testing.TB) bool {
	t.Helper()
	if !o.mounted {
		return true
	}
	if err := unix.Unmount(o.merged, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		t.Errorf("unmounting overlay: %v", err)
		return false
	}
	o.mounted = false
	return true
}

// diffOps are file operations on the merged directory m.
type diffOps func(t *testing.T, m string)

func diffP(m, rel string) string { return filepath.Join(m, filepath.FromSlash(rel)) }

func diffWrite(t *testing.T, m, rel, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(diffP(m, rel)), 0o755))
	require.NoError(t, os.WriteFile(diffP(m, rel), []byte(content), 0o644))
}

// diffSummary renders changes compactly for comparison.
func diffSummary(cs *Set) []string {
	out := []string{}
	for _, c := range cs.Changes {
		if c.Kind == Delete {
			out = append(out, fmt.Sprintf("delete %s", c.Path))
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %q", c.Kind, c.Path, c.After))
	}
	return out
}

func diffViolations(cs *Set) []string {
	out := []string{}
	for _, v := range cs.Violations {
		out = append(out, v.Path+": "+v.Reason)
	}
	return out
}

func TestCollectOverlay(t *testing.T) {
	tests := []struct {
		name           string
		tree           map[string]string
		ops            diffOps
		wantChanges    []string
		wantViolations []string
	}{
		{
			name: "create modify delete, metadata-only copy-ups ignored",
			tree: map[string]string{
				"pages/a.md": "a\n", "pages/b.md": "b\n", "old.md": "o\n",
				"keep.md": "k\n", "touched.md": "t\n", "chmod.md": "c\n",
			},
			ops: func(t *testing.T, m string) {
				diffWrite(t, m, "pages/new.md", "new\n")
				diffWrite(t, m, "pages/a.md", "a\nmore\n")
				require.NoError(t, os.Remove(diffP(m, "old.md")))
				diffWrite(t, m, "keep.md", "k\n") // rewritten, same bytes
				now := time.Now().Add(time.Hour)
				require.NoError(t, os.Chtimes(diffP(m, "touched.md"), now, now))
				require.NoError(t, os.Chmod(diffP(m, "chmod.md"), 0o600))
			},
			wantChanges: []string{
				`delete openwiki/old.md`,
				`modify openwiki/pages/a.md "a\nmore\n"`,
				`create openwiki/pages/new.md "new\n"`,
			},
		},
		{
			name: "directory removed and recreated is opaque",
			tree: map[string]string{
				"pages/a.md": "a\n", "pages/b.md": "b\n", "pages/sub/c.md": "c\n", "pages/sub/d.md": "d\n", "other.md": "x\n",
			},
			ops: func(t *testing.T, m string) {
				require.NoError(t, os.RemoveAll(diffP(m, "pages")))
				diffWrite(t, m, "pages/a.md", "a\n")
				diffWrite(t, m, "pages/sub/c.md", "c2\n")
				diffWrite(t, m, "pages/e.md", "e\n")
			},
			wantChanges: []string{
				`delete openwiki/pages/b.md`,
				`create openwiki/pages/e.md "e\n"`,
				`modify openwiki/pages/sub/c.md "c2\n"`,
				`delete openwiki/pages/sub/d.md`,
			},
		},
		{
			name: "rename is a delete and a create",
			tree: map[string]string{"a.md": "a\n", "d/x.md": "x\n"},
			ops: func(t *testing.T, m string) {
				require.NoError(t, os.Rename(diffP(m, "a.md"), diffP(m, "b.md")))
				require.NoError(t, os.Mkdir(diffP(m, "e"), 0o755))
				require.NoError(t, os.Rename(diffP(m, "d/x.md"), diffP(m, "e/x.md")))
			},
			wantChanges: []string{
				`delete openwiki/a.md`,
				`create openwiki/b.md "a\n"`,
				`delete openwiki/d/x.md`,
				`create openwiki/e/x.md "x\n"`,
			},
		},
		{
			name: "type swaps are explicit",
			tree: map[string]string{"pages/x.md": "x\n", "pages/y/z.md": "z\n", "file": "f\n", "keep/k.md": "k\n"},
			ops: func(t *testing.T, m string) {
				require.NoError(t, os.RemoveAll(diffP(m, "pages")))
				diffWrite(t, m, "pages", "now a file\n")
				require.NoError(t, os.Remove(diffP(m, "file")))
				diffWrite(t, m, "file/c.md", "c\n")
			},
			wantChanges: []string{
				`delete openwiki/file`,
				`create openwiki/file/c.md "c\n"`,
				`create openwiki/pages "now a file\n"`,
				`delete openwiki/pages/x.md`,
				`delete openwiki/pages/y/z.md`,
			},
		},
		{
			name: "rm -r deletes every file, empty directories are no change",
			tree: map[string]string{"pages/a.md": "a\n", "pages/s/b.md": "b\n", "empty/": ""},
			ops: func(t *testing.T, m string) {
				require.NoError(t, os.RemoveAll(diffP(m, "pages")))
				require.NoError(t, os.Remove(diffP(m, "empty")))
				require.NoError(t, os.MkdirAll(diffP(m, "new/empty"), 0o755))
				diffWrite(t, m, "new/sub/n.md", "n")
			},
			wantChanges: []string{
				`create openwiki/new/sub/n.md "n"`,
				`delete openwiki/pages/a.md`,
				`delete openwiki/pages/s/b.md`,
			},
		},
		{
			name: "create then delete leaves nothing",
			tree: map[string]string{"a.md": "a\n"},
			ops: func(t *testing.T, m string) {
				diffWrite(t, m, "tmp.md", "t\n")
				require.NoError(t, os.Remove(diffP(m, "tmp.md")))
				diffWrite(t, m, "a.md", "changed\n")
				diffWrite(t, m, "a.md", "a\n")
			},
			wantChanges: []string{},
		},
		{
			name: "special files, bits and names are violations",
			tree: map[string]string{"a.md": "a\n", "l.md": "l\n", "ok.md": "o\n"},
			ops: func(t *testing.T, m string) {
				diffWrite(t, m, "x.sh", "#!/bin/sh\n")
				require.NoError(t, os.Chmod(diffP(m, "x.sh"), 0o755))
				require.NoError(t, os.Chmod(diffP(m, "l.md"), 0o744)) // same bytes, +x
				require.NoError(t, os.Symlink("../README.md", diffP(m, "r")))
				require.NoError(t, os.Link(diffP(m, "a.md"), diffP(m, "b.md")))
				require.NoError(t, unix.Mkfifo(diffP(m, "p"), 0o644))
				l, err := net.Listen("unix", diffP(m, "s"))
				require.NoError(t, err)
				l.(*net.UnixListener).SetUnlinkOnClose(false)
				require.NoError(t, l.Close())
				require.NoError(t, unix.Mknod(diffP(m, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
				diffWrite(t, m, "su.md", "s\n")
				require.NoError(t, os.Chmod(diffP(m, "su.md"), 0o644|os.ModeSetuid))
				diffWrite(t, m, "bin.md", "a\x00b")
				diffWrite(t, m, "latin1.md", "caf\xe9\n")
				diffWrite(t, m, ".git/config", "[core]\n")
				diffWrite(t, m, "sub/.GIT", "gitdir: ../x\n")
				diffWrite(t, m, ".claims/a.lock", "")
				diffWrite(t, m, ".openwikiignore", "!*\n")
				diffWrite(t, m, "sub/.gitignore", "*\n")
				diffWrite(t, m, "a\nb.md", "n\n")
				diffWrite(t, m, "x\u202Egpj.md", "b\n")
				diffWrite(t, m, "bad\xff.md", "u\n")
				diffWrite(t, m, `q"uote.md`, "q\n")
				diffWrite(t, m, "ok.md", "fine\n")
			},
			wantChanges: []string{`modify openwiki/ok.md "fine\n"`},
			wantViolations: []string{
				`"openwiki/a\nb.md": name contains control character U+000A`,
				`"openwiki/bad\xff.md": name is not valid UTF-8`,
				`"openwiki/x\u202egpj.md": name contains format character U+202E (bidi or invisible)`,
				`openwiki/.claims: .claims is owned by corral`,
				`openwiki/.git: .git is owned by git and never writable`,
				`openwiki/.openwikiignore: .openwikiignore is an ignore file: ignore files cannot be changed from the sandbox`,
				`openwiki/a.md: hard link (2 links)`,
				`openwiki/b.md: hard link (2 links)`,
				`openwiki/bin.md: binary content (a NUL byte or invalid UTF-8) is not allowed`,
				`openwiki/l.md: executable bit (mode 0744)`,
				`openwiki/latin1.md: binary content (a NUL byte or invalid UTF-8) is not allowed`,
				`openwiki/null: character device 1:3`,
				`openwiki/p: fifo`,
				`openwiki/q"uote.md: name contains '"'`,
				`openwiki/r: symbolic link`,
				`openwiki/s: socket`,
				`openwiki/su.md: setuid, setgid or sticky bit (mode 04644)`,
				`openwiki/sub/.GIT: .GIT is owned by git and never writable`,
				`openwiki/sub/.gitignore: .gitignore is an ignore file: ignore files cannot be changed from the sandbox`,
				`openwiki/x.sh: executable bit (mode 0755)`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := diffNewOverlay(t, tc.tree)
			tc.ops(t, o.merged)
			o.unmount(t)
			cs, err := Collect(o.upper, o.base, "openwiki", DefaultLimits())
			require.NoError(t, err)
			assert.Equal(t, tc.wantChanges, diffSummary(cs))
			want := tc.wantViolations
			if want == nil {
				want = []string{}
			}
			assert.Equal(t, want, diffViolations(cs))
			if len(want) == 0 {
				assert.NoError(t, cs.Err())
			} else {
				assert.True(t, errdefs.IsPermissionDenied(cs.Err()))
			}
		})
	}
}

func TestCollectOpaqueXattr(t *testing.T) {
	// The kernel behaviour the opaque row above relies on.
	o := diffNewOverlay(t, map[string]string{"pages/a.md": "a\n"})
	require.NoError(t, os.RemoveAll(diffP(o.merged, "pages")))
	require.NoError(t, os.Mkdir(diffP(o.merged, "pages"), 0o755))
	o.unmount(t)
	buf := make([]byte, 8)
	n, err := unix.Lgetxattr(filepath.Join(o.upper, "pages"), xattrOpaque, buf)
	require.NoError(t, err)
	assert.Equal(t, "y", string(buf[:n]))
	cs, err := Collect(o.upper, o.base, "openwiki", DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, []string{"delete openwiki/pages/a.md"}, diffSummary(cs))
}

func TestCollectModeAndDigests(t *testing.T) {
	o := diffNewOverlay(t, map[string]string{"a.md": "a\n"})
	diffWrite(t, o.merged, "a.md", "b\n")
	require.NoError(t, os.WriteFile(diffP(o.merged, "n.md"), []byte("n\n"), 0o600))
	o.unmount(t)
	cs, err := Collect(o.upper, o.base, "openwiki", DefaultLimits())
	require.NoError(t, err)
	require.Len(t, cs.Changes, 2)
	a, n := cs.Changes[0], cs.Changes[1]
	assert.Equal(t, SHA256([]byte("a\n")), a.BeforeSHA256)
	assert.Equal(t, SHA256([]byte("b\n")), a.AfterSHA256)
	assert.Equal(t, os.FileMode(0o644), a.Mode)
	assert.Equal(t, int64(2), a.Size)
	assert.Equal(t, "", n.BeforeSHA256)
	assert.Equal(t, os.FileMode(0o600), n.Mode)

	b, err := json.Marshal(a)
	require.NoError(t, err)
	assert.JSONEq(t, `{"path":"openwiki/a.md","kind":"modify","before_sha256":"`+a.BeforeSHA256+
		`","after_sha256":"`+a.AfterSHA256+`","size":2,"mode":420}`, string(b))
}

// TestCollectCraftedUpper builds an upper dir by hand, as a crafted layer
// could: whiteouts and devices the kernel would not make, overlay xattrs.
func TestCollectCraftedUpper(t *testing.T) {
	diffNeedRoot(t)
	root := t.TempDir()
	base, upper := filepath.Join(root, "base"), filepath.Join(root, "upper")
	diffWriteTree(t, base, map[string]string{"old.md": "o\n", "d/x.md": "x\n", ".git/config": "[core]\n", "link-target.md": "t\n"})
	require.NoError(t, os.Symlink("link-target.md", filepath.Join(base, "lnk")))
	diffWriteTree(t, upper, map[string]string{"redir/": "", "opx/": "", "meta.md": "m\n", "e/": ""})
	whiteout := func(rel string) {
		require.NoError(t, unix.Mknod(filepath.Join(upper, rel), unix.S_IFCHR, 0))
	}
	whiteout("old.md")
	whiteout("d")
	whiteout(".git")
	whiteout("lnk")
	whiteout("e/never-existed.md")
	require.NoError(t, unix.Mknod(filepath.Join(upper, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	require.NoError(t, unix.Mknod(filepath.Join(upper, "blk"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))))
	require.NoError(t, unix.Setxattr(filepath.Join(upper, "redir"), xattrRedirect, []byte("/elsewhere"), 0))
	require.NoError(t, unix.Setxattr(filepath.Join(upper, "opx"), xattrOpaque, []byte("x"), 0))
	require.NoError(t, unix.Setxattr(filepath.Join(upper, "meta.md"), xattrMetacopy, nil, 0))

	cs, err := Collect(upper, base, "openwiki", DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, []string{"delete openwiki/d/x.md", "delete openwiki/old.md"}, diffSummary(cs))
	assert.Equal(t, []string{
		"openwiki/.git: .git is owned by git and never writable",
		"openwiki/blk: block device 7:0",
		"openwiki/lnk: symbolic link in the base, which a text patch cannot change",
		"openwiki/meta.md: overlay metacopy xattr (metacopy must be off)",
		"openwiki/null: character device 1:3",
		`openwiki/opx: unexpected overlay opaque value "x"`,
		"openwiki/redir: overlay redirect xattr (redirect_dir must be off)",
	}, diffViolations(cs))
	var rej *RejectedError
	require.ErrorAs(t, cs.Err(), &rej)
	assert.Len(t, rej.Violations, 7)
	assert.Contains(t, cs.Err().Error(), "openwiki/null: character device 1:3")
}

func TestCollectLimits(t *testing.T) {
	t.Run("sparse 100 GB file is refused without reading", func(t *testing.T) {
		o := diffNewOverlay(t, map[string]string{"a.md": "a\n"})
		require.NoError(t, os.Truncate(diffWriteEmpty(t, o.merged, "big"), 100<<30))
		o.unmount(t)
		start := time.Now()
		cs, err := Collect(o.upper, o.base, "openwiki", DefaultLimits())
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 5*time.Second, "read without the size check")
		assert.Equal(t, []string{"openwiki/big: size 107374182400 bytes exceeds the limit of 8388608 bytes"}, diffViolations(cs))
	})
	t.Run("too many files", func(t *testing.T) {
		o := diffNewOverlay(t, nil)
		for i := range 300 {
			diffWrite(t, o.merged, fmt.Sprintf("d%d/f%d.md", i%3, i), "x\n")
		}
		o.unmount(t)
		cs, err := Collect(o.upper, o.base, "openwiki", Limits{MaxFiles: 100})
		require.NoError(t, err)
		assert.Equal(t, []string{"openwiki: more than 100 entries (files, directories and deletions)"}, diffViolations(cs))
	})
	t.Run("deletions count as entries", func(t *testing.T) {
		tree := map[string]string{}
		for i := range 50 {
			tree[fmt.Sprintf("pages/%d.md", i)] = "x\n"
		}
		o := diffNewOverlay(t, tree)
		require.NoError(t, os.RemoveAll(diffP(o.merged, "pages")))
		o.unmount(t)
		cs, err := Collect(o.upper, o.base, "openwiki", Limits{MaxFiles: 20})
		require.NoError(t, err)
		assert.Equal(t, []string{"openwiki: more than 20 entries (files, directories and deletions)"}, diffViolations(cs))
	})
	t.Run("too deep", func(t *testing.T) {
		o := diffNewOverlay(t, nil)
		deep := strings.Repeat("d/", 40) + "f.md"
		diffWrite(t, o.merged, deep, "x\n")
		diffWrite(t, o.merged, "shallow.md", "s\n")
		o.unmount(t)
		cs, err := Collect(o.upper, o.base, "openwiki", DefaultLimits())
		require.NoError(t, err)
		assert.Equal(t, []string{"openwiki/" + strings.Repeat("d/", 32) + "d: deeper than 32 path components"}, diffViolations(cs))
		assert.Equal(t, []string{`create openwiki/shallow.md "s\n"`}, diffSummary(cs))
	})
	t.Run("file and total sizes", func(t *testing.T) {
		o := diffNewOverlay(t, nil)
		for i := range 5 {
			diffWrite(t, o.merged, fmt.Sprintf("f%d.md", i), strings.Repeat("x", 300))
		}
		diffWrite(t, o.merged, "g.md", strings.Repeat("y", 2000))
		o.unmount(t)
		cs, err := Collect(o.upper, o.base, "openwiki", Limits{MaxFileBytes: 1000, MaxTotalBytes: 1000})
		require.NoError(t, err)
		assert.Equal(t, []string{
			"openwiki/f3.md: change set exceeds the total limit of 1000 bytes",
			"openwiki/g.md: size 2000 bytes exceeds the limit of 1000 bytes",
		}, diffViolations(cs))
	})
	t.Run("zero limits take the defaults", func(t *testing.T) {
		assert.Equal(t, DefaultLimits(), Limits{}.WithDefaults())
		assert.Equal(t, Limits{MaxFileBytes: 1, MaxTotalBytes: 64 << 20, MaxFiles: 10000, MaxDepth: 32}, Limits{MaxFileBytes: 1, MaxDepth: -1}.WithDefaults())
	})
}

func diffWriteEmpty(t *testing.T, m, rel string) string {
	t.Helper()
	diffWrite(t, m, rel, "")
	return diffP(m, rel)
}

func TestCollectErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Collect(filepath.Join(dir, "missing"), dir, "openwiki", DefaultLimits())
	assert.True(t, errdefs.IsNotFound(err), "%v", err)
	_, err = Collect("relative", dir, "openwiki", DefaultLimits())
	assert.True(t, errdefs.IsInvalidArgument(err), "%v", err)
	for _, prefix := range []string{"../x", "/abs", "a//b", "openwiki/.git", "a/../b"} {
		_, err = Collect(dir, dir, prefix, DefaultLimits())
		assert.True(t, errdefs.IsInvalidArgument(err), "prefix %q: %v", prefix, err)
	}
	require.NoError(t, os.Symlink(dir, filepath.Join(dir, "link")))
	_, err = Collect(filepath.Join(dir, "link"), dir, "openwiki", DefaultLimits())
	assert.Error(t, err, "an upper dir that is a symlink is not followed")

	// An empty upper over any base is an empty set; prefix "" is the repo root.
	upper := filepath.Join(dir, "u")
	require.NoError(t, os.Mkdir(upper, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(upper, "x.md"), []byte("x\n"), 0o644))
	cs, err := Collect(upper, filepath.Join(dir, "nobase"), "", DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, []string{`create x.md "x\n"`}, diffSummary(cs))
}

func TestInScope(t *testing.T) {
	c := &collector{prefix: "openwiki"}
	for repo, want := range map[string]bool{
		"openwiki/a.md":  true,
		"openwiki":       false,
		"openwikix/a.md": false,
		"openwiki/../a":  false,
		"../a":           false,
		"/etc/cron.d/x":  false,
		".git/config":    false,
		"openwiki//a":    false,
	} {
		assert.Equal(t, want, c.inScope(repo), repo)
	}
}

func TestCheckName(t *testing.T) {
	for name, bad := range map[string]bool{
		"a.md": false, "a b.md": false, "Zürich.md": false, "x ": false, "-rf": false,
		"": true, ".": true, "..": true, "a/b": true, "a\tb": true, "a\x7fb": true,
		"a\u0085b": true, "a\u200bb": true, "a\u2066b": true, "a\u2028b": true, "\xc3": true,
		".git": true, ".Git": true, ".git.": true, ".git ": true, "GIT~1": true, ".claims": true,
		".CLAIMS": true, ".openwikiignore": true, ".gitignore": true, ".gitattributes": true,
		".gitmodules": true, `a\b`: true, `a"b`: true, ".github": false, ".gitx": false,
		// Look-alikes fold onto the reserved names (names.Fold).
		"．claims": true, ".ｇｉｔ": true, ".claims.": true, ".claims ": true, ".Claims::$DATA": true,
		".corral-apply-1": true, "claims": false,
	} {
		assert.Equal(t, bad, checkName(name) != "", "%q: %s", name, checkName(name))
	}
	assert.Equal(t, "．claims is owned by corral", checkName("．claims"))
	assert.Equal(t, ".GIT. is owned by git and never writable", checkName(".GIT."))
}

func TestCollectPage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	rel := "openwiki/pages/a.md"
	// orig holds the page; missing does not; lnk holds a link in its place.
	orig, missing, lnkRepo := t.TempDir(), t.TempDir(), t.TempDir()
	diffWriteTree(t, orig, map[string]string{rel: "old\n"})
	diffWriteTree(t, lnkRepo, map[string]string{"openwiki/pages/": ""})
	require.NoError(t, os.Symlink(filepath.Join(orig, rel), filepath.Join(lnkRepo, rel)))

	cs, err := CollectPage(write("c1", "new\n", 0o644), orig, rel, DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, []string{`modify openwiki/pages/a.md "new\n"`}, diffSummary(cs))
	assert.Equal(t, SHA256([]byte("old\n")), cs.Changes[0].BeforeSHA256)

	cs, err = CollectPage(write("c2", "old\n", 0o644), orig, rel, DefaultLimits())
	require.NoError(t, err)
	assert.Empty(t, cs.Changes)

	cs, err = CollectPage(write("c3", "made\n", 0o644), missing, rel, DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, []string{`create openwiki/pages/a.md "made\n"`}, diffSummary(cs))

	cs, err = CollectPage(write("c4", "", 0o644), missing, rel, DefaultLimits())
	require.NoError(t, err)
	assert.Empty(t, cs.Changes, "an untouched empty copy of an absent page")

	cs, err = CollectPage(write("c5", "x\n", 0o755), orig, rel, DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, []string{"openwiki/pages/a.md: executable bit (mode 0755)"}, diffViolations(cs))

	cs, err = CollectPage(write("c6", "x\n", 0o644), orig, "openwiki/.claims/a.lock", DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, []string{"openwiki/.claims/a.lock: .claims is owned by corral"}, diffViolations(cs))

	cs, err = CollectPage(write("c7", "x\n", 0o644), orig, "openwiki/../a.md", DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, []string{"openwiki/../a.md: not a clean relative path"}, diffViolations(cs))

	lnk := filepath.Join(dir, "lnk.md")
	require.NoError(t, os.Symlink(filepath.Join(orig, rel), lnk))
	cs, err = CollectPage(write("c8", "x\n", 0o644), lnkRepo, rel, DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, []string{"openwiki/pages/a.md: symbolic link in the base, which a text patch cannot change"}, diffViolations(cs))

	cs, err = CollectPage(lnk, orig, rel, DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, []string{"openwiki/pages/a.md: symbolic link"}, diffViolations(cs))

	cs, err = CollectPage(write("c9", strings.Repeat("x", 100), 0o644), orig, rel, Limits{MaxFileBytes: 10})
	require.NoError(t, err)
	assert.Equal(t, []string{"openwiki/pages/a.md: size 100 bytes exceeds the limit of 10 bytes"}, diffViolations(cs))

	_, err = CollectPage(filepath.Join(dir, "nocopy"), orig, rel, DefaultLimits())
	assert.True(t, errdefs.IsNotFound(err), "%v", err)
}

func TestRejectedError(t *testing.T) {
	cs := &Set{Violations: []Problem{{Path: "openwiki/p", Reason: "fifo"}, {Path: "openwiki/r", Reason: "symbolic link"}}}
	err := cs.Err()
	assert.True(t, errdefs.IsPermissionDenied(err))
	assert.EqualError(t, err, "change set rejected: openwiki/p: fifo; openwiki/r: symbolic link")
	assert.NoError(t, (&Set{}).Err())
	assert.NoError(t, (*Set)(nil).Err())
}

// BenchmarkCollect10 collects 10 changed files from an upper dir over a
// base of 1,000 files (plain directories: the collector reads the upper dir
// directly, so no mount is needed).
func BenchmarkCollect10(b *testing.B) {
	root := b.TempDir()
	base, upper := filepath.Join(root, "base"), filepath.Join(root, "upper")
	tree := map[string]string{}
	for d := range 50 {
		for f := range 20 {
			tree[fmt.Sprintf("d%02d/f%02d.md", d, f)] = strings.Repeat(fmt.Sprintf("line %d %d\n", d, f), 40)
		}
	}
	diffWriteTree(b, base, tree)
	changed := map[string]string{}
	for i := range 10 {
		changed[fmt.Sprintf("d%02d/f%02d.md", i*5, i)] = strings.Repeat("changed line\n", 40)
	}
	diffWriteTree(b, upper, changed)
	b.ResetTimer()
	for b.Loop() {
		cs, err := Collect(upper, base, "openwiki", DefaultLimits())
		if err != nil || len(cs.Changes) != 10 {
			b.Fatalf("collect: %v, %d changes", err, len(cs.Changes))
		}
	}
}

func TestCollectRefusesForeignXattrs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for trusted.* xattrs")
	}
	base, upper := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(upper, "pages"), 0o755))
	f := filepath.Join(upper, "pages", "a.md")
	require.NoError(t, os.WriteFile(f, []byte("# a\n"), 0o644))
	require.NoError(t, unix.Setxattr(f, "user.evil", []byte("x"), 0))
	d := filepath.Join(upper, "pages")
	require.NoError(t, unix.Setxattr(d, "trusted.note", []byte("x"), 0))
	cs, err := Collect(upper, base, "openwiki", DefaultLimits())
	require.NoError(t, err)
	require.Error(t, cs.Err())
	require.Contains(t, cs.Violations, Problem{Path: "openwiki/pages/a.md", Reason: `extended attribute "user.evil"`})
	require.Contains(t, cs.Violations, Problem{Path: "openwiki/pages", Reason: `extended attribute "trusted.note"`})
}
