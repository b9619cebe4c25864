package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	rfs "github.com/corral-sandbox/corral/internal/rootfs"
	"github.com/corral-sandbox/corral/mounts/hidden"
	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// watcher is the repository watch of a long-lived owner of a session.
// The view's overlay takes its lower layer live from the repository,
// while its whiteouts were computed once: a file that appears later
// under a hidden name (a new .env, a cloned .git, a hard link to a hidden
// file) would be visible. The watcher (fsnotify on every visible
// directory) rescans the repository (hidden.Rescan) shortly after any
// entry is created and calls onFail with the first uncovered path: the
// session then fails closed and kills its running containers at once.
//
// Check, at the start of every call, makes the answer exact rather than
// timely: it creates a file in a directory of its own, watched by the
// same inotify instance, and waits until the watcher has handled that
// event. One inotify instance queues its events in order (inotify(7)),
// so every creation in the repository before the call has been seen, and
// rescanned, by then.
//
// fsnotify adds watches by path: a directory swapped for a symlink
// between the walk (rfs.Walk, never through a link) and the watch
// could be watched in the wrong place. That needs a hostile writer on
// the host racing the session's start; the rescan every corral process
// makes when it opens a session does not depend on the watch.
type watcher struct {
	root   string
	hs     *hidden.Set
	view   *hidden.View // without overlays: which directories are hidden
	fsw    *fsnotify.Watcher
	sync   string // the barrier directory
	onFail func(error)

	// mu serializes rescans and guards dirty and err.
	mu    sync.Mutex
	dirty bool
	err   error // set once the repository became unsafe

	bmu     sync.Mutex
	seq     int
	waiters map[string]chan struct{}

	kick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

// barrierTimeout bounds Check's wait for its own event; past it Check
// rescans anyway.
const barrierTimeout = 5 * time.Second

// settle is how long the watcher waits after a creation before it
// rescans, so a burst (a checkout, an unpacked archive) costs one rescan.
const settle = 50 * time.Millisecond

// newWatcher watches every visible directory of the repository at root
// and a barrier directory made under syncParent. It fails with
// errdefs.ErrUnavailable when inotify is unavailable or its watch limit
// too low; the session then rescans at every call. The first rescan runs
// at once in the background (it covers what appeared between the hidden
// set's computation and the watch). The caller must call close.
func newWatcher(root string, hs *hidden.Set, syncParent string, onFail func(error)) (_ *watcher, retErr error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("%w: watching the repository: %v", errdefs.ErrUnavailable, err)
	}
	w := &watcher{root: root, hs: hs, view: hidden.NewView(root, hs), fsw: fsw, onFail: onFail,
		dirty: true, waiters: map[string]chan struct{}{}, kick: make(chan struct{}, 1), done: make(chan struct{})}
	defer func() {
		if retErr != nil {
			fsw.Close()
			if w.sync != "" {
				_ = os.RemoveAll(w.sync)
			}
		}
	}()
	if w.sync, err = os.MkdirTemp(syncParent, "watch-"); err != nil {
		return nil, err
	}
	if err := fsw.Add(w.sync); err != nil {
		return nil, fmt.Errorf("%w: watching %s: %v", errdefs.ErrUnavailable, w.sync, err)
	}
	if err := w.addTree("."); err != nil {
		return nil, err
	}
	w.wg.Add(1)
	go w.loop()
	w.poke()
	return w, nil
}

// addTree watches dir (repository-relative) and every visible directory
// below it. A dir that is gone or no longer a directory is skipped: the
// rescan its creation triggered covers it.
func (w *watcher) addTree(dir string) error {
	if _, hidden := w.view.Hidden(dir); hidden && dir != "." {
		return nil
	}
	root, err := rfs.OpenRoot(w.root)
	if err != nil {
		return fmt.Errorf("%w: watching %s: %v", errdefs.ErrUnavailable, w.root, err)
	}
	defer root.Close()
	start, err := root.OpenDir(dir, rfs.NoSymlinks)
	if gone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: watching %s: %v", errdefs.ErrUnavailable, dir, err)
	}
	defer start.Close()
	err = rfs.Walk(start, rfs.Visitor{
		Dir: func(d *rfs.Dir, _ []fs.DirEntry) error {
			if err := w.fsw.Add(filepath.Join(w.root, filepath.FromSlash(d.Rel()))); err != nil && !gone(err) {
				return fmt.Errorf("%w: watching %s: %v", errdefs.ErrUnavailable, d.Rel(), err)
			}
			return nil
		},
		Entry: func(d *rfs.Dir, e fs.DirEntry) error {
			if !e.IsDir() {
				return nil
			}
			if _, hidden := w.view.Hidden(d.Join(e.Name())); hidden {
				return rfs.SkipDir
			}
			return nil
		},
	})
	if gone(err) {
		return nil
	}
	return err
}

// gone reports errors of an entry renamed or replaced while it was walked.
func gone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

// loop handles the events: barrier creations wake their waiter; any other
// creation marks the repository dirty (a new directory is watched at
// once) and, once the burst settles, rescans; a queue overflow re-watches
// everything and rescans.
func (w *watcher) loop() {
	defer w.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-w.done:
			timer.Stop()
			return
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			if filepath.Dir(ev.Name) == w.sync {
				if ev.Has(fsnotify.Create) {
					w.wake(filepath.Base(ev.Name))
				}
				continue
			}
			if !ev.Has(fsnotify.Create) {
				continue
			}
			w.markDirty()
			if rel, ok := w.rel(ev.Name); ok {
				if st, err := os.Lstat(ev.Name); err == nil && st.IsDir() {
					_ = w.addTree(rel)
				}
			}
			timer.Reset(settle)
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.markDirty()
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				_ = w.addTree(".")
			}
			timer.Reset(settle)
		case <-w.kick:
			timer.Reset(0)
		case <-timer.C:
			if err := w.check(); err != nil && w.onFail != nil && errdefs.IsFailedPrecondition(err) {
				w.onFail(err)
			}
		}
	}
}

func (w *watcher) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// rel returns the repository-relative path of the host path p.
func (w *watcher) rel(p string) (string, bool) {
	r, err := filepath.Rel(w.root, p)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", false
	}
	return filepath.ToSlash(r), true
}

func (w *watcher) markDirty() {
	w.mu.Lock()
	w.dirty = true
	w.mu.Unlock()
}

func (w *watcher) wake(name string) {
	w.bmu.Lock()
	defer w.bmu.Unlock()
	if ch, ok := w.waiters[name]; ok {
		close(ch)
		delete(w.waiters, name)
	}
}

// Check returns nil when no path the rules hide has appeared in the
// repository, uncovered by the session's whiteouts, up to now; else an
// error (errdefs.ErrFailedPrecondition) naming the first, which every
// later Check returns too.
func (w *watcher) Check() error {
	if err := w.barrier(); err != nil {
		w.markDirty()
	}
	return w.check()
}

// barrier waits until the watcher has handled every event queued before
// it was called.
func (w *watcher) barrier() error {
	w.bmu.Lock()
	w.seq++
	name := "b" + strconv.Itoa(w.seq)
	ch := make(chan struct{})
	w.waiters[name] = ch
	w.bmu.Unlock()
	defer func() {
		w.bmu.Lock()
		delete(w.waiters, name)
		w.bmu.Unlock()
	}()
	p := filepath.Join(w.sync, name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	defer os.Remove(p)
	select {
	case <-ch:
		return nil
	case <-time.After(barrierTimeout):
		return errors.New("the repository watch did not answer")
	}
}

// check rescans when something was created since the last rescan.
func (w *watcher) check() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if !w.dirty {
		return nil
	}
	w.dirty = false
	if err := hidden.Rescan(w.root, w.hs); err != nil {
		if errdefs.IsFailedPrecondition(err) {
			w.err = err
		} else {
			w.dirty = true // try again at the next check
		}
		return err
	}
	return nil
}

// close stops the watch and removes the barrier directory.
func (w *watcher) close() {
	close(w.done)
	w.fsw.Close()
	w.wg.Wait()
	_ = os.RemoveAll(w.sync)
}
