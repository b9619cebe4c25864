package mounts

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/fscred"
	"github.com/corral-sandbox/corral/internal/rootfs"
	"github.com/corral-sandbox/corral/mounts/hidden"
	"github.com/moby/sys/mountinfo"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// ContainerRoot is where the repository view is mounted in the container,
// and the working directory of every tool. It is defined here and nowhere
// else.
const ContainerRoot = "/workspace"

// Plan is what the trusted launcher decided for one session's mounts.
type Plan struct {
	// Repo is the repository root on the host (absolute; trusted).
	Repo string
	// WriteDir is the write scope's directory, canonical and repo-relative
	// ("openwiki"). Empty with ReadOnly.
	WriteDir string
	// Page, in page mode, is the only writable file (repo-relative,
	// canonical, inside WriteDir).
	Page string
	// ReadOnly sessions get no writable mount at all.
	ReadOnly bool
	// AreaBytes and AreaInodes size the tmpfs that holds the upperdir (or
	// the page copy): writes past them fail with ENOSPC in the container.
	AreaBytes, AreaInodes int64
	// UID and GID own the writable files (the container's user, 65534).
	UID, GID int
	// Shared leaves the session directory's self-bind in its parent's
	// peer group instead of making it private, so that the layout's
	// mounts propagate out: needed when runc resolves bind sources in
	// another mount namespace than ours, as for a daemon in a Kubernetes
	// Pod whose state directory is a Bidirectional hostPath (a private
	// mount's children never reach the node; mount_namespaces(7)).
	Shared bool
	// CopyAs, when set, are the file-system credentials with which
	// Prepare reads what it copies out of the repository (the write
	// directory's base, or the page): the launcher's caller, so that the
	// copy takes only what the caller may read, judged by the kernel at
	// the open itself (no check that a swap could outrun). nil: the
	// process's own. Nothing else is read with them.
	CopyAs *fscred.Creds
}

// Layout is the host side of one session, every path under Dir (0700).
// Its mounts are one table (see table), from which Prepare, Open, Close
// and Binds are all derived:
//
//	Dir        private self-bind: nothing mounted below propagates out
//	Dir/repo   read-only bind of the repository (pinned by fd at start)
//	Dir/wh     the whiteout layer (not a mount): one 0:0 char device per
//	           hidden path, a mirror of every directory on the way, and
//	           mount points (openwiki/, the page) the repository lacks
//	Dir/view   overlay lowerdir=wh:repo, read-only: the repository view
//	Dir/base   the write area's lower layer (not a mount): a copy of the
//	           view's WriteDir owned by UID:GID, so existing pages are
//	           editable
//	Dir/area   size- and inode-limited tmpfs with upper/ and work/, or page
//	Dir/write  overlay lowerdir=base,upperdir=area/upper: the write area
//	Dir/ctl    control files for corral-init (not a mount), bound
//	           read-only into each container by package sandbox
//
// Mounts are made once per session and bound into each container; Close
// unmounts them in reverse order. A crash leaves them for Sweep to find.
type Layout struct {
	Dir   string
	Plan  Plan
	Repo  string
	WH    string
	View  string
	Base  string
	Area  string
	Upper string
	Work  string
	Write string
	// PageCopy is the session's copy of the assigned page (page mode).
	PageCopy string
	// Ctl holds the file-tool content staged for corral-init; every
	// container of the session sees it.
	Ctl string
	// Req holds one directory per container (Req/<container id>), its
	// control file, bound into that container alone.
	Req string
}

// layoutAt returns the paths of the layout under dir for plan: the one
// place they are spelled.
func layoutAt(dir string, plan Plan) *Layout {
	l := &Layout{
		Dir: dir, Plan: plan,
		Repo: filepath.Join(dir, "repo"), WH: filepath.Join(dir, "wh"), View: filepath.Join(dir, "view"),
		Base: filepath.Join(dir, "base"), Area: filepath.Join(dir, "area"), Write: filepath.Join(dir, "write"),
		Ctl: filepath.Join(dir, "ctl"), Req: filepath.Join(dir, "req"),
	}
	l.Upper = filepath.Join(l.Area, "upper")
	l.Work = filepath.Join(l.Area, "work")
	if plan.Page != "" && !plan.ReadOnly {
		l.PageCopy = filepath.Join(l.Area, "page")
	}
	return l
}

// LayoutAt returns the paths of the layout that Prepare builds under dir
// for plan, making nothing: what a session fixes before its mounts exist
// (its view reads the write area from Layout.Write).
func LayoutAt(dir string, plan Plan) *Layout { return layoutAt(dir, plan) }

// hostMount is one row of the layout's table: a mount in containerd's
// own terms (Target is absolute here), what it is for messages, and what
// Prepare does around it.
type hostMount struct {
	mount.Mount
	what string
	// private makes the mount MS_PRIVATE once made: nothing mounted below
	// it propagates to the host's shared peer groups, nor from them in.
	private bool
	// pin opens Source O_PATH first and binds it through its descriptor,
	// so that the bind holds the directory that was opened.
	pin bool
	// before makes what the mount needs in the plain directory fills
	// (the whiteout layer, the base copy); after fills the mount (the
	// page copy, upper/ and work/).
	before, after func() error
	fills         string
	// dest, when set, is where the container sees the mount (or the file
	// src below it), read-only unless rw.
	dest, src string
	rw        bool
}

// overlayOptions keep the overlay simple enough for the diff collector to
// read: no redirects (a directory rename fails with EXDEV instead), no
// metacopy, no index (Documentation/filesystems/overlayfs.rst).
var overlayOptions = []string{"redirect_dir=off", "metacopy=off", "index=off"}

// table is the layout's mounts in the order they are made. Nothing else
// spells them.
func (l *Layout) table(hs *hidden.Set) []hostMount {
	sec := []string{"nosuid", "nodev", "noexec"}
	opts := func(o ...string) []string { return append(slices.Clone(sec), o...) }
	t := []hostMount{
		{Mount: mount.Mount{Type: "bind", Source: l.Dir, Target: l.Dir, Options: []string{"bind"}}, what: "the session directory", private: !l.Plan.Shared},
		// Not recursive: overlayfs does not cross mounts inside a lower
		// layer, so mounts below the repository are not part of the view
		// either way.
		{Mount: mount.Mount{Type: "bind", Source: l.Plan.Repo, Target: l.Repo, Options: opts("bind", "ro")}, what: "the repository bind", private: true, pin: true},
		{Mount: mount.Mount{Type: "overlay", Source: "overlay", Target: l.View, Options: append(opts("ro", "lowerdir="+l.WH+":"+l.Repo), overlayOptions...)},
			what: "the repository view", before: func() error { return l.buildWhiteouts(hs) }, fills: l.WH, dest: ContainerRoot},
	}
	if l.Plan.ReadOnly {
		return t
	}
	area := hostMount{Mount: mount.Mount{Type: "tmpfs", Source: "tmpfs", Target: l.Area,
		Options: opts("size="+strconv.FormatInt(l.Plan.AreaBytes, 10), "nr_inodes="+strconv.FormatInt(l.Plan.AreaInodes, 10), "mode=0700")},
		what: "the write area's tmpfs"}
	if l.Plan.Page != "" {
		area.after = l.copyPage
		area.dest, area.src, area.rw = path.Join(ContainerRoot, l.Plan.Page), l.PageCopy, true
		return append(t, area)
	}
	area.after = l.makeUpper
	return append(t, area,
		hostMount{Mount: mount.Mount{Type: "overlay", Source: "overlay", Target: l.Write,
			Options: append(opts("lowerdir="+l.Base, "upperdir="+l.Upper, "workdir="+l.Work), overlayOptions...)},
			what: "the write area", before: l.copyBase, fills: l.Base, dest: path.Join(ContainerRoot, l.Plan.WriteDir), rw: true})
}

// Binds returns the container's mounts of this layout, in order: the view
// at ContainerRoot (read-only), then the write area at
// ContainerRoot/<WriteDir> or the page copy at ContainerRoot/<Page>. All
// are nosuid, nodev, noexec. The view and the write area are separate
// host mounts, side by side, so the read-only flag of the view's bind
// covers exactly the view.
func (l *Layout) Binds() []specs.Mount {
	var out []specs.Mount
	for _, m := range l.table(nil) {
		if m.dest == "" {
			continue
		}
		mode, src := "ro", m.Target
		if m.rw {
			mode = "rw"
		}
		if m.src != "" {
			src = m.src
		}
		out = append(out, specs.Mount{Destination: m.dest, Type: "bind", Source: src,
			Options: []string{"rbind", mode, "nosuid", "nodev", "noexec", "rprivate"}})
	}
	return out
}

// Prepare builds the session's host side under dir, which must not exist
// yet, from the hidden set computed at session start: the directories,
// then each mount of the table in order with what it needs made before
// and filled after. Every step pushes its undo; on any error the undo
// stack runs in reverse (unmount before remove, and a directory is only
// removed once nothing is mounted under it), so a failed Prepare leaves
// nothing behind. Errors: errdefs.ErrInvalidArgument for a dir or plan
// that cannot work (see CheckPaths), errdefs.ErrFailedPrecondition from
// CheckStart, else the failing step's error naming it.
func Prepare(dir string, plan Plan, hs *hidden.Set) (*Layout, error) {
	return prepare(dir, plan, hs, nil)
}

// prepare is Prepare with a hook that tests use to fail any step: fail is
// called with each step's name before the step runs, and with the name
// and " (done)" after it ran.
func prepare(dir string, plan Plan, hs *hidden.Set, fail func(step string) error) (_ *Layout, retErr error) {
	if strings.ContainsAny(dir, ":,\n") {
		return nil, fmt.Errorf("state directory %q: %w: it may not contain ':', ',' or newlines (overlay options)", dir, errdefs.ErrInvalidArgument)
	}
	if err := CheckPaths(plan.Repo, dir); err != nil {
		return nil, err
	}
	if err := CheckStart(plan); err != nil {
		return nil, err
	}
	l := layoutAt(dir, plan)
	var undo cleanup
	defer func() {
		if retErr != nil {
			if err := undo.run(); err != nil {
				retErr = fmt.Errorf("%w (and undoing: %v)", retErr, err)
			}
		}
	}()
	// step runs one step, its undo pushed first: a step that fails half
	// way is undone as well as one that is done.
	step := func(name string, do func() error, undoIt func() error) error {
		if undoIt != nil {
			undo.push(undoIt)
		}
		for _, stage := range []string{name, name + " (done)"} {
			if fail != nil {
				if err := fail(stage); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
			if stage == name {
				if err := do(); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	mkdir := func(p string, mode os.FileMode) error {
		name := "creating the session directory"
		if p != dir {
			name = "creating " + filepath.Base(p) + "/"
		}
		return step(name, func() error { return os.Mkdir(p, mode) }, func() error { return removeEmpty(p) })
	}
	if err := mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	table := l.table(hs)
	for i, m := range table {
		if i == 0 {
			// The self-bind comes first: the directories below are made
			// inside it.
			if err := l.mount(m, step); err != nil {
				return nil, err
			}
			for _, d := range []string{l.Repo, l.WH, l.View, l.Base, l.Area, l.Write} {
				if err := mkdir(d, 0o700); err != nil {
					return nil, err
				}
			}
			if err := mkdir(l.Ctl, 0o755); err != nil {
				return nil, err
			}
			if err := mkdir(l.Req, 0o700); err != nil {
				return nil, err
			}
			continue
		}
		if err := l.mount(m, step); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// mount runs one row of the table through step: before, the mount (with
// its undo), private propagation, after.
func (l *Layout) mount(m hostMount, step func(string, func() error, func() error) error) error {
	if m.before != nil {
		if err := step("preparing "+m.what, m.before, func() error { return clearTree(m.fills, l.Dir) }); err != nil {
			return err
		}
	}
	do := func() error {
		mm := m.Mount
		mm.Target = ""
		if m.pin {
			d, err := rootfs.OpenRoot(m.Source)
			if err != nil {
				return err
			}
			defer d.Close()
			mm.Source = fmt.Sprintf("/proc/self/fd/%d", d.Fd())
		}
		if err := mm.Mount(m.Target); err != nil {
			return err
		}
		if m.private {
			if err := unix.Mount("", m.Target, "", unix.MS_PRIVATE, ""); err != nil {
				_ = mount.UnmountAll(m.Target, unix.MNT_DETACH)
				return fmt.Errorf("making %s private: %w", m.Target, err)
			}
		}
		return nil
	}
	if err := step("mounting "+m.what, do, func() error { return unmount(m.Target) }); err != nil {
		return err
	}
	if m.after != nil {
		return step("filling "+m.what, m.after, nil)
	}
	return nil
}

// cleanup is a stack of undo functions (in the manner of gVisor's
// pkg/cleanup): run calls them last first, all of them, and joins their
// errors.
type cleanup []func() error

func (c *cleanup) push(f func() error) { *c = append(*c, f) }

func (c *cleanup) run() error {
	var errs []error
	for i := len(*c) - 1; i >= 0; i-- {
		if err := (*c)[i](); err != nil {
			errs = append(errs, err)
		}
	}
	*c = nil
	return errors.Join(errs...)
}

// removeEmpty removes the directory p, which the undo stack has emptied
// (os.Remove, never RemoveAll: a failed unmount can never wipe mounted
// data). A missing p is fine.
func removeEmpty(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// clearTree empties the plain directory p of the layout under dir (the
// whiteout layer, the base copy) after checking with mountinfo that
// nothing is mounted at or under it.
func clearTree(p, dir string) error {
	if ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(p)); err != nil || len(ms) > 0 {
		return fmt.Errorf("not clearing %s: %w: something is mounted under it", p, errdefs.ErrFailedPrecondition)
	}
	if !within(p, dir) || p == dir {
		return fmt.Errorf("not clearing %s: outside %s", p, dir)
	}
	entries, err := os.ReadDir(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(p, e.Name())))
	}
	return errors.Join(errs...)
}

// unmount unmounts every mount stacked at target; what is not mounted is
// fine. MNT_DETACH is the fallback.
func unmount(target string) error {
	if err := mount.UnmountAll(target, 0); err != nil {
		if err := mount.UnmountAll(target, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting %s: %w", target, err)
		}
	}
	return nil
}

// buildWhiteouts fills the whiteout layer: every visible directory of
// the repository is mirrored (mode, owner, times), each hidden path
// becomes a 0:0 character device, and the mount points the repository
// lacks (the write directory, the page) are made.
//
// Mirroring every directory, not only those on the way to a hidden path,
// makes every directory of the view an overlay merged directory: the
// kernel reports st_nlink 1 for all of them (overlayfs does not count
// the subdirectories of a merged directory) and takes their size and
// blocks from the whiteout layer's file system, so a directory that holds
// hidden entries looks like every other (no existence oracle through
// `find -links` or stat). A merged directory also takes its mode, owner
// and times from the uppermost layer that has it, the whiteout layer
// here, hence the mirrored attributes.
//
// The directories are those the hidden set's own walk listed
// (hidden.Set.Dirs), so the repository is not walked a second time; a
// set read back from its JSON form has none, and then the repository is
// walked here through its bind (rootfs.Walk, never through a link). The
// layer is written in one pass relative to open descriptors (writeLayer).
func (l *Layout) buildWhiteouts(hs *hidden.Set) error {
	repo, err := rootfs.OpenRoot(l.Repo)
	if err != nil {
		return err
	}
	defer repo.Close()
	wh, err := rootfs.OpenRoot(l.WH)
	if err != nil {
		return err
	}
	defer wh.Close()
	dirs := hs.Dirs()
	if dirs == nil {
		if dirs, err = visibleDirs(repo, hs); err != nil {
			return err
		}
	}
	left, err := writeLayer(wh.Fd(), dirs, hs.Hides())
	if err != nil {
		return err
	}
	// Made after the pass: hidden paths whose directory was not listed
	// (gone since the set was computed: their whiteouts keep a later copy
	// hidden too), and the mount points.
	var late []string
	for _, hd := range left {
		if err := l.mirrorDir(repo, path.Dir(hd.Path)); err != nil {
			return err
		}
		if err := unix.Mknodat(wh.Fd(), hd.Path, unix.S_IFCHR|0o000, 0); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("whiteout %s: %w", hd.Path, err)
		}
		late = append(late, hd.Path)
	}
	if !l.Plan.ReadOnly {
		// Mount points the repository may lack.
		if err := l.mirrorDir(repo, l.Plan.WriteDir); err != nil {
			return err
		}
		late = append(late, l.Plan.WriteDir)
		if l.Plan.Page != "" {
			if err := l.mirrorDir(repo, path.Dir(l.Plan.Page)); err != nil {
				return err
			}
			if _, err := repo.Lstat(l.Plan.Page, rootfs.NoSymlinks); errors.Is(err, unix.ENOENT) {
				f, err := os.OpenFile(filepath.Join(l.WH, filepath.FromSlash(l.Plan.Page)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
				if err != nil {
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
			}
			late = append(late, l.Plan.Page)
		}
	}
	return retime(wh.Fd(), dirs, late)
}

// visibleDirs lists the visible directories of the repository open as
// repo with their status, in hidden.ComparePaths order (rootfs.Walk's):
// hs.Dirs for a set that has none.
func visibleDirs(repo *rootfs.Dir, hs *hidden.Set) ([]hidden.VisibleDir, error) {
	var dirs []hidden.VisibleDir
	err := rootfs.Walk(repo, rootfs.Visitor{
		Dir: func(d *rootfs.Dir, _ []fs.DirEntry) error {
			st, err := d.Fstat()
			if err != nil {
				return fmt.Errorf("stat %s: %w", d.Rel(), err)
			}
			dirs = append(dirs, hidden.VisibleDir{Path: d.Rel(), Mode: st.Mode, UID: st.Uid, GID: st.Gid, Atime: st.Atim, Mtime: st.Mtim})
			return nil
		},
		Entry: func(d *rootfs.Dir, e fs.DirEntry) error {
			if _, ok := hs.Lookup(d.Join(e.Name())); ok && e.IsDir() {
				return rootfs.SkipDir
			}
			return nil
		},
	})
	return dirs, err
}

// writeLayer writes the whiteout layer open as root in one pass over
// dirs and hides, both in hidden.ComparePaths order (dirs[0] is "."):
// each directory is made with mkdirat(2) relative to its parent's
// descriptor, each hidden path becomes a 0:0 character device, and once
// the pass has left a directory (everything in it made) its owner, mode
// and times are set relative to its parent (owner first: chown clears
// set-id bits that chmod then restores; times last: making an entry
// changes its directory's times). A directory is opened only when
// something is made in it, so a leaf costs mkdirat, fchownat, fchmodat
// and utimensat. It returns the hidden paths whose directory dirs does
// not list, made by nothing.
func writeLayer(root int, dirs []hidden.VisibleDir, hides []hidden.Hide) (left []hidden.Hide, err error) {
	if len(dirs) == 0 || dirs[0].Path != "." {
		return nil, fmt.Errorf("mirroring the repository: the directory list does not start at its root")
	}
	w := &layerWriter{stack: []layerDir{{VisibleDir: dirs[0], fd: root}}}
	defer w.closeAll()
	i, j := 1, 0
	for i < len(dirs) || j < len(hides) {
		if j == len(hides) || (i < len(dirs) && hidden.ComparePaths(dirs[i].Path, hides[j].Path) < 0) {
			d := dirs[i]
			i++
			pfd, ok, err := w.parent(d.Path)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, fmt.Errorf("mirroring %s: its directory is not listed before it", d.Path)
			}
			name := path.Base(d.Path)
			if err := unix.Mkdirat(pfd, name, d.Mode&0o777); err != nil {
				return nil, fmt.Errorf("mirroring %s: %w", d.Path, err)
			}
			w.stack = append(w.stack, layerDir{VisibleDir: d, name: name, fd: -1})
			continue
		}
		hd := hides[j]
		j++
		pfd, ok, err := w.parent(hd.Path)
		if err != nil {
			return nil, err
		}
		if !ok {
			left = append(left, hd)
			continue
		}
		if err := unix.Mknodat(pfd, path.Base(hd.Path), unix.S_IFCHR|0o000, 0); err != nil {
			return nil, fmt.Errorf("whiteout %s: %w", hd.Path, err)
		}
	}
	for len(w.stack) > 1 {
		if err := w.pop(); err != nil {
			return nil, err
		}
	}
	top := w.stack[0]
	if err := setAttrs(top.fd, ".", &top.VisibleDir); err != nil {
		return nil, fmt.Errorf("mirroring the repository's root: %w", err)
	}
	return left, nil
}

// layerWriter is writeLayer's stack: the directories on the way to the
// current one, the layer's root first (never closed here).
type layerWriter struct {
	stack []layerDir
}

// layerDir is a directory made in the layer: its name in its parent, and
// its descriptor once something is made in it (-1 before).
type layerDir struct {
	hidden.VisibleDir
	name string
	fd   int
}

// parent leaves the directories that do not hold p (setting their
// attributes) and returns the descriptor of p's directory, opened if need
// be; false when p's directory is not the current one (not listed).
func (w *layerWriter) parent(p string) (int, bool, error) {
	dir := path.Dir(p)
	for len(w.stack) > 1 && !within(dir, w.stack[len(w.stack)-1].Path) {
		if err := w.pop(); err != nil {
			return -1, false, err
		}
	}
	top := &w.stack[len(w.stack)-1]
	if top.Path != dir {
		return -1, false, nil
	}
	if top.fd < 0 {
		fd, err := unix.Openat(w.stack[len(w.stack)-2].fd, top.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, false, fmt.Errorf("mirroring %s: %w", top.Path, err)
		}
		top.fd = fd
	}
	return top.fd, true, nil
}

// pop closes the current directory, which the pass has left, and sets
// its attributes relative to its parent.
func (w *layerWriter) pop() error {
	d := w.stack[len(w.stack)-1]
	w.stack = w.stack[:len(w.stack)-1]
	if d.fd >= 0 {
		unix.Close(d.fd)
	}
	if err := setAttrs(w.stack[len(w.stack)-1].fd, d.name, &d.VisibleDir); err != nil {
		return fmt.Errorf("mirroring %s: %w", d.Path, err)
	}
	return nil
}

func (w *layerWriter) closeAll() {
	for _, d := range w.stack[1:] {
		if d.fd >= 0 {
			unix.Close(d.fd)
		}
	}
	w.stack = w.stack[:1]
}

// setAttrs gives the directory name of dirfd (dirfd itself for ".")
// the owner, mode and times of d, in that order.
func setAttrs(dirfd int, name string, d *hidden.VisibleDir) error {
	if err := unix.Fchownat(dirfd, name, int(d.UID), int(d.GID), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if err := unix.Fchmodat(dirfd, name, d.Mode&0o7777, 0); err != nil {
		return err
	}
	return unix.UtimesNanoAt(dirfd, name, []unix.Timespec{d.Atime, d.Mtime}, unix.AT_SYMLINK_NOFOLLOW)
}

// retime sets again the times of the mirrored directories (dirs) above
// the paths made in the layer open as root after writeLayer's pass.
func retime(root int, dirs []hidden.VisibleDir, late []string) error {
	done := map[string]bool{}
	for _, p := range late {
		for p != "." {
			p = path.Dir(p)
			if done[p] {
				break
			}
			done[p] = true
			i, ok := slices.BinarySearchFunc(dirs, p, func(d hidden.VisibleDir, p string) int { return hidden.ComparePaths(d.Path, p) })
			if !ok {
				continue
			}
			if err := unix.UtimesNanoAt(root, p, []unix.Timespec{dirs[i].Atime, dirs[i].Mtime}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return fmt.Errorf("mirroring the times of %s: %w", p, err)
			}
		}
	}
	return nil
}

// mirrorDir creates the directory rel in the whiteout layer with the mode,
// owner and times of the same directory in the repository (the merged
// directory takes its attributes from the uppermost layer that has it), or
// 0755 root when the repository lacks it.
func (l *Layout) mirrorDir(repo *rootfs.Dir, rel string) error {
	dst := filepath.Join(l.WH, filepath.FromSlash(rel))
	if rel != "." {
		if err := l.mirrorDir(repo, path.Dir(rel)); err != nil {
			return err
		}
		if _, err := os.Lstat(dst); err == nil {
			return nil
		}
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
	}
	st, err := repo.Lstat(rel, rootfs.NoSymlinks)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	if err := unix.Chmod(dst, st.Mode&0o7777); err != nil {
		return err
	}
	if err := unix.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, dst, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}

// copyPage copies the assigned page from the view (under
// rootfs.NoSymlinks: the page and every parent must be real) into the
// write area, owned by UID:GID. With Plan.CopyAs the page is opened with
// those credentials (package fscred): a page they may not read is
// refused (errdefs.ErrPermissionDenied), whatever was checked before.
func (l *Layout) copyPage() error {
	// The view's root is opened as the process: the way to it is the
	// state directory's (root's alone); below it, CopyAs's.
	view, err := rootfs.OpenRoot(l.View)
	if err != nil {
		return err
	}
	defer view.Close()
	return fscred.Split(l.Plan.CopyAs, func(asRoot func(func() error) error) error {
		src, _, err := view.OpenFile(l.Plan.Page, rootfs.NoSymlinks)
		if errors.Is(err, rootfs.ErrNotRegular) {
			return fmt.Errorf("%w: the page %s is not a regular file", errdefs.ErrFailedPrecondition, l.Plan.Page)
		}
		if err != nil {
			return l.copyError("reading the page "+l.Plan.Page, err)
		}
		defer src.Close()
		return asRoot(func() error {
			dst, err := os.OpenFile(l.PageCopy, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			defer dst.Close()
			if _, err := io.Copy(dst, src); err != nil {
				return fmt.Errorf("copying the page: %w", err)
			}
			return dst.Chown(l.Plan.UID, l.Plan.GID)
		})
	})
}

// copyError is err of reading what the copy takes from the view; one
// Plan.CopyAs may not read is errdefs.ErrPermissionDenied, naming it.
func (l *Layout) copyError(what string, err error) error {
	if c := l.Plan.CopyAs; c != nil && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) {
		return fmt.Errorf("%s: %w: uid %d (the caller) may not read it: %w", what, errdefs.ErrPermissionDenied, c.UID, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// makeUpper makes the write area's upper and work directories; the merged
// root takes the upperdir's owner.
func (l *Layout) makeUpper() error {
	for _, d := range []string{l.Upper, l.Work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	return os.Chown(l.Upper, l.Plan.UID, l.Plan.GID)
}

// copyBase copies directories, regular files and symlinks from the view's
// WriteDir (where hidden paths are already absent; rootfs.Walk, never
// through a link) to the base, owned by UID:GID. Other file types are
// skipped. A missing WriteDir gives an empty base. With Plan.CopyAs every
// source is opened, listed and read with those credentials (package
// fscred) while the base is written with the process's own: a directory
// or file they may not read fails the copy (errdefs.ErrPermissionDenied),
// so what the copy takes is what they could read at the moment it took
// it, whatever was checked before.
func (l *Layout) copyBase() error {
	uid, gid := l.Plan.UID, l.Plan.GID
	if err := os.Chown(l.Base, uid, gid); err != nil {
		return err
	}
	if err := os.Chmod(l.Base, 0o755); err != nil {
		return err
	}
	view, err := rootfs.OpenRoot(l.View) // as copyPage's
	if err != nil {
		return err
	}
	defer view.Close()
	return fscred.Split(l.Plan.CopyAs, func(asRoot func(func() error) error) error {
		src, err := view.OpenDir(l.Plan.WriteDir, rootfs.NoSymlinks)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return l.copyError(l.Plan.WriteDir, err)
		}
		defer src.Close()
		start := src.Rel()
		err = rootfs.Walk(src, rootfs.Visitor{Entry: func(d *rootfs.Dir, e fs.DirEntry) error {
			rel := strings.TrimPrefix(d.Join(e.Name()), start+"/")
			out := filepath.Join(l.Base, filepath.FromSlash(rel))
			st, err := d.Lstat(e.Name(), rootfs.NoSymlinks)
			if err != nil {
				return err
			}
			var write func() error
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFDIR:
				write = func() error { return os.Mkdir(out, os.FileMode(st.Mode&0o777)) }
			case unix.S_IFREG:
				in, _, err := d.OpenRegular(e.Name(), &st)
				if err != nil {
					return l.copyError(d.Join(e.Name()), err)
				}
				defer in.Close()
				write = func() error { return copyRegular(in, &st, out) }
			case unix.S_IFLNK:
				target, err := d.Readlink(e.Name())
				if err != nil {
					return err
				}
				write = func() error { return os.Symlink(target, out) }
			default:
				return nil
			}
			return asRoot(func() error {
				if err := write(); err != nil {
					return err
				}
				return os.Lchown(out, uid, gid)
			})
		}})
		if err != nil && !errdefs.IsPermissionDenied(err) {
			err = l.copyError("copying "+l.Plan.WriteDir, err)
		}
		return err
	})
}

// copyRegular copies in (a regular file examined as st) to dst, with its
// permission bits less the executable ones.
func copyRegular(in *os.File, st *unix.Stat_t, dst string) error {
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, os.FileMode(st.Mode&0o666))
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Open re-attaches to the layout that Prepare built under dir for plan
// and that is still mounted (host mounts belong to no process: they stay
// between a session's invocations, across corral processes). It checks
// every row of the table with mountinfo: present, of its type (binds
// excepted: mountinfo names the underlying file system), read-only where
// the row is, and, for an overlay, with the row's layers.
//
// It returns ErrNotMounted when none of them is present, and an error
// wrapping errdefs.ErrFailedPrecondition, naming what is missing or
// wrong, when only some are: such a layout is neither used nor repaired.
func Open(dir string, plan Plan) (*Layout, error) {
	l := layoutAt(dir, plan)
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	if len(ms) == 0 {
		return nil, ErrNotMounted
	}
	// The topmost mount at each mount point is the last one listed.
	top := map[string]*mountinfo.Info{}
	for _, m := range ms {
		top[m.Mountpoint] = m
	}
	var problems []string
	for _, row := range l.table(nil) {
		if p := row.check(top[row.Target]); p != "" {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("re-attaching to %s: %w: %s", dir, errdefs.ErrFailedPrecondition, strings.Join(problems, "; "))
	}
	return l, nil
}

// check returns what is wrong with the mountinfo entry m for the row, or "".
func (row hostMount) check(m *mountinfo.Info) string {
	switch {
	case m == nil:
		return fmt.Sprintf("%s (%s) is not mounted", row.what, row.Target)
	case row.Type != "bind" && m.FSType != row.Type:
		return fmt.Sprintf("%s (%s) is %s, want %s", row.what, row.Target, m.FSType, row.Type)
	case row.ReadOnly() && !slices.Contains(strings.Split(m.Options, ","), "ro"):
		return fmt.Sprintf("%s (%s) is not read-only", row.what, row.Target)
	}
	if row.Type == "overlay" {
		for _, o := range row.Options {
			if (strings.HasPrefix(o, "lowerdir=") || strings.HasPrefix(o, "upperdir=")) && !strings.Contains(m.VFSOptions, o) {
				return fmt.Sprintf("%s (%s) is not the overlay %s", row.what, row.Target, o)
			}
		}
	}
	return ""
}

// AreaFull reports whether the write area's tmpfs has no free blocks or
// inodes left (a write hit ENOSPC).
func (l *Layout) AreaFull() bool {
	if l.Plan.ReadOnly {
		return false
	}
	var st unix.Statfs_t
	if err := unix.Statfs(l.Area, &st); err != nil {
		return false
	}
	return st.Bavail == 0 || st.Ffree == 0
}

// Close unmounts the table's mounts in reverse order, then anything else
// still mounted under Dir (deepest first), and removes Dir only once
// nothing is mounted under it. It tolerates what is already gone.
func (l *Layout) Close() error {
	var errs []error
	table := l.table(nil)
	for i := len(table) - 1; i >= 0; i-- {
		if err := unmount(table[i].Target); err != nil {
			errs = append(errs, err)
		}
	}
	if err := unmountUnder(l.Dir); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if left, err := mountinfo.GetMounts(mountinfo.PrefixFilter(l.Dir)); err != nil || len(left) > 0 {
		return fmt.Errorf("closing %s: %w: %d mounts left", l.Dir, errdefs.ErrFailedPrecondition, len(left))
	}
	return removeTree(l.Dir)
}

// removeTree removes dir and everything below it, never following a link
// (each directory is opened O_NOFOLLOW relative to its parent, each entry
// removed relative to it); a missing dir is fine. It is os.RemoveAll
// shaped for the whiteout layer, most of whose directories are empty
// leaves: a directory is first removed with unlinkat(AT_REMOVEDIR), one
// system call, and only opened and listed when that fails with
// ENOTEMPTY, where os.RemoveAll unlinks first (EISDIR) and then opens and
// lists every directory.
func removeTree(dir string) error {
	parent, err := unix.Open(filepath.Dir(dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: filepath.Dir(dir), Err: err}
	}
	defer unix.Close(parent)
	return removeAt(parent, filepath.Base(dir), dir)
}

// removeAt removes the entry name of the directory parent, a directory
// or not, with everything below it; full names it in errors.
func removeAt(parent int, name, full string) error {
	err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ENOTDIR):
		if err := unix.Unlinkat(parent, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return &os.PathError{Op: "unlinkat", Path: full, Err: err}
		}
		return nil
	case !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST):
		return &os.PathError{Op: "unlinkat", Path: full, Err: err}
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "openat", Path: full, Err: err}
	}
	f := os.NewFile(uintptr(fd), full)
	// All entries first: removing while listing may skip some (the
	// directory is reshuffled under the offset).
	entries, err := f.ReadDir(-1)
	if err != nil {
		f.Close()
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, removeAt(fd, e.Name(), full+"/"+e.Name()))
			continue
		}
		err := unix.Unlinkat(fd, e.Name(), 0)
		if errors.Is(err, unix.EISDIR) {
			err = removeAt(fd, e.Name(), full+"/"+e.Name())
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, &os.PathError{Op: "unlinkat", Path: full + "/" + e.Name(), Err: err})
		}
	}
	f.Close()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "unlinkat", Path: full, Err: err}
	}
	return nil
}

// unmountUnder unmounts every mount at or below dir, deepest first, with
// MNT_DETACH as the fallback; EINVAL and ENOENT (not mounted) are ignored.
func unmountUnder(dir string) error {
	return unmountPass(dir, 4)
}

func unmountPass(dir string, passes int) error {
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return fmt.Errorf("reading mountinfo: %w", err)
	}
	sort.Slice(ms, func(i, j int) bool { return len(ms[i].Mountpoint) > len(ms[j].Mountpoint) })
	var errs []error
	for _, m := range ms {
		err := unix.Unmount(m.Mountpoint, 0)
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			err = unix.Unmount(m.Mountpoint, unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", m.Mountpoint, err))
		}
	}
	// A mount may be stacked more than once on one mount point.
	if len(errs) == 0 && passes > 1 {
		if left, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir)); err == nil && len(left) > 0 {
			return unmountPass(dir, passes-1)
		}
	}
	return errors.Join(errs...)
}

// Sweep unmounts every mount left under stateDir (after a crash) and
// returns the mount points it found. Callers then remove the session
// directories.
func Sweep(stateDir string) ([]string, error) {
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(stateDir))
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	var found []string
	for _, m := range ms {
		found = append(found, m.Mountpoint)
	}
	sort.Strings(found)
	return found, unmountUnder(stateDir)
}
