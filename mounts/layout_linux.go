package mounts

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/mounts/hidden"
	"github.com/moby/sys/mountinfo"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// ContainerRoot is where the repository view is mounted in the container.
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
}

// Layout is the host side of one session, every path under Dir (0700):
//
//	Dir/repo   read-only bind of the repository (pinned by fd at start)
//	Dir/wh     the whiteout layer: one 0:0 char device per hidden path,
//	           and mount points (openwiki/, the page) the repo lacks
//	Dir/view   overlay lowerdir=wh:repo, read-only: the repository view
//	Dir/base   the write area's lower layer: a copy of the view's
//	           WriteDir owned by UID:GID (so existing pages are editable)
//	Dir/area   size- and inode-limited tmpfs with upper/ and work/, or page
//	Dir/write  overlay lowerdir=base,upperdir=area/upper: the write area
//	Dir/ctl    argv files for corral-init, bound read-only at /.corral/ctl
//
// Mounts are made once per session and bound into each container; Close
// unmounts them deepest first. A crash leaves them for Sweep to find.
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
	// Ctl holds the argv files handed to corral-init (bound read-only).
	Ctl string
}

// overlayOptions keep the overlay simple enough for the diff collector to
// read: no redirects (a directory rename fails with EXDEV instead), no
// metacopy, no index (Documentation/filesystems/overlayfs.rst).
const overlayOptions = "redirect_dir=off,metacopy=off,index=off"

// CheckStart refuses a repository layout the session must not start on
// (cases PATH-06): the write directory, any of its ancestors, or the page
// and its ancestors being a symlink or of the wrong type. The check uses
// openat2 with RESOLVE_NO_SYMLINKS beneath the repository root. Errors wrap
// errdefs.ErrFailedPrecondition.
func CheckStart(plan Plan) error {
	if plan.ReadOnly {
		return nil
	}
	root, err := unix.Open(plan.Repo, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening repository %s: %w", plan.Repo, err)
	}
	defer unix.Close(root)
	check := func(rel string, wantDir bool) error {
		fd, err := unix.Openat2(root, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
			return fmt.Errorf("%w: %s is or passes through a symlink; corral starts only when it is a real directory", errdefs.ErrFailedPrecondition, rel)
		}
		if err != nil {
			return fmt.Errorf("checking %s: %w", rel, err)
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		isReg := st.Mode&unix.S_IFMT == unix.S_IFREG
		kind := "a regular file"
		if wantDir {
			kind = "a directory"
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			// openat2 returns the link itself for a last component opened
			// O_PATH|O_NOFOLLOW; say what it is.
			return fmt.Errorf("%w: %s is a symlink; corral starts only when it is %s", errdefs.ErrFailedPrecondition, rel, kind)
		}
		if (wantDir && !isDir) || (!wantDir && !isReg) {
			return fmt.Errorf("%w: %s exists but is not %s", errdefs.ErrFailedPrecondition, rel, kind)
		}
		if !wantDir && st.Nlink > 1 {
			return fmt.Errorf("%w: %s has %d hard links", errdefs.ErrFailedPrecondition, rel, st.Nlink)
		}
		return nil
	}
	parts := strings.Split(plan.WriteDir, "/")
	for i := range parts {
		if err := check(strings.Join(parts[:i+1], "/"), true); err != nil {
			return err
		}
	}
	if plan.Page != "" {
		pp := strings.Split(plan.Page, "/")
		for i := len(parts); i < len(pp); i++ {
			if err := check(strings.Join(pp[:i+1], "/"), i < len(pp)-1); err != nil {
				return err
			}
		}
	}
	return checkLinksInside(plan.Repo, plan.WriteDir)
}

// checkLinksInside refuses a write directory holding a symlink whose
// target leaves the repository (absolute, or ".." past the root): inside
// the container such a link would lead writes to wherever it points
// (cases PATH-06). Links that stay inside the repository are kept; the
// kernel and the collector handle them (PATH-05).
func checkLinksInside(repo, writeDir string) error {
	root := filepath.Join(repo, filepath.FromSlash(writeDir))
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, os.ErrNotExist) {
				return filepath.SkipAll
			}
			return err
		}
		if d.Type()&os.ModeSymlink == 0 {
			return nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repo, p)
		resolved := path.Join(path.Dir(filepath.ToSlash(rel)), target)
		if path.IsAbs(target) || resolved == ".." || strings.HasPrefix(resolved, "../") {
			return fmt.Errorf("%w: %s is a symlink to %s, outside the repository; corral starts only when the write scope's links stay inside it",
				errdefs.ErrFailedPrecondition, filepath.ToSlash(rel), target)
		}
		return nil
	})
	if errors.Is(err, errdefs.ErrFailedPrecondition) {
		return err
	}
	if err != nil {
		return fmt.Errorf("checking links under %s: %w", writeDir, err)
	}
	return nil
}

// Prepare builds the session's host side under dir, which must not exist
// yet, from the hidden set computed at session start. On error everything
// it made is undone.
func Prepare(dir string, plan Plan, hidden *hidden.Set) (l *Layout, retErr error) {
	if strings.ContainsAny(dir, ":,\n") {
		return nil, fmt.Errorf("state directory %q: %w: it may not contain ':', ',' or newlines (overlay options)", dir, errdefs.ErrInvalidArgument)
	}
	if err := CheckStart(plan); err != nil {
		return nil, err
	}
	l = &Layout{
		Dir: dir, Plan: plan,
		Repo: filepath.Join(dir, "repo"), WH: filepath.Join(dir, "wh"), View: filepath.Join(dir, "view"),
		Base: filepath.Join(dir, "base"), Area: filepath.Join(dir, "area"), Write: filepath.Join(dir, "write"),
		Ctl: filepath.Join(dir, "ctl"),
	}
	l.Upper = filepath.Join(l.Area, "upper")
	l.Work = filepath.Join(l.Area, "work")
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating session directory: %w", err)
	}
	defer func() {
		if retErr != nil {
			_ = l.Close()
		}
	}()
	// A private self-bind: nothing mounted below propagates to the host's
	// shared peer groups, nor from them into it.
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("binding session directory: %w", err)
	}
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("making session directory private: %w", err)
	}
	for _, d := range []string{l.Repo, l.WH, l.View, l.Base, l.Area, l.Write} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(l.Ctl, 0o755); err != nil {
		return nil, err
	}
	if err := bindRepo(plan.Repo, l.Repo); err != nil {
		return nil, err
	}
	if err := buildWhiteouts(l, hidden); err != nil {
		return nil, fmt.Errorf("building the whiteout layer: %w", err)
	}
	if err := unix.Mount("overlay", l.View, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC,
		"lowerdir="+l.WH+":"+l.Repo+","+overlayOptions); err != nil {
		return nil, fmt.Errorf("mounting the repository view: %w", err)
	}
	if plan.ReadOnly {
		return l, nil
	}
	if err := unix.Mount("tmpfs", l.Area, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC,
		fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700", plan.AreaBytes, plan.AreaInodes)); err != nil {
		return nil, fmt.Errorf("mounting the write area tmpfs: %w", err)
	}
	if plan.Page != "" {
		return l, preparePage(l)
	}
	if err := copyTree(filepath.Join(l.View, filepath.FromSlash(plan.WriteDir)), l.Base, plan.UID, plan.GID); err != nil {
		return nil, fmt.Errorf("copying %s into the write area's lower layer: %w", plan.WriteDir, err)
	}
	for _, d := range []string{l.Upper, l.Work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	// The merged root takes the upperdir's owner.
	if err := os.Chown(l.Upper, plan.UID, plan.GID); err != nil {
		return nil, err
	}
	if err := unix.Mount("overlay", l.Write, "overlay", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC,
		"lowerdir="+l.Base+",upperdir="+l.Upper+",workdir="+l.Work+","+overlayOptions); err != nil {
		return nil, fmt.Errorf("mounting the write area: %w", err)
	}
	return l, nil
}

// bindRepo binds the repository read-only at dst, through an O_PATH fd so
// the bind pins the directory that was opened.
func bindRepo(repo, dst string) error {
	fd, err := unix.Open(repo, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening repository %s: %w", repo, err)
	}
	defer unix.Close(fd)
	src := fmt.Sprintf("/proc/self/fd/%d", fd)
	// Not recursive: overlayfs does not cross mounts inside a lower layer,
	// so mounts below the repository are not part of the view either way.
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding repository: %w", err)
	}
	if err := unix.Mount("", dst, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("binding repository: %w", err)
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("making repository bind read-only: %w", err)
	}
	return nil
}

// mirrorDir creates the directory rel in the whiteout layer with the mode,
// owner and times of the same directory in the repository (the merged
// directory takes its attributes from the uppermost layer that has it), or
// 0755 root when the repository lacks it.
func mirrorDir(l *Layout, rel string) error {
	if rel == "." {
		return mirrorAttrs(l.Repo, l.WH)
	}
	parent := path.Dir(rel)
	if err := mirrorDir(l, parent); err != nil {
		return err
	}
	dst := filepath.Join(l.WH, filepath.FromSlash(rel))
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	return mirrorAttrs(filepath.Join(l.Repo, filepath.FromSlash(rel)), dst)
}

func mirrorAttrs(src, dst string) error {
	var st unix.Stat_t
	if err := unix.Lstat(src, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
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

func buildWhiteouts(l *Layout, hidden *hidden.Set) error {
	if err := mirrorDir(l, "."); err != nil {
		return err
	}
	for _, p := range hidden.Paths() {
		if err := mirrorDir(l, path.Dir(p)); err != nil {
			return err
		}
		dst := filepath.Join(l.WH, filepath.FromSlash(p))
		if err := unix.Mknod(dst, unix.S_IFCHR|0o000, 0); err != nil {
			return fmt.Errorf("whiteout %s: %w", p, err)
		}
	}
	if l.Plan.ReadOnly {
		return nil
	}
	// Mount points the repository may lack.
	if err := mirrorDir(l, l.Plan.WriteDir); err != nil {
		return err
	}
	if l.Plan.Page != "" {
		if err := mirrorDir(l, path.Dir(l.Plan.Page)); err != nil {
			return err
		}
		if _, err := os.Lstat(filepath.Join(l.Repo, filepath.FromSlash(l.Plan.Page))); errors.Is(err, os.ErrNotExist) {
			f, err := os.OpenFile(filepath.Join(l.WH, filepath.FromSlash(l.Plan.Page)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
	}
	return nil
}

func preparePage(l *Layout) error {
	l.PageCopy = filepath.Join(l.Area, "page")
	dst, err := os.OpenFile(l.PageCopy, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer dst.Close()
	// The page and every parent must be real: no symlink is followed
	// (openat2 RESOLVE_NO_SYMLINKS beneath the view's root).
	root, err := unix.Open(l.View, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, l.Plan.Page, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return fmt.Errorf("reading the page %s: %w", l.Plan.Page, err)
	}
	src := os.NewFile(uintptr(fd), l.Plan.Page)
	defer src.Close()
	if st, err := src.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("%w: the page %s is not a regular file", errdefs.ErrFailedPrecondition, l.Plan.Page)
	}
	if _, err := io.Copy(dst, src); err != nil {
		return fmt.Errorf("copying the page: %w", err)
	}
	return dst.Chown(l.Plan.UID, l.Plan.GID)
}

// copyTree copies directories, regular files and symlinks from src (a
// path in the view, where hidden paths are already absent) to dst, owned
// by uid:gid. Other file types are skipped. A missing src yields an empty
// dst.
func copyTree(src, dst string, uid, gid int) error {
	if err := os.Chown(dst, uid, gid); err != nil {
		return err
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		return err
	}
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			if p == src && errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		out := filepath.Join(dst, rel)
		switch m := info.Mode(); {
		case m.IsDir():
			if err := os.Mkdir(out, m.Perm()); err != nil {
				return err
			}
		case m.IsRegular():
			if err := copyFile(p, out, m.Perm()&0o666); err != nil {
				return err
			}
		case m&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, out); err != nil {
				return err
			}
		default:
			return nil
		}
		return os.Lchown(out, uid, gid)
	})
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Mounts returns the container's mounts for this layout, in order: the
// view at /workspace (read-only), then the write area at
// /workspace/<WriteDir> or the page copy at /workspace/<Page>. All are
// nosuid, nodev, noexec. The view and the write area are separate host
// mounts, side by side, so the read-only flag of the view's bind covers
// exactly the view.
func (l *Layout) Mounts() []specs.Mount {
	opts := func(mode string) []string {
		return []string{"rbind", mode, "nosuid", "nodev", "noexec", "rprivate"}
	}
	ms := []specs.Mount{{Destination: ContainerRoot, Type: "bind", Source: l.View, Options: opts("ro")}}
	switch {
	case l.Plan.ReadOnly:
	case l.Plan.Page != "":
		ms = append(ms, specs.Mount{Destination: path.Join(ContainerRoot, l.Plan.Page), Type: "bind", Source: l.PageCopy, Options: opts("rw")})
	default:
		ms = append(ms, specs.Mount{Destination: path.Join(ContainerRoot, l.Plan.WriteDir), Type: "bind", Source: l.Write, Options: opts("rw")})
	}
	return ms
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

// Close unmounts everything under Dir, deepest first, then removes Dir.
// It tolerates what is already gone. Directories are removed with
// os.Remove after their unmount succeeded, never RemoveAll across a mount.
func (l *Layout) Close() error {
	if err := unmountUnder(l.Dir); err != nil {
		return err
	}
	return os.RemoveAll(l.Dir)
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
