package mounts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/fscred"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/corral-sandbox/corral/mounts/hidden"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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

func TestCheckPaths(t *testing.T) {
	base := t.TempDir()
	repo := filepath.Join(base, "repo")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "sub"), 0o755))
	require.NoError(t, os.Symlink(repo, filepath.Join(base, "link")))
	for _, tc := range []struct {
		repo, state string
		want        string // "" = accepted
	}{
		{repo, filepath.Join(base, "state"), ""},
		{repo, "", ""},
		{"/", filepath.Join(base, "state"), "the repository is /"},
		{repo, filepath.Join(repo, ".corral"), "inside the repository"},
		{repo, filepath.Join(repo, "sub", "state"), "inside the repository"},
		{filepath.Join(base, "link"), filepath.Join(repo, "new", "state"), "inside the repository"},
		{repo, repo, "inside the repository"},
		{filepath.Join(repo, "sub"), repo, "inside corral's state directory"},
		{"", filepath.Join(base, "state"), "empty path"},
	} {
		err := CheckPaths(tc.repo, tc.state)
		if tc.want == "" {
			require.NoError(t, err, "%s %s", tc.repo, tc.state)
			continue
		}
		require.Error(t, err, "%s %s", tc.repo, tc.state)
		require.True(t, errdefs.IsInvalidArgument(err), "%v", err)
		require.Contains(t, err.Error(), tc.want)
		require.NotContains(t, err.Error(), "\n", "one line")
	}
}

// layoutRepo is a repository with a write directory, a page, hidden
// paths (some deep) and an ignore file.
func layoutRepo(t *testing.T) (string, *hidden.Set) {
	t.Helper()
	repo := t.TempDir()
	for p, c := range map[string]string{
		".openwikiignore":          "secrets/\n*.key\n",
		"secrets/a.txt":            "SECRET",
		"src/deep/x/y/z/id.key":    "KEY",
		"src/main.go":              "package main\n",
		"openwiki/index.md":        "# index\n",
		"openwiki/pages/a.md":      "# a\n",
		"openwiki/pages/sub/b.md":  "# b\n",
		".git/config":              "[core]\n",
		"openwiki/.claims/a.lock":  "x",
		"openwiki/assets/logo.txt": "logo\n",
	} {
		full := filepath.Join(repo, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
	hs, err := hidden.Compute(repo, hidden.Options{})
	require.NoError(t, err)
	return repo, hs
}

var layoutPlans = map[string]Plan{
	"read-only": {ReadOnly: true},
	"write dir": {WriteDir: "openwiki"},
	"page":      {WriteDir: "openwiki", Page: "openwiki/pages/a.md"},
	"new page":  {WriteDir: "openwiki", Page: "openwiki/pages/new/c.md"},
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounts need root")
	}
}

// requireGone checks that nothing is mounted at or under dir and that dir
// is gone.
func requireGone(t *testing.T, dir string) {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	require.NoError(t, err)
	require.Empty(t, ms, "mounts left under %s", dir)
	_, err = os.Lstat(dir)
	require.ErrorIs(t, err, fs.ErrNotExist, "%s left behind", dir)
}

// TestPrepareUnwindsEveryStep fails Prepare at each of its steps in turn,
// before the step and once it is done: every failure returns an error
// naming the step, never panics, and leaves no mount and no directory
// behind.
func TestPrepareUnwindsEveryStep(t *testing.T) {
	requireRoot(t)
	for name, plan := range layoutPlans {
		t.Run(name, func(t *testing.T) {
			repo, hs := layoutRepo(t)
			plan.Repo, plan.AreaBytes, plan.AreaInodes, plan.UID, plan.GID = repo, 1<<20, 1000, 65534, 65534
			state := t.TempDir()
			t.Cleanup(func() { _, _ = Sweep(state) })
			var steps []string
			l, err := prepare(filepath.Join(state, "s0"), plan, hs, func(step string) error { steps = append(steps, step); return nil })
			require.NoError(t, err)
			require.NoError(t, l.Close())
			requireGone(t, l.Dir)
			require.NotEmpty(t, steps)
			injected := errors.New("injected")
			for i, want := range steps {
				dir := filepath.Join(state, fmt.Sprintf("s%d", i+1))
				_, err := prepare(dir, plan, hs, func(step string) error {
					if step == want {
						return injected
					}
					return nil
				})
				require.ErrorIs(t, err, injected, want)
				require.Contains(t, err.Error(), strings.TrimSuffix(want, " (done)"))
				requireGone(t, dir)
			}
		})
	}
}

// TestPrepareOpenClose: the layout Prepare makes is what Open finds and
// Binds hands to the container; Close leaves nothing.
func TestPrepareOpenClose(t *testing.T) {
	requireRoot(t)
	for name, plan := range layoutPlans {
		t.Run(name, func(t *testing.T) {
			repo, hs := layoutRepo(t)
			plan.Repo, plan.AreaBytes, plan.AreaInodes, plan.UID, plan.GID = repo, 1<<20, 1000, 65534, 65534
			dir := filepath.Join(t.TempDir(), "layout")
			t.Cleanup(func() { _, _ = Sweep(dir) })
			l, err := Prepare(dir, plan, hs)
			require.NoError(t, err)
			again, err := Open(dir, plan)
			require.NoError(t, err)
			require.Equal(t, l, again)

			binds := l.Binds()
			require.Equal(t, ContainerRoot, binds[0].Destination)
			require.Equal(t, l.View, binds[0].Source)
			require.Contains(t, binds[0].Options, "ro")
			switch {
			case plan.ReadOnly:
				require.Len(t, binds, 1)
			case plan.Page != "":
				require.Len(t, binds, 2)
				require.Equal(t, ContainerRoot+"/"+plan.Page, binds[1].Destination)
				require.Equal(t, l.PageCopy, binds[1].Source)
				require.Contains(t, binds[1].Options, "rw")
			default:
				require.Len(t, binds, 2)
				require.Equal(t, ContainerRoot+"/openwiki", binds[1].Destination)
				require.Equal(t, l.Write, binds[1].Source)
			}
			for _, b := range binds {
				for _, o := range []string{"nosuid", "nodev", "noexec"} {
					require.Contains(t, b.Options, o)
				}
			}
			// The view hides what the set hides.
			_, err = os.Lstat(filepath.Join(l.View, "secrets"))
			require.ErrorIs(t, err, fs.ErrNotExist)
			_, err = os.Lstat(filepath.Join(l.View, "src/deep/x/y/z/id.key"))
			require.ErrorIs(t, err, fs.ErrNotExist)

			// A layout missing one of its mounts is neither used nor
			// repaired.
			require.NoError(t, unix.Unmount(l.View, 0))
			_, err = Open(dir, plan)
			require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
			require.Contains(t, err.Error(), "the repository view")

			require.NoError(t, l.Close())
			requireGone(t, dir)
			_, err = Open(dir, plan)
			require.ErrorIs(t, err, ErrNotMounted)
		})
	}
}

// TestPrepareRefusesStateInsideRepository is issue 9 item 8: a state
// directory inside the repository is refused with one line, before
// anything is made.
func TestPrepareRefusesStateInsideRepository(t *testing.T) {
	repo, hs := layoutRepo(t)
	dir := filepath.Join(repo, ".corral", "sessions", "x")
	_, err := Prepare(dir, Plan{Repo: repo, ReadOnly: true}, hs)
	require.True(t, errdefs.IsInvalidArgument(err), "%v", err)
	_, err = os.Lstat(filepath.Join(repo, ".corral"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// TestPrepareUnwindsAHiddenPathBeyondPATHMAX is issue 9's panic: a hidden
// path deeper than PATH_MAX. The whiteout layer is written relative to
// open descriptors, so such a path is whited out and closed like any
// other; one the pass cannot place (its directory gone since the set was
// computed) is made by path, fails half way, the error says so and
// nothing is left behind.
func TestPrepareUnwindsAHiddenPathBeyondPATHMAX(t *testing.T) {
	requireRoot(t)
	repo := t.TempDir()
	fd, err := unix.Open(repo, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	var parent int
	for i := 0; i < 2100; i++ { // "d/" × 2100 > PATH_MAX (4096)
		require.NoError(t, unix.Mkdirat(fd, "d", 0o755))
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		if i < 2099 {
			unix.Close(fd)
		} else {
			parent = fd
		}
		fd = next
	}
	require.NoError(t, unix.Mkdirat(fd, ".git", 0o755))
	unix.Close(fd)
	defer unix.Close(parent)
	hs, err := hidden.Compute(repo, hidden.Options{})
	require.NoError(t, err)
	require.Equal(t, 1, hs.Len())
	dir := filepath.Join(t.TempDir(), "layout")
	t.Cleanup(func() { _, _ = Sweep(dir) })
	l, err := Prepare(dir, Plan{Repo: repo, ReadOnly: true}, hs)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	requireGone(t, dir)

	// The set read back has no directory list: Prepare walks the
	// repository, where the hidden path's directory is now gone.
	data, err := json.Marshal(hs)
	require.NoError(t, err)
	hs, err = hidden.Unmarshal(data)
	require.NoError(t, err)
	require.NoError(t, unix.Unlinkat(parent, "d/.git", unix.AT_REMOVEDIR))
	require.NoError(t, unix.Unlinkat(parent, "d", unix.AT_REMOVEDIR))
	_, err = Prepare(dir, Plan{Repo: repo, ReadOnly: true}, hs)
	require.Error(t, err)
	require.Contains(t, err.Error(), "preparing the repository view")
	requireGone(t, dir)
}

// TestViewDirectoriesLookAlike is issue 9 item 4: every directory of the
// view is an overlay merged directory, so directories that hold hidden
// entries and those that do not report the same st_nlink (1), size,
// blocks and device, and each keeps the mode, owner and modification
// time of its repository directory.
func TestViewDirectoriesLookAlike(t *testing.T) {
	requireRoot(t)
	repo := t.TempDir()
	for p, c := range map[string]string{
		".openwikiignore":        "secret.txt\nbuild/\n",
		"a/secret.txt":           "S",
		"a/visible.txt":          "",
		"a/sub/x/y/z.txt":        "",
		"b/visible.txt":          "",
		"b/sub/c/d/e.txt":        "",
		"c/build/out":            "",
		"c/src/main.go":          "",
		"d/.git/config":          "",
		"e/many/":                "",
		"openwiki/pages/p.md":    "",
		"openwiki/.claims/a.lck": "",
	} {
		full := filepath.Join(repo, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			require.NoError(t, os.MkdirAll(full, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
	for i := range 40 {
		require.NoError(t, os.Mkdir(filepath.Join(repo, "e/many", fmt.Sprint(i)), 0o755))
	}
	require.NoError(t, os.Chmod(filepath.Join(repo, "b"), 0o750))
	require.NoError(t, os.Chown(filepath.Join(repo, "b/sub"), 1234, 5678))
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	require.NoError(t, os.Chtimes(filepath.Join(repo, "a"), old, old))
	hs, err := hidden.Compute(repo, hidden.Options{})
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "layout")
	t.Cleanup(func() { _, _ = Sweep(dir) })
	l, err := Prepare(dir, Plan{Repo: repo, ReadOnly: true}, hs)
	require.NoError(t, err)
	defer l.Close()

	var first *unix.Stat_t
	dirs := 0
	err = filepath.WalkDir(l.View, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if !d.IsDir() {
			return nil
		}
		dirs++
		rel, _ := filepath.Rel(l.View, p)
		var st, want unix.Stat_t
		require.NoError(t, unix.Lstat(p, &st))
		require.NoError(t, unix.Lstat(filepath.Join(repo, rel), &want))
		require.EqualValues(t, 1, st.Nlink, "%s: st_nlink", rel)
		if first == nil {
			first = &st
		}
		require.Equal(t, first.Dev, st.Dev, "%s: st_dev", rel)
		require.Equal(t, first.Size, st.Size, "%s: size", rel)
		require.Equal(t, first.Blocks, st.Blocks, "%s: blocks", rel)
		require.Equal(t, want.Mode, st.Mode, "%s: mode", rel)
		require.Equal(t, [2]uint32{want.Uid, want.Gid}, [2]uint32{st.Uid, st.Gid}, "%s: owner", rel)
		require.Equal(t, want.Mtim, st.Mtim, "%s: mtime", rel)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 56, dirs)
	for _, p := range []string{"a/secret.txt", "c/build", "d/.git", "openwiki/.claims"} {
		_, err := os.Lstat(filepath.Join(l.View, p))
		require.ErrorIs(t, err, fs.ErrNotExist, p)
	}
}

// BenchmarkPrepare100k prepares (and closes) the read-only layout of a
// repository of 100,000 files in 11,111 directories, 1,000 of them
// holding a hidden file: the cost of mirroring every directory in the
// whiteout layer.
// TestWhiteoutLayerMirrorsEveryVisibleDirectory pins the mirror on
// random trees with hidden entries at every depth: the directories of
// the whiteout layer are exactly the visible directories of a plain walk
// of the repository (a directory the mirror missed would be a pure lower
// directory in the view, with its real st_nlink: the oracle back), every
// hidden path is a whiteout, and every directory of the view reports
// st_nlink 1. Both sources of the directory list are checked: the hidden
// set's walk and, for a set read back from JSON, Prepare's own walk.
func TestWhiteoutLayerMirrorsEveryVisibleDirectory(t *testing.T) {
	requireRoot(t)
	for seed := range uint64(3) {
		repo := t.TempDir()
		rnd := rand.New(rand.NewPCG(seed, 42))
		namesAt := []string{"a", "b", "c", "build", ".git", "secret.txt", ".env", "x y", "d-1"}
		var mk func(dir string, depth int)
		mk = func(dir string, depth int) {
			for _, n := range namesAt {
				full := filepath.Join(dir, n)
				switch r := rnd.IntN(10); {
				case depth < 4 && r < 4:
					require.NoError(t, os.Mkdir(full, 0o755))
					mk(full, depth+1)
				case r < 7:
					require.NoError(t, os.WriteFile(full, nil, 0o644))
				}
			}
		}
		mk(repo, 0)
		require.NoError(t, os.WriteFile(filepath.Join(repo, ".openwikiignore"), []byte("build/\nsecret.txt\n"), 0o644))
		computed, err := hidden.Compute(repo, hidden.Options{Lists: []names.List{names.Secrets}})
		require.NoError(t, err)
		require.NotZero(t, computed.Len())
		data, err := json.Marshal(computed)
		require.NoError(t, err)
		readBack, err := hidden.Unmarshal(data)
		require.NoError(t, err)
		require.Nil(t, readBack.Dirs())

		var want []string
		require.NoError(t, filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
			require.NoError(t, err)
			rel, _ := filepath.Rel(repo, p)
			if _, h := computed.Lookup(filepath.ToSlash(rel)); h {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				want = append(want, filepath.ToSlash(rel))
			}
			return nil
		}))
		t.Logf("seed %d: %d visible directories, %d hidden paths", seed, len(want), computed.Len())
		for _, hs := range []*hidden.Set{computed, readBack} {
			dir := filepath.Join(t.TempDir(), "layout")
			t.Cleanup(func() { _, _ = Sweep(dir) })
			l, err := Prepare(dir, Plan{Repo: repo, ReadOnly: true}, hs)
			require.NoError(t, err)
			var got []string
			require.NoError(t, filepath.WalkDir(l.WH, func(p string, d fs.DirEntry, err error) error {
				require.NoError(t, err)
				if d.IsDir() {
					rel, _ := filepath.Rel(l.WH, p)
					got = append(got, filepath.ToSlash(rel))
				}
				return nil
			}))
			require.Equal(t, want, got, "seed %d: the mirrored directories", seed)
			for _, p := range computed.Paths() {
				var st unix.Stat_t
				require.NoError(t, unix.Lstat(filepath.Join(l.WH, p), &st), p)
				require.Equal(t, uint32(unix.S_IFCHR), st.Mode&unix.S_IFMT, "%s is a whiteout", p)
				require.Zero(t, st.Rdev, p)
			}
			for _, rel := range want {
				var st unix.Stat_t
				require.NoError(t, unix.Lstat(filepath.Join(l.View, rel), &st))
				require.EqualValues(t, 1, st.Nlink, "%s: st_nlink", rel)
			}
			require.NoError(t, l.Close())
		}
	}
}

// TestRemoveTree: Close's remover takes empty and full directories,
// files, whiteouts and links at any depth, and never follows a link: what
// a link points at survives.
func TestRemoveTree(t *testing.T) {
	requireRoot(t)
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "keep"), nil, 0o644))
	dir := filepath.Join(t.TempDir(), "tree")
	for _, d := range []string{"a/b/c", "a/empty", "e", "f/g/h/i"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a/b/file"), []byte("x"), 0o644))
	require.NoError(t, unix.Mknod(filepath.Join(dir, "f/g/wh"), unix.S_IFCHR, 0))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "a/link")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "f/g/h/i/link")))
	require.NoError(t, os.Chmod(filepath.Join(dir, "e"), 0o000))
	require.NoError(t, removeTree(dir))
	_, err := os.Lstat(dir)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.FileExists(t, filepath.Join(outside, "keep"))
	require.NoError(t, removeTree(dir), "a missing tree is fine")
}

func BenchmarkPrepare100k(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("mounts need root")
	}
	repo := b.TempDir()
	var mk func(dir string, depth int)
	mk = func(dir string, depth int) {
		if depth == 4 {
			for i := range 10 {
				name := fmt.Sprintf("f%d.txt", i)
				if i == 0 && strings.HasSuffix(dir, "0") {
					name = ".env"
				}
				require.NoError(b, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
			}
			return
		}
		for i := range 10 {
			d := filepath.Join(dir, fmt.Sprintf("d%d", i))
			require.NoError(b, os.Mkdir(d, 0o755))
			mk(d, depth+1)
		}
	}
	mk(repo, 0)
	hs, err := hidden.Compute(repo, hidden.Options{Lists: []names.List{names.Secrets}})
	require.NoError(b, err)
	require.Equal(b, 1000, hs.Len())
	state := b.TempDir()
	b.Cleanup(func() { _, _ = Sweep(state) })
	i := 0
	var start unix.Rusage
	require.NoError(b, unix.Getrusage(unix.RUSAGE_SELF, &start))
	var closing time.Duration
	for b.Loop() {
		i++
		l, err := Prepare(filepath.Join(state, fmt.Sprint(i)), Plan{Repo: repo, ReadOnly: true}, hs)
		require.NoError(b, err)
		t0 := time.Now()
		require.NoError(b, l.Close())
		closing += time.Since(t0)
	}
	// Prepare is what a session start waits for, Close (removing the
	// whiteout layer) what its end does.
	b.ReportMetric(float64(closing.Nanoseconds())/float64(i), "close-ns/op")
	// On a shared machine the CPU time per set-up says more than the
	// wall time.
	var end unix.Rusage
	require.NoError(b, unix.Getrusage(unix.RUSAGE_SELF, &end))
	b.ReportMetric(float64(end.Utime.Nano()-start.Utime.Nano())/float64(i), "user-ns/op")
	b.ReportMetric(float64(end.Stime.Nano()-start.Stime.Nano())/float64(i), "sys-ns/op")
}

// TestCopyAsReadsAsTheCaller: with Plan.CopyAs the copy out of the
// repository (the write directory's base, or the page) opens its sources
// with the caller's credentials at the moment it copies: a file swapped,
// just before the copy, for one the caller may not read (another user's
// 0600, as a caller's check could not see coming) is refused
// (errdefs.ErrPermissionDenied) and nothing of it is copied; the same
// layout without the swap copies as before. Before, the copy ran as root
// and took the swapped file.
func TestCopyAsReadsAsTheCaller(t *testing.T) {
	requireRoot(t)
	const caller = 1000
	for name, plan := range map[string]Plan{
		"write dir": {WriteDir: "openwiki"},
		"page":      {WriteDir: "openwiki", Page: "openwiki/pages/a.md"},
	} {
		for _, swap := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s swap=%v", name, swap), func(t *testing.T) {
				repo := t.TempDir()
				require.NoError(t, os.Chmod(repo, 0o755))
				for p, c := range map[string]string{"openwiki/index.md": "# index\n", "openwiki/pages/a.md": "# a\n"} {
					full := filepath.Join(repo, filepath.FromSlash(p))
					require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
					require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
					require.NoError(t, os.Chown(full, caller, caller))
				}
				hs, err := hidden.Compute(repo, hidden.Options{})
				require.NoError(t, err)
				plan.Repo, plan.AreaBytes, plan.AreaInodes, plan.UID, plan.GID = repo, 1<<20, 1000, 65534, 65534
				plan.CopyAs = &fscred.Creds{UID: caller, GID: caller}
				dir := filepath.Join(t.TempDir(), "layout")
				t.Cleanup(func() { _, _ = Sweep(dir) })
				at := "preparing the write area"
				if plan.Page != "" {
					at = "filling the write area's tmpfs"
				}
				l, err := prepare(dir, plan, hs, func(step string) error {
					if step == at && swap {
						// Another user's file, renamed over the page.
						secret := filepath.Join(repo, "openwiki/pages/.s")
						require.NoError(t, os.WriteFile(secret, []byte("SECRET\n"), 0o600))
						require.NoError(t, os.Rename(secret, filepath.Join(repo, "openwiki/pages/a.md")))
					}
					return nil
				})
				if !swap {
					require.NoError(t, err)
					defer l.Close()
					if plan.Page != "" {
						data, err := os.ReadFile(l.PageCopy)
						require.NoError(t, err)
						require.Equal(t, "# a\n", string(data))
					} else {
						data, err := os.ReadFile(filepath.Join(l.Write, "pages/a.md"))
						require.NoError(t, err)
						require.Equal(t, "# a\n", string(data))
					}
					return
				}
				require.Error(t, err)
				require.True(t, errdefs.IsPermissionDenied(err), "%v", err)
				require.ErrorContains(t, err, "uid 1000 (the caller) may not read it")
				require.ErrorContains(t, err, "openwiki/pages/a.md")
				requireGone(t, dir)
			})
		}
	}
}
