package review

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/rootfs"
	"golang.org/x/sys/unix"
)

// repoError is a path the repository itself refuses (refuse: a symbolic
// link on the way, an escape) or that conflicts with the change (a file in
// place of a directory, a non-regular file).
type repoError struct {
	path   string
	reason string
	refuse bool
}

func (e *repoError) Error() string { return e.path + ": " + e.reason }

// dirFD is a directory of the repository opened without following links,
// with the identity it had when opened. fd is dir's descriptor.
type dirFD struct {
	dir      *rootfs.Dir
	fd       int
	rel      string
	dev, ino uint64
	uid, gid uint32
	mode     uint32
}

// repoFS is a repository root opened for safe lookups. Every directory is
// opened from the root under rootfs.NoSymlinks (no component may be a
// symbolic link or a magic link, and ".." cannot climb out); every file
// is opened relative to its directory with O_NOFOLLOW. The caller must
// call close.
type repoFS struct {
	path string
	root *rootfs.Dir
	dirs map[string]*dirFD
}

func openRepo(repo string) (*repoFS, error) {
	root, err := rootfs.OpenRoot(repo)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("opening repository %q: %w: %w", repo, errdefs.ErrNotFound, err)
		}
		return nil, fmt.Errorf("opening repository %q: %w", repo, err)
	}
	return &repoFS{path: repo, root: root, dirs: map[string]*dirFD{}}, nil
}

// openPinnedRepo is openRepo, then checks that the directory opened is
// the one opts pins (Options.RepoDev, RepoIno; none pinned: any). Every
// later step works below that descriptor, so the check holds for the
// whole apply.
func openPinnedRepo(repo string, opts Options) (*repoFS, error) {
	r, err := openRepo(repo)
	if err != nil || opts.RepoIno == 0 {
		return r, err
	}
	st, err := r.root.Fstat()
	if err != nil {
		r.close()
		return nil, fmt.Errorf("opening repository %q: %w", repo, err)
	}
	if uint64(st.Dev) != opts.RepoDev || st.Ino != opts.RepoIno {
		r.close()
		return nil, fmt.Errorf("repository %q: %w: not the directory the session was made on (the path was swapped for another directory or a link since); nothing read or written", repo, errdefs.ErrPermissionDenied)
	}
	return r, nil
}

func (r *repoFS) close() {
	for _, d := range r.dirs {
		d.dir.Close()
	}
	r.dirs = nil
	r.root.Close()
}

// lookupErr turns an openat2 failure on rel into a repoError where the
// repository refuses, or returns it unchanged.
func lookupErr(rel string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return &repoError{path: rel, reason: "a symbolic link in the repository is on the way; writes never follow links", refuse: true}
	case errors.Is(err, unix.EXDEV):
		return &repoError{path: rel, reason: "the path leaves the repository", refuse: true}
	}
	return err
}

// dir returns the open directory rel ("." is the root), opening it on
// first use. Errors: ENOENT or ENOTDIR (unwrapped, for the caller to
// interpret), or a *repoError.
func (r *repoFS) dir(rel string) (*dirFD, error) {
	if d, ok := r.dirs[rel]; ok {
		return d, nil
	}
	dir, err := r.root.OpenDir(rel, rootfs.NoSymlinks)
	if err != nil {
		return nil, lookupErr(rel, err)
	}
	st, err := dir.Fstat()
	if err != nil {
		dir.Close()
		return nil, err
	}
	d := &dirFD{dir: dir, fd: dir.Fd(), rel: rel, dev: uint64(st.Dev), ino: uint64(st.Ino), uid: st.Uid, gid: st.Gid, mode: st.Mode}
	r.dirs[rel] = d
	return d, nil
}

// forget drops rel from the cache (after a rmdir).
func (r *repoFS) forget(rel string) {
	if d, ok := r.dirs[rel]; ok {
		d.dir.Close()
		delete(r.dirs, rel)
	}
}

// verify checks that every cached directory is still the one opened at its
// path, reached without a symbolic link: a directory swapped for a link, or
// replaced, between preparation and commit is refused.
func (r *repoFS) verify() error {
	for rel, d := range r.dirs {
		dir, err := r.root.OpenDir(rel, rootfs.NoSymlinks)
		if err != nil {
			if e := lookupErr(rel, err); e != err {
				return e
			}
			return &repoError{path: rel, reason: fmt.Sprintf("directory changed during apply: %v", err), refuse: true}
		}
		st, err := dir.Fstat()
		dir.Close()
		if err != nil {
			return err
		}
		if uint64(st.Dev) != d.dev || uint64(st.Ino) != d.ino {
			return &repoError{path: rel, reason: "directory replaced during apply", refuse: true}
		}
	}
	return nil
}

// node is what a path holds.
type node struct {
	exists bool
	isDir  bool
	st     unix.Stat_t
}

// lstat reports what rel holds without following any link. A missing
// parent, or a parent that is a file, means rel is absent.
func (r *repoFS) lstat(rel string) (node, error) {
	d, err := r.dir(path.Dir(rel))
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return node{}, nil
	} else if err != nil {
		return node{}, err
	}
	st, err := d.dir.Lstat(path.Base(rel), rootfs.NoSymlinks)
	switch {
	case errors.Is(err, unix.ENOENT):
		return node{}, nil
	case err != nil:
		return node{}, fmt.Errorf("stat %q: %w", rel, err)
	}
	n := node{exists: true, st: st}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		n.isDir = true
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return n, &repoError{path: rel, reason: "is a symbolic link in the repository; writes never follow links", refuse: true}
	default:
		return n, &repoError{path: rel, reason: fmt.Sprintf("is not a regular file (mode %#o)", st.Mode&unix.S_IFMT)}
	}
	return n, nil
}

// readFile reads the regular file rel, without following links, up to max
// bytes (one more byte is read to detect a larger file; such a file is
// returned cut at max+1 bytes). exists is false when it is absent.
func (r *repoFS) readFile(rel string, max int64) (data []byte, st unix.Stat_t, exists bool, err error) {
	d, err := r.dir(path.Dir(rel))
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil, st, false, nil
	} else if err != nil {
		return nil, st, false, err
	}
	return readAt(d, path.Base(rel), rel, max)
}

// readAt reads the regular file name in the directory d (see readFile):
// never opened unless it is one, never through a link, and checked to be
// the inode examined.
func readAt(d *dirFD, name, rel string, max int64) (data []byte, st unix.Stat_t, exists bool, err error) {
	f, st, err := d.dir.OpenRegular(name, nil)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, st, false, nil
	case errors.Is(err, unix.ELOOP), err != nil && st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return nil, st, true, &repoError{path: rel, reason: "is a symbolic link in the repository; writes never follow links", refuse: true}
	case errors.Is(err, rootfs.ErrNotRegular):
		// Never opened: opening a fifo or device has effects.
		return nil, st, true, &repoError{path: rel, reason: fmt.Sprintf("is not a regular file (mode %#o)", st.Mode&unix.S_IFMT)}
	case errors.Is(err, rootfs.ErrChanged):
		return nil, st, true, &repoError{path: rel, reason: "changed while being read"}
	case err != nil:
		return nil, st, false, fmt.Errorf("opening %q: %w", rel, err)
	}
	defer f.Close()
	data, err = rootfs.ReadAtMost(f, st.Size, max)
	if err != nil {
		return nil, st, false, fmt.Errorf("reading %q: %w", rel, err)
	}
	return data, st, true, nil
}

// deepestDir walks the directories of rel's parent from the root and
// returns the deepest one that exists, and the first component that
// exists but is not a directory ("" when the walk stopped at a missing
// component or reached the parent).
func (r *repoFS) deepestDir(rel string) (dir, blocker string, err error) {
	parent := path.Dir(rel)
	if parent == "." {
		return ".", "", nil
	}
	if _, err := r.dir(parent); err == nil {
		return parent, "", nil
	} else if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
		return "", "", err
	}
	dir = "."
	parts := strings.Split(parent, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		_, err := r.dir(p)
		switch {
		case err == nil:
			dir = p
			continue
		case errors.Is(err, unix.ENOENT):
			return dir, "", nil
		case errors.Is(err, unix.ENOTDIR):
			return dir, p, nil
		default:
			return "", "", err
		}
	}
	return dir, "", nil
}

// writeFileAt creates the file name in the directory d (O_EXCL,
// O_NOFOLLOW), writes data, sets mode and, when uid is not -1, the owner,
// and, with sync, fsyncs it. A failure removes what it made.
func writeFileAt(d *dirFD, name string, data []byte, mode uint32, uid, gid int, sync bool) error {
	f, err := d.dir.OpenEntry(name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("creating a temporary file in %q: %w", d.rel, err)
	}
	fd := int(f.Fd())
	werr := writeAll(fd, data)
	if werr == nil && uid >= 0 {
		// Best effort: a non-root reviewer cannot give files away.
		if err := unix.Fchown(fd, uid, gid); err != nil && !errors.Is(err, unix.EPERM) {
			werr = err
		}
	}
	if werr == nil {
		werr = unix.Fchmod(fd, mode&0o777)
	}
	if werr == nil && sync {
		werr = unix.Fsync(fd)
	}
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = unix.Unlinkat(d.fd, name, 0)
		return fmt.Errorf("writing a temporary file in %q: %w", d.rel, werr)
	}
	return nil
}

// existsAt reports whether d holds an entry name (of any type).
func existsAt(d *dirFD, name string) bool {
	_, err := d.dir.Lstat(name, rootfs.NoSymlinks)
	return err == nil
}

// hashAt returns the sha256 of the regular file name in d, read without
// following a link (rootfs.Dir.OpenRegular); exists is false when there is
// no such entry. Anything but a regular file is an error.
func hashAt(d *dirFD, name string) (sum string, exists bool, err error) {
	f, st, err := d.dir.OpenRegular(name, nil)
	switch {
	case errors.Is(err, unix.ENOENT):
		return "", false, nil
	case errors.Is(err, rootfs.ErrNotRegular):
		return "", true, fmt.Errorf("%s/%s is not a regular file (mode %#o)", d.rel, name, st.Mode&unix.S_IFMT)
	case err != nil:
		return "", true, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", true, err
	}
	return hex.EncodeToString(h.Sum(nil)), true, nil
}

// readDirNames lists the names in d, sorted.
func readDirNames(d *dirFD) ([]string, error) {
	entries, err := d.dir.ReadDir(0)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
