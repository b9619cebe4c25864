package hidden

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"unsafe"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/rootfs"
	"golang.org/x/sys/unix"
)

// Uncovered returns the first path of fresh (a hidden set computed now
// from the same repository and options) that old does not hide, itself
// or through an ancestor: a file that appeared after the session started
// and that the session's whiteouts therefore do not cover. "" when every
// hidden path is covered.
func Uncovered(old, fresh *Set) (Hide, bool) {
	for _, h := range fresh.Hides() {
		if !covered(old, h.Path) {
			return h, true
		}
	}
	return Hide{}, false
}

func covered(old *Set, p string) bool {
	for q := p; ; q = path.Dir(q) {
		if _, ok := old.Lookup(q); ok {
			return true
		}
		if q == "." || !strings.Contains(q, "/") {
			return false
		}
	}
}

// Watcher notices entries created in the repository after the hidden set
// was computed. The view's overlay takes its lower layer live from the
// repository, while its whiteouts were computed once: a file that appears
// later under a hidden name (a new .env, a cloned .git) would be visible.
// The Watcher (inotify on every visible directory) lets the session check
// before each call, and refuse once such a file exists. The caller must
// call Close.
type Watcher struct {
	root string
	h    *Set

	mu    sync.Mutex
	fd    int
	dirs  map[int32]string // watch descriptor → repository-relative dir
	dirty bool             // something was created since the last check
	err   error            // set once the repository became unsafe
}

// watchMask watches a directory for new entries. The watch is added
// through the directory's /proc/self/fd magic link, which names exactly
// the inode the walk opened, so no link is followed on the way.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_ONLYDIR

// NewWatcher watches every visible directory of the repository at root.
// It fails (errdefs.ErrUnavailable) when inotify is unavailable or the
// watch limit is too low; callers then check by rescanning.
func NewWatcher(root string, h *Set) (*Watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: inotify: %v", errdefs.ErrUnavailable, err)
	}
	w := &Watcher{root: root, h: h, fd: fd, dirs: map[int32]string{}}
	if err := w.addTree("."); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return w, nil
}

// addTree watches dir and every visible directory below it (rootfs.Walk:
// never through a link). A dir that is gone, or is no longer a
// directory, is skipped: the next Check rescans anyway.
func (w *Watcher) addTree(dir string) error {
	if _, hidden := (&View{root: w.root, h: w.h}).Hidden(dir); hidden && dir != "." {
		return nil
	}
	root, err := rootfs.OpenRoot(w.root)
	if err != nil {
		return fmt.Errorf("%w: watching %s: %v", errdefs.ErrUnavailable, w.root, err)
	}
	defer root.Close()
	start, err := root.OpenDir(dir, rootfs.NoSymlinks)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: watching %s: %v", errdefs.ErrUnavailable, dir, err)
	}
	defer start.Close()
	err = rootfs.Walk(start, rootfs.Visitor{
		Dir: w.watch,
		Entry: func(d *rootfs.Dir, e fs.DirEntry) error {
			if !e.IsDir() {
				return nil
			}
			p := d.Join(e.Name())
			if _, ok := w.h.Lookup(p); ok {
				return rootfs.SkipDir
			}
			if _, hidden := w.h.judgePath(p, typeDir); hidden {
				return rootfs.SkipDir
			}
			return nil
		},
	})
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		// Renamed or replaced while being walked: the next Check rescans.
		return nil
	}
	return err
}

// watch adds an inotify watch on the directory d.
func (w *Watcher) watch(d *rootfs.Dir, _ []fs.DirEntry) error {
	wd, err := unix.InotifyAddWatch(w.fd, fmt.Sprintf("/proc/self/fd/%d", d.Fd()), watchMask)
	if err != nil {
		return fmt.Errorf("%w: inotify watch on %s: %v", errdefs.ErrUnavailable, d.Rel(), err)
	}
	w.dirs[int32(wd)] = d.Rel()
	return nil
}

// Check drains the events since the last call. When something was
// created it rescans the repository and returns an error
// (errdefs.ErrFailedPrecondition) naming the first new path that the
// rules hide but the session's whiteouts do not; from then on every Check
// returns that error. New visible directories are watched too.
func (w *Watcher) Check() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(w.fd, buf)
		if errors.Is(err, unix.EAGAIN) || n <= 0 {
			break
		}
		if err != nil {
			return err
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			w.dirty = true
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				continue
			}
			name := strings.TrimRight(string(nameBytes), "\x00")
			if dir, ok := w.dirs[ev.Wd]; ok && name != "" && ev.Mask&unix.IN_ISDIR != 0 {
				if err := w.addTree(path.Join(dir, name)); err != nil {
					w.err = err
					return err
				}
			}
		}
	}
	if !w.dirty {
		return nil
	}
	w.dirty = false
	fresh, err := Compute(w.root, w.h.Options())
	if err != nil {
		return fmt.Errorf("rescanning the repository: %w", err)
	}
	if h, bad := Uncovered(w.h, fresh); bad {
		w.err = changedError(h)
		return w.err
	}
	return nil
}

func changedError(h Hide) error {
	return fmt.Errorf("%w: the repository changed under the session: %s appeared after it started (%s), and the running view cannot hide it; start a new session",
		errdefs.ErrFailedPrecondition, h.Path, h.Rule)
}

// Rescan computes the hidden set of the repository now and fails like
// Watcher.Check when it holds a path old does not cover. It is the check
// of a process that reopens a session (no watcher saw the time between).
func Rescan(root string, old *Set) error {
	fresh, err := Compute(root, old.Options())
	if err != nil {
		return fmt.Errorf("rescanning the repository: %w", err)
	}
	if h, bad := Uncovered(old, fresh); bad {
		return changedError(h)
	}
	return nil
}

// Close releases the inotify instance.
func (w *Watcher) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return nil
	}
	err := unix.Close(w.fd)
	w.fd = -1
	return err
}
