package rootfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// createTree builds a tree under root from declarative entries, in the
// spirit of filepath-securejoin's test helper: "dir P", "file P CONTENT",
// "symlink P TARGET", "fifo P".
func createTree(t *testing.T, root string, entries ...string) {
	t.Helper()
	for _, e := range entries {
		f := strings.SplitN(e, " ", 3)
		p := filepath.Join(root, f[1])
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		switch f[0] {
		case "dir":
			require.NoError(t, os.MkdirAll(p, 0o755))
		case "file":
			content := ""
			if len(f) == 3 {
				content = f[2]
			}
			require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		case "symlink":
			require.NoError(t, os.Symlink(f[2], p))
		case "fifo":
			require.NoError(t, unix.Mkfifo(p, 0o644))
		default:
			t.Fatalf("unknown entry %q", e)
		}
	}
}

func openRoot(t *testing.T, entries ...string) *Dir {
	t.Helper()
	root := t.TempDir()
	createTree(t, root, entries...)
	d, err := OpenRoot(root)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

var escapeTree = []string{
	"dir a/b",
	"file a/b/f inside",
	"file top secret-ish",
	"symlink a/up ..",
	"symlink a/in b/f",
	"symlink a/abs /etc/passwd",
	"symlink a/out ../../../../../../etc",
	"symlink a/loop loop",
}

// TestOpenResolve: NoSymlinks refuses every link, Beneath follows links
// that stay below the root, and both refuse escapes rather than clamp
// them to the root as RESOLVE_IN_ROOT or SecureJoin would.
func TestOpenResolve(t *testing.T) {
	d := openRoot(t, escapeTree...)
	for _, tc := range []struct {
		path       string
		noSymlinks error // nil: opens
		beneath    error
	}{
		{"a/b/f", nil, nil},
		{"a/in", unix.ELOOP, nil},
		{"a/up/top", unix.ELOOP, nil},
		{"a/abs", unix.ELOOP, unix.EXDEV},
		{"a/out/passwd", unix.ELOOP, unix.EXDEV},
		{"../etc/passwd", unix.EXDEV, unix.EXDEV},
		{"/etc/passwd", unix.EXDEV, unix.EXDEV},
		{"a/b/../../..", unix.EXDEV, unix.EXDEV},
		{"a/loop", unix.ELOOP, unix.ELOOP},
		{"a/missing", unix.ENOENT, unix.ENOENT},
	} {
		for _, how := range []struct {
			name string
			res  Resolve
			want error
		}{{"NoSymlinks", NoSymlinks, tc.noSymlinks}, {"Beneath", Beneath, tc.beneath}} {
			f, err := d.Open(tc.path, how.res, unix.O_RDONLY)
			if how.want == nil {
				require.NoError(t, err, "%s %s", how.name, tc.path)
				f.Close()
				continue
			}
			require.ErrorIs(t, err, how.want, "%s %s", how.name, tc.path)
			var pe *os.PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tc.path, pe.Path)
		}
	}
}

// TestOpenRefusesMagicLinks: /proc/self/root and /proc/self/fd/N are
// magic links; neither semantics follows them.
func TestOpenRefusesMagicLinks(t *testing.T) {
	d, err := OpenRoot("/proc/self")
	require.NoError(t, err)
	defer d.Close()
	for _, p := range []string{"root", "root/etc/passwd", "cwd", "fd/0", "exe"} {
		for _, how := range []Resolve{NoSymlinks, Beneath} {
			_, err := d.Open(p, how, unix.O_RDONLY)
			require.ErrorIs(t, err, unix.ELOOP, p)
		}
	}
}

// TestRetryEAGAIN: a lookup that races a rename (openat2 returns EAGAIN)
// is retried, and one that keeps racing fails with EAGAIN once the
// deadline passed.
func TestRetryEAGAIN(t *testing.T) {
	d := openRoot(t, "file f x")
	calls := 0
	d.sys = &syscalls{openat2: func(dirfd int, p string, how *unix.OpenHow) (int, error) {
		calls++
		if calls <= 3 {
			return -1, unix.EAGAIN
		}
		return unix.Openat2(dirfd, p, how)
	}}
	f, err := d.Open("f", NoSymlinks, unix.O_RDONLY)
	require.NoError(t, err)
	f.Close()
	require.Equal(t, 4, calls)

	// Subdirectories share the hook: one retry loop everywhere.
	sub, err := d.OpenDir(".", NoSymlinks)
	require.NoError(t, err)
	defer sub.Close()
	calls = 0
	sub.sys.openat2 = func(int, string, *unix.OpenHow) (int, error) { calls++; return -1, unix.EAGAIN }
	start := time.Now()
	_, err = sub.Open("f", NoSymlinks, unix.O_RDONLY)
	require.ErrorIs(t, err, unix.EAGAIN)
	require.Greater(t, calls, 1)
	require.GreaterOrEqual(t, time.Since(start), retryDeadline)
	require.Less(t, time.Since(start), 500*retryDeadline, "retried without a deadline")

	// Anything else is not retried.
	calls = 0
	sub.sys.openat2 = func(int, string, *unix.OpenHow) (int, error) { calls++; return -1, unix.EXDEV }
	_, err = sub.Open("f", NoSymlinks, unix.O_RDONLY)
	require.ErrorIs(t, err, unix.EXDEV)
	require.Equal(t, 1, calls)
}

func TestReadFile(t *testing.T) {
	d := openRoot(t, "file exact 12345678", "file big 123456789", "fifo pipe", "dir sub", "symlink link exact", "file sub/in 1")
	data, st, err := d.ReadFile("exact", NoSymlinks, 8)
	require.NoError(t, err)
	require.Equal(t, "12345678", string(data))
	require.EqualValues(t, 8, st.Size)

	_, _, err = d.ReadFile("big", NoSymlinks, 8)
	require.ErrorIs(t, err, ErrTooLarge)
	require.True(t, errdefs.IsFailedPrecondition(err))

	// A fifo is never opened for reading (that would block or have
	// effects); a directory is not a file.
	done := make(chan error, 1)
	go func() { _, _, err := d.ReadFile("pipe", Beneath, 8); done <- err }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrNotRegular)
	case <-time.After(5 * time.Second):
		t.Fatal("reading a fifo blocked")
	}
	_, st, err = d.ReadFile("sub", Beneath, 8)
	require.ErrorIs(t, err, ErrNotRegular)
	require.EqualValues(t, unix.S_IFDIR, st.Mode&unix.S_IFMT)

	// The trailing link is followed only under Beneath.
	_, _, err = d.ReadFile("link", NoSymlinks, 8)
	require.ErrorIs(t, err, unix.ELOOP)
	data, _, err = d.ReadFile("link", Beneath, 8)
	require.NoError(t, err)
	require.Equal(t, "12345678", string(data))

	data, err = ReadFileInRoot(d.Name(), "sub/in", NoSymlinks, 1)
	require.NoError(t, err)
	require.Equal(t, "1", string(data))
}

func TestReadAtMost(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("x", 100)), 0o644))
	for _, tc := range []struct {
		size, limit int64
		want        int
	}{
		{100, 200, 100}, {100, 100, 100}, {100, 99, 100}, {100, 10, 11}, {0, 10, 11}, {0, 1000, 100}, {5, 0, 1},
	} {
		f, err := os.Open(p)
		require.NoError(t, err)
		data, err := ReadAtMost(f, tc.size, tc.limit)
		f.Close()
		require.NoError(t, err)
		require.Len(t, data, tc.want, "size %d limit %d", tc.size, tc.limit)
	}
}

func TestLstat(t *testing.T) {
	d := openRoot(t, escapeTree...)
	st, err := d.Lstat("a/abs", NoSymlinks)
	require.NoError(t, err)
	require.EqualValues(t, unix.S_IFLNK, st.Mode&unix.S_IFMT, "a trailing link is reported, not followed")
	st, err = d.Lstat("a", NoSymlinks)
	require.NoError(t, err)
	require.EqualValues(t, unix.S_IFDIR, st.Mode&unix.S_IFMT)
	_, err = d.Lstat("a/up/top", NoSymlinks)
	require.ErrorIs(t, err, unix.ELOOP)
	st, err = d.Lstat("a/up/top", Beneath)
	require.NoError(t, err)
	require.EqualValues(t, unix.S_IFREG, st.Mode&unix.S_IFMT)
	_, err = d.Lstat("a/out/passwd", Beneath)
	require.ErrorIs(t, err, unix.EXDEV)
}

func TestMkdirAll(t *testing.T) {
	d := openRoot(t, "dir a", "file f x", "symlink l a", "symlink a/escape /tmp")
	sub, err := d.MkdirAll("a/b/c", 0o755)
	require.NoError(t, err)
	require.Equal(t, "a/b/c", sub.Rel())
	sub.Close()
	require.DirExists(t, filepath.Join(d.Name(), "a/b/c"))

	for _, tc := range []struct {
		path, failed string
		want         error
	}{
		{"l/x", "l", unix.ELOOP},
		{"a/escape/x", "a/escape", unix.ELOOP},
		{"f/x", "f", unix.ENOTDIR},
	} {
		_, err := d.MkdirAll(tc.path, 0o755)
		require.ErrorIs(t, err, tc.want, tc.path)
		var pe *os.PathError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, tc.failed, pe.Path)
	}
	require.NoDirExists(t, "/tmp/x")
	for _, p := range []string{"a/../x", "/x", "a//x", "a/./x"} {
		_, err := d.MkdirAll(p, 0o755)
		require.ErrorIs(t, err, ErrBadName, p)
	}
}

func TestOpenRegular(t *testing.T) {
	d := openRoot(t, "file f x", "file g y", "symlink l f", "fifo p")
	f, st, err := d.OpenRegular("f", nil)
	require.NoError(t, err)
	f.Close()
	require.EqualValues(t, 1, st.Size)
	g, err := d.Lstat("g", NoSymlinks)
	require.NoError(t, err)
	_, _, err = d.OpenRegular("f", &g)
	require.ErrorIs(t, err, ErrChanged, "f is not the inode examined as g")
	_, _, err = d.OpenRegular("l", nil)
	require.ErrorIs(t, err, ErrNotRegular)
	_, _, err = d.OpenRegular("p", nil)
	require.ErrorIs(t, err, ErrNotRegular)
	// Examined as a regular file, swapped for a link since: not followed.
	_, _, err = d.OpenRegular("l", &g)
	require.ErrorIs(t, err, unix.ELOOP)
	_, err = d.OpenEntry("../f", unix.O_RDONLY, 0)
	require.ErrorIs(t, err, ErrBadName)
}

func TestWalk(t *testing.T) {
	d := openRoot(t,
		"file a", "dir b/empty", "file b/c/d", "file b/e", "symlink b/l ../outside",
		"dir skip/x", "file z",
	)
	var dirs, entries []string
	err := Walk(d, Visitor{
		Dir: func(d *Dir, _ []fs.DirEntry) error { dirs = append(dirs, d.Rel()); return nil },
		Entry: func(d *Dir, e fs.DirEntry) error {
			entries = append(entries, d.Join(e.Name()))
			if e.Name() == "skip" {
				return SkipDir
			}
			return nil
		},
	})
	require.NoError(t, err)
	require.Equal(t, []string{".", "b", "b/c", "b/empty"}, dirs, "every entered directory, empty ones too; never through a link")
	require.Equal(t, []string{"a", "b", "b/c", "b/c/d", "b/e", "b/empty", "b/l", "skip", "z"}, entries, "depth first, in name order")

	entries = nil
	err = Walk(d, Visitor{Entry: func(d *Dir, e fs.DirEntry) error {
		entries = append(entries, d.Join(e.Name()))
		if e.Name() == "d" {
			return SkipAll
		}
		return nil
	}})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "b/c", "b/c/d"}, entries)

	boom := errors.New("boom")
	require.ErrorIs(t, Walk(d, Visitor{Entry: func(*Dir, fs.DirEntry) error { return boom }}), boom)
}

func TestReadDirBounded(t *testing.T) {
	d := openRoot(t, "file c", "file a", "file b", "file d")
	es, err := d.ReadDir(2)
	require.NoError(t, err)
	require.Len(t, es, 2)
	es, err = d.ReadDir(0)
	require.NoError(t, err, "a second read starts from the beginning")
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"a", "b", "c", "d"}, names)
}

// TestWithoutOpenat2: where openat2 is missing (ENOSYS, or EPERM from a
// seccomp filter that does not know it, as under gVisor's runsc 20221219)
// one name under NoSymlinks still opens, through openat(2) with
// O_NOFOLLOW, and a link there is still refused; anything that needs
// resolution fails.
func TestWithoutOpenat2(t *testing.T) {
	for _, errno := range []unix.Errno{unix.ENOSYS, unix.EPERM} {
		d := openRoot(t, "file exact 12345678", "symlink link exact", "dir sub", "file sub/in 1")
		d.sys = &syscalls{openat2: func(int, string, *unix.OpenHow) (int, error) { return -1, errno }}
		data, _, err := d.ReadFile("exact", NoSymlinks, 8)
		require.NoError(t, err, errno)
		require.Equal(t, "12345678", string(data))
		_, err = d.Open("link", NoSymlinks, unix.O_RDONLY)
		require.ErrorIs(t, err, unix.ELOOP, errno)
		_, err = d.Open("sub/in", NoSymlinks, unix.O_RDONLY)
		require.ErrorIs(t, err, errno)
		_, err = d.Open("exact", Beneath, unix.O_RDONLY)
		require.ErrorIs(t, err, errno)
		_, err = d.Open("..", NoSymlinks, unix.O_RDONLY)
		require.ErrorIs(t, err, errno)
	}
}
