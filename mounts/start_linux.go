package mounts

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/rootfs"
	"golang.org/x/sys/unix"
)

// CheckPaths refuses a repository and a state directory that a session
// cannot keep apart: a repository that is "/" or holds the state
// directory (the session's own mounts would appear in its view, and the
// overlay of the repository would contain itself: ELOOP), and a state
// directory that holds the repository. Both are compared as absolute
// paths with their symbolic links resolved where they exist. The error is
// one line wrapping errdefs.ErrInvalidArgument.
func CheckPaths(repo, stateDir string) error {
	r, err := canonicalPath(repo)
	if err != nil {
		return fmt.Errorf("repository %q: %w: %v", repo, errdefs.ErrInvalidArgument, err)
	}
	if r == "/" {
		return fmt.Errorf("%w: the repository is /, the whole machine; name the directory of one repository", errdefs.ErrInvalidArgument)
	}
	if stateDir == "" {
		return nil
	}
	s, err := canonicalPath(stateDir)
	if err != nil {
		return fmt.Errorf("state directory %q: %w: %v", stateDir, errdefs.ErrInvalidArgument, err)
	}
	switch {
	case within(s, r):
		return fmt.Errorf("%w: the state directory %s is inside the repository %s; a session would see its own mounts; choose a state directory outside the repository (--state-dir)", errdefs.ErrInvalidArgument, stateDir, repo)
	case within(r, s):
		return fmt.Errorf("%w: the repository %s is inside corral's state directory %s; name a repository outside it", errdefs.ErrInvalidArgument, repo, stateDir)
	}
	return nil
}

// canonicalPath returns p absolute and clean, with the symbolic links of
// its longest existing prefix resolved.
func canonicalPath(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for cur := abs; ; cur = filepath.Dir(cur) {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(real, rest), nil
		}
		if cur == filepath.Dir(cur) {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// within reports whether p is dir or below it (both clean and absolute).
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// CheckStart refuses a repository layout the session must not start on
// (cases PATH-06): the write directory, any of its ancestors, or the page
// and its ancestors being a symlink or of the wrong type, and a write
// directory holding a link that leaves the repository. Paths are looked up
// under rootfs.NoSymlinks from the repository root. Errors wrap
// errdefs.ErrFailedPrecondition.
func CheckStart(plan Plan) error {
	if plan.ReadOnly {
		return nil
	}
	root, err := rootfs.OpenRoot(plan.Repo)
	if err != nil {
		return fmt.Errorf("opening repository %s: %w", plan.Repo, err)
	}
	defer root.Close()
	check := func(rel string, wantDir bool) error {
		st, err := root.Lstat(rel, rootfs.NoSymlinks)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
			return fmt.Errorf("%w: %s is or passes through a symlink; corral starts only when it is a real directory", errdefs.ErrFailedPrecondition, rel)
		}
		if err != nil {
			return fmt.Errorf("checking %s: %w", rel, err)
		}
		kind := "a regular file"
		if wantDir {
			kind = "a directory"
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return fmt.Errorf("%w: %s is a symlink; corral starts only when it is %s", errdefs.ErrFailedPrecondition, rel, kind)
		case unix.S_IFDIR:
			if !wantDir {
				return fmt.Errorf("%w: %s exists but is not %s", errdefs.ErrFailedPrecondition, rel, kind)
			}
		case unix.S_IFREG:
			if wantDir {
				return fmt.Errorf("%w: %s exists but is not %s", errdefs.ErrFailedPrecondition, rel, kind)
			}
			if st.Nlink > 1 {
				return fmt.Errorf("%w: %s has %d hard links", errdefs.ErrFailedPrecondition, rel, st.Nlink)
			}
		default:
			return fmt.Errorf("%w: %s exists but is not %s", errdefs.ErrFailedPrecondition, rel, kind)
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
	return checkLinksInside(root, plan.WriteDir)
}

// checkLinksInside refuses a write directory holding a symlink whose
// target leaves the repository (absolute, or ".." past the root): inside
// the container such a link would lead writes to wherever it points
// (cases PATH-06). Links that stay inside the repository are kept; the
// kernel and the collector handle them (PATH-05).
func checkLinksInside(root *rootfs.Dir, writeDir string) error {
	dir, err := root.OpenDir(writeDir, rootfs.NoSymlinks)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking links under %s: %w", writeDir, err)
	}
	defer dir.Close()
	err = rootfs.Walk(dir, rootfs.Visitor{Entry: func(d *rootfs.Dir, e fs.DirEntry) error {
		if e.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, err := d.Readlink(e.Name())
		if err != nil {
			return err
		}
		rel := d.Join(e.Name())
		resolved := path.Join(path.Dir(rel), target)
		if path.IsAbs(target) || resolved == ".." || strings.HasPrefix(resolved, "../") {
			return fmt.Errorf("%w: %s is a symlink to %s, outside the repository; corral starts only when the write scope's links stay inside it",
				errdefs.ErrFailedPrecondition, rel, target)
		}
		return nil
	}})
	if errors.Is(err, errdefs.ErrFailedPrecondition) {
		return err
	}
	if err != nil {
		return fmt.Errorf("checking links under %s: %w", writeDir, err)
	}
	return nil
}
