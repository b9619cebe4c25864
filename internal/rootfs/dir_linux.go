package rootfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Resolve is how openat2(2) may resolve an unsafePath below a *Dir; see
// the package documentation for which callers need which.
type Resolve uint64

const (
	// NoSymlinks refuses every symbolic link (ELOOP) and every escape
	// (EXDEV).
	NoSymlinks Resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS
	// Beneath follows symbolic links that stay below the directory and
	// refuses escapes (EXDEV) and magic links.
	Beneath Resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS
)

// Dir is an open directory, the root of every lookup below it. The caller
// must call Close.
type Dir struct {
	f *os.File
	// rel is the directory's path below the root it was reached from,
	// slash-separated and canonical; "." for a root.
	rel string
	sys *syscalls
	// listed is set once f's own directory offset has been used.
	listed bool
}

// syscalls are the system calls a Dir makes that tests replace; a Dir's
// subdirectories share its syscalls.
type syscalls struct {
	openat2 func(dirfd int, path string, how *unix.OpenHow) (int, error)
}

var kernel = &syscalls{openat2: unix.Openat2}

// OpenRoot opens the directory at path (a trusted host path: symbolic
// links in it are followed) as the root of lookups below it. Errors are
// *os.PathError.
func OpenRoot(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &Dir{f: os.NewFile(uintptr(fd), path), rel: ".", sys: kernel}, nil
}

// Close closes the directory.
func (d *Dir) Close() error { return d.f.Close() }

// Fd returns the directory's descriptor, valid until Close.
func (d *Dir) Fd() int { return int(d.f.Fd()) }

// Name returns the host path the directory was opened as (for messages).
func (d *Dir) Name() string { return d.f.Name() }

// Rel returns the directory's path below its root: "." for a root, else
// slash-separated components.
func (d *Dir) Rel() string { return d.rel }

// Join returns the path below the root of the entry name of d.
func (d *Dir) Join(name string) string {
	if d.rel == "." {
		return name
	}
	return d.rel + "/" + name
}

// Fstat returns the directory's own status.
func (d *Dir) Fstat() (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstat(d.Fd(), &st)
	return st, err
}

// Open opens unsafePath below d with openat2(2) under how, with flags
// (O_CLOEXEC is added; O_CREAT is refused: a file is created in the
// directory that holds it, with OpenEntry). "" and "." open d itself. Errors are *os.PathError wrapping
// the errno: ELOOP for a link that how refuses, EXDEV for an escape,
// ENOENT, ENOTDIR, …
func (d *Dir) Open(unsafePath string, how Resolve, flags int) (*os.File, error) {
	if unsafePath == "" {
		unsafePath = "."
	}
	if flags&unix.O_CREAT != 0 {
		return nil, &os.PathError{Op: "openat2", Path: unsafePath, Err: unix.EINVAL}
	}
	oh := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: uint64(how)}
	fd, err := retryEAGAIN(func() (int, error) { return d.sys.openat2(d.Fd(), unsafePath, oh) })
	if err != nil && withoutOpenat2(err) && how == NoSymlinks && validName(unsafePath) {
		// One name under NoSymlinks needs no resolution: openat(2) with
		// O_NOFOLLOW refuses a link there (ELOOP) as openat2 would.
		return d.OpenEntry(unsafePath, flags, 0)
	}
	if err != nil {
		return nil, &os.PathError{Op: "openat2", Path: unsafePath, Err: err}
	}
	return os.NewFile(uintptr(fd), path.Join(d.Name(), unsafePath)), nil
}

// OpenDir opens the directory unsafePath below d under how. The result's
// Rel is unsafePath joined to d's, cleaned lexically (resolution itself is
// the kernel's).
func (d *Dir) OpenDir(unsafePath string, how Resolve) (*Dir, error) {
	f, err := d.Open(unsafePath, how, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	return &Dir{f: f, rel: path.Clean(d.Join(unsafePath)), sys: d.sys}, nil
}

// Lstat returns the status of unsafePath below d under how, without
// following a symbolic link in its last component (a link there is
// reported, not followed, even under NoSymlinks). A single name costs one
// fstatat(2).
func (d *Dir) Lstat(unsafePath string, how Resolve) (unix.Stat_t, error) {
	var st unix.Stat_t
	if validName(unsafePath) {
		if err := unix.Fstatat(d.Fd(), unsafePath, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return st, &os.PathError{Op: "fstatat", Path: unsafePath, Err: err}
		}
		return st, nil
	}
	f, err := d.Open(unsafePath, how, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return st, err
	}
	defer f.Close()
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return st, &os.PathError{Op: "fstat", Path: unsafePath, Err: err}
	}
	return st, nil
}

// OpenFile opens the regular file unsafePath below d under how for
// reading, and returns it with its status. Nothing but a regular file is
// ever opened for reading: the path is resolved O_PATH first, and only a
// regular file is then reopened O_RDONLY|O_NONBLOCK|O_NOCTTY through its
// /proc/self/fd magic link (which names exactly the inode resolved).
// Errors: ErrNotRegular (with the status of what is there), else an
// *os.PathError.
func (d *Dir) OpenFile(unsafePath string, how Resolve) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	pf, err := d.Open(unsafePath, how, unix.O_PATH)
	if err != nil {
		return nil, st, err
	}
	defer pf.Close()
	if err := unix.Fstat(int(pf.Fd()), &st); err != nil {
		return nil, st, &os.PathError{Op: "fstat", Path: unsafePath, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, st, fmt.Errorf("%s: %w", unsafePath, ErrNotRegular)
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", pf.Fd()), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, st, &os.PathError{Op: "reopen", Path: unsafePath, Err: err}
	}
	return os.NewFile(uintptr(fd), pf.Name()), st, nil
}

// ReadFile reads the regular file unsafePath below d under how, at most
// max bytes (see OpenFile). Errors: ErrNotRegular, ErrTooLarge when it
// holds more than max bytes, else an *os.PathError.
func (d *Dir) ReadFile(unsafePath string, how Resolve, max int64) ([]byte, unix.Stat_t, error) {
	f, st, err := d.OpenFile(unsafePath, how)
	if err != nil {
		return nil, st, err
	}
	defer f.Close()
	data, err := ReadAtMost(f, st.Size, max)
	if err != nil {
		return nil, st, fmt.Errorf("%s: %w", unsafePath, err)
	}
	if int64(len(data)) > max {
		return nil, st, fmt.Errorf("%s: more than %d bytes: %w", unsafePath, max, ErrTooLarge)
	}
	return data, st, nil
}

// ReadFileInRoot reads the regular file unsafePath below the directory at
// root (a trusted path) under how, at most max bytes; see (*Dir).ReadFile.
func ReadFileInRoot(root, unsafePath string, how Resolve, max int64) ([]byte, error) {
	d, err := OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	data, _, err := d.ReadFile(unsafePath, how, max)
	return data, err
}

// MkdirAll opens the directory unsafePath below d, making each missing
// component with mode (and the process's umask) on the way. No component
// may be a symbolic link and none may be "..": the walk is NoSymlinks,
// one component at a time, so a link swapped in is never followed. An
// error names the first component that failed, as an *os.PathError
// holding that prefix (ELOOP: a link; ENOTDIR: not a directory).
func (d *Dir) MkdirAll(unsafePath string, mode uint32) (*Dir, error) {
	if unsafePath == "" || unsafePath == "." {
		return d.OpenDir(".", NoSymlinks)
	}
	comps := strings.Split(unsafePath, "/")
	for _, c := range comps {
		if !validName(c) {
			return nil, fmt.Errorf("%s: %w", unsafePath, ErrBadName)
		}
	}
	cur, err := d.OpenDir(".", NoSymlinks)
	if err != nil {
		return nil, err
	}
	for i, c := range comps {
		next, err := cur.Sub(c)
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(cur.Fd(), c, mode); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = cur.Sub(c)
			}
		}
		cur.Close()
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, &os.PathError{Op: "mkdirall", Path: strings.Join(comps[:i+1], "/"), Err: err}
		}
		cur = next
	}
	return cur, nil
}

// withoutOpenat2 reports whether err says openat2(2) is not there: ENOSYS
// from a kernel before 5.6 or from gVisor's runsc 20221219 (Debian 12),
// EPERM from a seccomp filter that does not know the call (runsc applies
// the spec's filter with its own, older, syscall table).
func withoutOpenat2(err error) bool {
	return errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM)
}

// validName reports whether name is one path component other than "."
// and "..".
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// OpenEntry opens the entry name of d with openat(2) and flags plus
// O_NOFOLLOW|O_CLOEXEC: a symbolic link there fails with ELOOP. With
// O_CREAT, mode is the new file's mode. name must be one path component.
func (d *Dir) OpenEntry(name string, flags int, mode uint32) (*os.File, error) {
	if !validName(name) {
		return nil, fmt.Errorf("%q: %w", name, ErrBadName)
	}
	fd, err := unix.Openat(d.Fd(), name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: d.Join(name), Err: err}
	}
	return os.NewFile(uintptr(fd), path.Join(d.Name(), name)), nil
}

// Sub opens the subdirectory name of d, never through a link: a link
// there fails with ELOOP, anything else that is not a directory with
// ENOTDIR.
func (d *Dir) Sub(name string) (*Dir, error) {
	f, err := d.OpenEntry(name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOTDIR) {
		// O_DIRECTORY is checked before O_NOFOLLOW: say it was a link.
		var st unix.Stat_t
		if unix.Fstatat(d.Fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = &os.PathError{Op: "openat", Path: d.Join(name), Err: unix.ELOOP}
		}
	}
	if err != nil {
		return nil, err
	}
	return &Dir{f: f, rel: d.Join(name), sys: d.sys}, nil
}

// OpenRegular opens the entry name of d for reading when it is a regular
// file: examined first with fstatat (or taken from want, the status the
// caller examined), never opened when it is anything else
// (ErrNotRegular), opened O_RDONLY|O_NONBLOCK|O_NOCTTY without following
// a link (ELOOP), and checked to be the inode examined (ErrChanged). It
// returns the file and its status after the open.
func (d *Dir) OpenRegular(name string, want *unix.Stat_t) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	if want == nil {
		if err := unix.Fstatat(d.Fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, st, &os.PathError{Op: "fstatat", Path: d.Join(name), Err: err}
		}
		want = &st
	}
	if want.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, *want, fmt.Errorf("%s: %w", d.Join(name), ErrNotRegular)
	}
	f, err := d.OpenEntry(name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, *want, err
	}
	var got unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &got); err != nil {
		f.Close()
		return nil, *want, &os.PathError{Op: "fstat", Path: d.Join(name), Err: err}
	}
	if got.Mode&unix.S_IFMT != unix.S_IFREG || !SameInode(want, &got) {
		f.Close()
		return nil, got, fmt.Errorf("%s: %w", d.Join(name), ErrChanged)
	}
	return f, got, nil
}

// Readlink returns the target of the symbolic link name of d.
func (d *Dir) Readlink(name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(d.Fd(), name, buf)
		if err != nil {
			return "", &os.PathError{Op: "readlinkat", Path: d.Join(name), Err: err}
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// ReadDir returns d's entries sorted by name, at most max of them (max
// <= 0: all). Each call reads from the start: the first on d's own
// descriptor, later ones on a fresh open file description (a dup would
// share, and move, d's directory offset).
func (d *Dir) ReadDir(max int) ([]fs.DirEntry, error) {
	f := d.f
	if d.listed {
		fd, err := unix.Openat(d.Fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &os.PathError{Op: "openat", Path: d.rel, Err: err}
		}
		f = os.NewFile(uintptr(fd), d.Name())
		defer f.Close()
	}
	d.listed = true
	var entries []fs.DirEntry
	for max <= 0 || len(entries) < max {
		n := -1
		if max > 0 {
			n = max - len(entries)
		}
		batch, err := f.ReadDir(n)
		entries = append(entries, batch...)
		if n < 0 || errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			break
		}
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// SameInode reports whether a and b describe the same inode.
func SameInode(a, b *unix.Stat_t) bool { return a.Dev == b.Dev && a.Ino == b.Ino }
