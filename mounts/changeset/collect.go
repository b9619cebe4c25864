package changeset

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/rootfs"
	"golang.org/x/sys/unix"
)

// Overlay xattrs in the trusted namespace (overlay mounted by root without
// the userxattr option); see the kernel's
// Documentation/filesystems/overlayfs.rst.
const (
	xattrOpaque   = "trusted.overlay.opaque"
	xattrRedirect = "trusted.overlay.redirect"
	xattrMetacopy = "trusted.overlay.metacopy"
)

// Collect reads the change set of an overlay write area.
//
// upper is the overlay upperdir, base the lower copy the container saw at
// start (written by the host, expected to hold regular files and directories
// only), both absolute host paths;
// prefix is the repo-relative path the write area is mounted at ("openwiki",
// or "" for the repository root). The overlay must be unmounted (or at least
// quiescent): Collect reads the upper dir directly.
//
// It relies on the on-disk format of overlayfs
// (Documentation/filesystems/overlayfs.rst) with redirect_dir and metacopy
// off:
//   - a regular file in upper was created or modified; it is compared with
//     base, and identical bytes with identical executable and
//     setuid/setgid/sticky bits (a metadata-only copy-up after touch, chown
//     or chmod 600) give no change;
//   - a character device 0:0 is a whiteout: the base file, or every base
//     file under the base directory, is deleted. The kernel may hard-link
//     whiteouts to one shared inode, so their link count is not checked;
//   - a directory with xattr trusted.overlay.opaque = "y" replaced the base
//     directory: every base file under it that upper does not hold again is
//     deleted;
//   - any other directory is merged with base (a plain copy-up reports
//     nothing); empty directories are not changes;
//   - a rename is a whiteout plus a new file, so a delete plus a create.
//
// A type change is explicit: a file replacing a directory is a delete of
// every file under it plus a create; a directory replacing a file is a delete
// plus creates.
//
// The walk never follows a link (rootfs): entries are examined with fstatat
// (AT_SYMLINK_NOFOLLOW) relative to an open directory, directories opened with
// O_DIRECTORY|O_NOFOLLOW, regular files with O_RDONLY|O_NOFOLLOW|O_NONBLOCK,
// and each opened fd is fstat'ed to confirm it is the entry examined. Base
// files are reached from base's root under rootfs.NoSymlinks (a base entry
// behind a link is not a base file), and only where upper covers them.
// Nothing but regular files is ever opened, and a file is read only up to
// lim.MaxFileBytes+1 bytes, not at all when its size already exceeds the
// limit.
//
// Every offender becomes a Problem, and any violation rejects the set (see
// Set.Err): symbolic links, hard links (regular files with more than one
// link), fifos, sockets, devices other than whiteouts, setuid, setgid, sticky
// or executable bits, binary content (a NUL byte or invalid UTF-8, before or
// after), names with control or Unicode format characters (including bidi
// marks), invalid UTF-8, '"' or '\', any component the name table reserves
// (names.Reserved, compared folded: .git, git~1, .claims, an ignore file
// such as .openwikiignore or .gitignore, a git control file such as
// .gitattributes), even with unchanged content, overlay redirect or metacopy
// xattrs, a path that would leave prefix, a change to a base entry that is
// not a regular file, and the limits of lim. Past MaxFiles the walk stops;
// beyond MaxDepth it does not descend.
//
// The returned error is for failures to collect at all: errdefs.ErrNotFound
// when upper is absent, errdefs.ErrInvalidArgument for relative paths or an
// invalid prefix, errdefs.ErrFailedPrecondition when an entry changes while
// being read, else the failing system call. Violations are not errors.
func Collect(upper, base, prefix string, lim Limits) (*Set, error) {
	if prefix == "." {
		prefix = ""
	}
	if prefix != "" {
		if reason := CheckPath(prefix); reason != "" {
			return nil, fmt.Errorf("collecting %q: prefix %s: %s: %w", upper, Printable(prefix), reason, errdefs.ErrInvalidArgument)
		}
	}
	if !filepath.IsAbs(upper) || !filepath.IsAbs(base) {
		return nil, fmt.Errorf("collecting %q: upper and base must be absolute paths: %w", upper, errdefs.ErrInvalidArgument)
	}
	root, err := openRoot(upper)
	if err != nil {
		return nil, fmt.Errorf("collecting %q: %w", upper, err)
	}
	defer root.Close()
	// A missing base is an empty one.
	baseRoot, err := rootfs.OpenRoot(base)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("collecting %q: base: %w", upper, err)
	}
	if baseRoot != nil {
		defer baseRoot.Close()
	}

	c := &collector{base: baseRoot, prefix: prefix, lim: lim.WithDefaults()}
	opaque, err := c.dirXattrs(root, "")
	if err != nil {
		return nil, fmt.Errorf("collecting %q: %w", upper, err)
	}
	var hidden map[string]struct{}
	if opaque {
		if hidden, err = c.baseFilesUnder(""); err != nil {
			return nil, fmt.Errorf("collecting %q: %w", upper, err)
		}
	}
	if err := c.walk(root, "", 0, hidden); err != nil {
		return nil, fmt.Errorf("collecting %q: %w", upper, err)
	}
	if opaque {
		if err := c.deleteRemaining(hidden); err != nil {
			return nil, fmt.Errorf("collecting %q: %w", upper, err)
		}
	}
	return c.result(), nil
}

// CollectPage reads the change set of page mode, where a single copied file
// (copyPath, absolute) was bind-mounted at relPath (repo-relative, e.g.
// "openwiki/pages/a.md") instead of an overlay. The original is relPath in
// the repository at repo; when it is absent the page is a create, and an
// empty copy of an absent page is no change. Page mode cannot delete.
//
// The copy is opened with O_RDONLY|O_NOFOLLOW|O_NONBLOCK and must be a
// regular file with one link, no setuid/setgid/sticky bit, no executable bit
// (unless the original has the same bits and bytes), no binary content and
// within lim.MaxFileBytes; relPath obeys the name rules of Collect. The
// original is reached under rootfs.NoSymlinks: a link on its way or in its
// place is a violation. All of these are Violations.
//
// The error is errdefs.ErrNotFound when the copy is absent, else a read
// failure.
func CollectPage(copyPath, repo, relPath string, lim Limits) (*Set, error) {
	c := &collector{lim: lim.WithDefaults()}
	if reason := CheckPath(relPath); reason != "" {
		c.violate(relPath, reason)
		return c.result(), nil
	}
	area, err := openRoot(filepath.Dir(copyPath))
	if err != nil {
		return nil, fmt.Errorf("collecting page %q: %w", relPath, err)
	}
	defer area.Close()
	after, ok, err := c.readFile(area, filepath.Base(copyPath), relPath, nil, true)
	if err != nil {
		return nil, fmt.Errorf("collecting page %q: %w", relPath, err)
	}
	if !ok {
		return c.result(), nil
	}
	if c.base, err = rootfs.OpenRoot(repo); err != nil {
		return nil, fmt.Errorf("collecting page %q: %w", relPath, err)
	}
	defer c.base.Close()
	before, ok, err := c.readBase(relPath, relPath, nil)
	if err != nil {
		return nil, fmt.Errorf("collecting page %q: %w", relPath, err)
	}
	if !ok || (before == nil && len(after.data) == 0) {
		return c.result(), nil
	}
	c.compare(relPath, before, after)
	return c.result(), nil
}

// collector accumulates one Set.
type collector struct {
	base    *rootfs.Dir // the base (or, for a page, the repository); nil: empty
	prefix  string
	lim     Limits
	cs      Set
	entries int
	total   int64
	stopped bool // MaxFiles reached: the walk ends
	full    bool // MaxTotalBytes reached: nothing more is read
}

// fileData is a regular file read by the collector.
type fileData struct {
	data []byte
	mode uint32 // st_mode
}

// result returns the sorted set, with empty (not nil) lists so that JSON
// always carries arrays.
func (c *collector) result() *Set {
	cs := c.cs
	if cs.Changes == nil {
		cs.Changes = []Change{}
	}
	if cs.Violations == nil {
		cs.Violations = []Problem{}
	}
	slices.SortFunc(cs.Changes, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	slices.SortStableFunc(cs.Violations, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
	return &cs
}

func (c *collector) violate(repoPath, reason string) {
	c.cs.Violations = append(c.cs.Violations, Problem{Path: Printable(repoPath), Reason: reason})
}

// repoPath turns rel (relative to the write area) into a repo-relative path.
func (c *collector) repoPath(rel string) string {
	if c.prefix == "" {
		return rel
	}
	if rel == "" {
		return c.prefix
	}
	return c.prefix + "/" + rel
}

// count records one more examined entry and reports whether the walk may go
// on.
func (c *collector) count() bool {
	if c.stopped {
		return false
	}
	c.entries++
	if c.entries > c.lim.MaxFiles {
		c.stopped = true
		c.violate(c.repoPath(""), fmt.Sprintf("more than %d entries (files, directories and deletions)", c.lim.MaxFiles))
		return false
	}
	return true
}

// walk examines the entries of the upper directory dir (rel below the write
// area, at depth components). hidden is nil where base merges with upper;
// below an opaque directory (or a directory that replaced a file) it holds the
// base files not yet matched by an upper file, relative to the write area.
func (c *collector) walk(dir *rootfs.Dir, rel string, depth int, hidden map[string]struct{}) error {
	// Read no more than the entries still allowed by MaxFiles (plus one,
	// to detect the excess).
	entries, err := dir.ReadDir(max(c.lim.MaxFiles-c.entries+1, 1))
	if err != nil {
		return fmt.Errorf("reading directory %q: %w", c.repoPath(rel), err)
	}
	for _, e := range entries {
		if !c.count() {
			return nil
		}
		name := e.Name()
		r := path.Join(rel, name)
		repo := c.repoPath(r)
		if reason := checkName(name); reason != "" {
			c.violate(repo, reason)
			continue
		}
		if !c.inScope(repo) {
			c.violate(repo, "path leaves the write area")
			continue
		}
		if depth+1 > c.lim.MaxDepth {
			c.violate(repo, fmt.Sprintf("deeper than %d path components", c.lim.MaxDepth))
			continue
		}
		st, err := dir.Lstat(name, rootfs.NoSymlinks)
		if err != nil {
			return fmt.Errorf("stat %q: %w", repo, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if err := c.upperFile(dir, name, r, &st, hidden); err != nil {
				return err
			}
		case unix.S_IFDIR:
			if err := c.upperDir(dir, name, r, depth+1, &st, hidden); err != nil {
				return err
			}
		case unix.S_IFCHR:
			if unix.Major(uint64(st.Rdev)) == 0 && unix.Minor(uint64(st.Rdev)) == 0 {
				if err := c.whiteout(r, hidden); err != nil {
					return err
				}
				continue
			}
			c.violate(repo, typeName(&st))
		default:
			c.violate(repo, typeName(&st))
		}
	}
	return nil
}

func (c *collector) inScope(repo string) bool {
	if path.Clean(repo) != repo || path.IsAbs(repo) || repo == ".." || strings.HasPrefix(repo, "../") {
		return false
	}
	return c.prefix == "" || strings.HasPrefix(repo, c.prefix+"/")
}

// upperFile handles a regular file name in the upper directory dir.
func (c *collector) upperFile(dir *rootfs.Dir, name, rel string, st *unix.Stat_t, hidden map[string]struct{}) error {
	repo := c.repoPath(rel)
	after, ok, err := c.readFile(dir, name, repo, st, true)
	if err != nil || !ok {
		return err
	}
	var bst *unix.Stat_t // nil: readBase stats the base file itself
	if hidden != nil {
		if _, inBase := hidden[rel]; !inBase {
			c.compare(repo, nil, after)
			return nil
		}
		delete(hidden, rel)
	} else {
		if bst, err = c.lstatBase(rel); err != nil {
			return err
		}
		if bst == nil {
			c.compare(repo, nil, after)
			return nil
		}
		if bst.Mode&unix.S_IFMT == unix.S_IFDIR {
			// A file replaced a base directory.
			if err := c.deleteBaseTree(rel); err != nil {
				return err
			}
			c.compare(repo, nil, after)
			return nil
		}
	}
	before, ok, err := c.readBase(rel, repo, bst)
	if err != nil || !ok {
		return err
	}
	c.compare(repo, before, after)
	return nil
}

// upperDir handles a directory name in the upper directory parent.
func (c *collector) upperDir(parent *rootfs.Dir, name, rel string, depth int, st *unix.Stat_t, hidden map[string]struct{}) error {
	dir, err := parent.Sub(name)
	if err != nil {
		return fmt.Errorf("opening %q: %w", c.repoPath(rel), err)
	}
	defer dir.Close()
	if got, err := dir.Fstat(); err != nil {
		return fmt.Errorf("opening %q: %w", c.repoPath(rel), err)
	} else if !rootfs.SameInode(&got, st) {
		return fmt.Errorf("%q changed while being read: %w", c.repoPath(rel), errdefs.ErrFailedPrecondition)
	}
	opaque, err := c.dirXattrs(dir, rel)
	if err != nil {
		return err
	}
	if hidden != nil {
		// Base is already invisible here; hidden tracks it.
		return c.walk(dir, rel, depth, hidden)
	}
	bst, err := c.lstatBase(rel)
	if err != nil {
		return err
	}
	switch {
	case bst == nil:
		return c.walk(dir, rel, depth, map[string]struct{}{})
	case bst.Mode&unix.S_IFMT != unix.S_IFDIR:
		// A directory replaced a base file.
		if err := c.deleteBaseFile(rel); err != nil {
			return err
		}
		return c.walk(dir, rel, depth, map[string]struct{}{})
	case opaque:
		own, err := c.baseFilesUnder(rel)
		if err != nil {
			return err
		}
		if err := c.walk(dir, rel, depth, own); err != nil {
			return err
		}
		return c.deleteRemaining(own)
	default:
		return c.walk(dir, rel, depth, nil)
	}
}

// dirXattrs reads the overlay xattrs of an upper directory: it reports
// whether the directory is opaque and records a violation for a redirect
// (redirect_dir must be off) or an opaque value other than "y".
func (c *collector) dirXattrs(dir *rootfs.Dir, rel string) (bool, error) {
	fd := int(dir.Fd())
	if name, err := foreignXattr(fd); err != nil {
		return false, fmt.Errorf("listing xattrs of %q: %w", c.repoPath(rel), err)
	} else if name != "" {
		c.violate(c.repoPath(rel), fmt.Sprintf("extended attribute %q", name))
	}
	if _, ok, err := getxattr(fd, xattrRedirect); err != nil {
		return false, fmt.Errorf("reading xattrs of %q: %w", c.repoPath(rel), err)
	} else if ok {
		c.violate(c.repoPath(rel), "overlay redirect xattr (redirect_dir must be off)")
	}
	v, ok, err := getxattr(fd, xattrOpaque)
	if err != nil {
		return false, fmt.Errorf("reading xattrs of %q: %w", c.repoPath(rel), err)
	}
	if !ok {
		return false, nil
	}
	if string(v) != "y" {
		c.violate(c.repoPath(rel), fmt.Sprintf("unexpected overlay opaque value %q", v))
		return false, nil
	}
	return true, nil
}

// whiteout handles a 0:0 character device at rel.
func (c *collector) whiteout(rel string, hidden map[string]struct{}) error {
	if hidden != nil {
		// Below an opaque directory base is invisible already.
		return nil
	}
	st, err := c.lstatBase(rel)
	if err != nil || st == nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return c.deleteBaseTree(rel)
	}
	return c.deleteBaseFile(rel)
}

// compare records the change from before (nil when absent) to after at repo.
func (c *collector) compare(repo string, before *fileData, after fileData) {
	if before != nil && bytes.Equal(before.data, after.data) && before.mode&0o7111 == after.mode&0o7111 {
		// A metadata-only copy-up (touch, chown, or a chmod of bits
		// neither git nor the rules below care about).
		return
	}
	if after.mode&0o7000 != 0 {
		c.violate(repo, fmt.Sprintf("setuid, setgid or sticky bit (mode %#o)", after.mode&0o7777))
		return
	}
	if after.mode&0o111 != 0 {
		c.violate(repo, fmt.Sprintf("executable bit (mode %#o)", after.mode&0o7777))
		return
	}
	if IsBinary(after.data) {
		c.violate(repo, "binary content (a NUL byte or invalid UTF-8) is not allowed")
		return
	}
	ch := Change{
		Path:        repo,
		Kind:        Create,
		AfterSHA256: SHA256(after.data),
		Size:        int64(len(after.data)),
		Mode:        os.FileMode(after.mode & 0o777),
		After:       after.data,
	}
	if before != nil {
		if IsBinary(before.data) {
			c.violate(repo, "base content is binary and cannot be changed by a text patch")
			return
		}
		ch.Kind = Modify
		ch.BeforeSHA256 = SHA256(before.data)
		ch.Before = before.data
	}
	c.cs.Changes = append(c.cs.Changes, ch)
}

// readFile opens name (in dir) without following links, checks it is a
// single-link regular file within the limits (and, when want is not nil, the
// inode want describes), and reads it. upper says whether it is the
// sandbox's file (checked for the metacopy xattr). ok is false when a
// violation was recorded instead.
func (c *collector) readFile(dir *rootfs.Dir, name, repo string, want *unix.Stat_t, upper bool) (fileData, bool, error) {
	violate := func(reason string) (fileData, bool, error) {
		if !upper {
			reason += " in the base, which a text patch cannot change"
		}
		c.violate(repo, reason)
		return fileData{}, false, nil
	}
	f, st, err := dir.OpenRegular(name, want)
	switch {
	case errors.Is(err, rootfs.ErrNotRegular):
		// Never opened: opening a fifo or device has effects.
		return violate(typeName(&st))
	case errors.Is(err, unix.ELOOP):
		return violate("symbolic link")
	case errors.Is(err, rootfs.ErrChanged):
		return fileData{}, false, fmt.Errorf("%q changed while being read: %w", repo, errdefs.ErrFailedPrecondition)
	case want == nil && errors.Is(err, unix.ENOENT):
		return fileData{}, false, fmt.Errorf("stat %q: %w: %w", repo, errdefs.ErrNotFound, err)
	case err != nil:
		return fileData{}, false, fmt.Errorf("opening %q: %w", repo, err)
	}
	defer f.Close()
	fd := int(f.Fd())
	ok := true
	if uint64(st.Nlink) > 1 {
		violate(fmt.Sprintf("hard link (%d links)", uint64(st.Nlink)))
		ok = false
	}
	if upper {
		if name, err := foreignXattr(fd); err != nil {
			return fileData{}, false, fmt.Errorf("listing xattrs of %q: %w", repo, err)
		} else if name != "" {
			c.violate(repo, fmt.Sprintf("extended attribute %q", name))
			ok = false
		}
		if _, has, err := getxattr(fd, xattrMetacopy); err != nil {
			return fileData{}, false, fmt.Errorf("reading xattrs of %q: %w", repo, err)
		} else if has {
			c.violate(repo, "overlay metacopy xattr (metacopy must be off)")
			ok = false
		}
	}
	if !ok {
		return fileData{}, false, nil
	}
	if st.Size > c.lim.MaxFileBytes {
		return violate(fmt.Sprintf("size %d bytes exceeds the limit of %d bytes", st.Size, c.lim.MaxFileBytes))
	}
	if !c.reserve(repo, st.Size) {
		return fileData{}, false, nil
	}
	data, err := rootfs.ReadAtMost(f, st.Size, c.lim.MaxFileBytes)
	if err != nil {
		return fileData{}, false, fmt.Errorf("reading %q: %w", repo, err)
	}
	c.total += int64(len(data)) - st.Size
	if int64(len(data)) > c.lim.MaxFileBytes {
		// It grew after fstat.
		return violate(fmt.Sprintf("larger than %d bytes", c.lim.MaxFileBytes))
	}
	return fileData{data: data, mode: uint32(st.Mode)}, true, nil
}

// reserve counts size bytes against MaxTotalBytes; past the limit it records
// one violation and refuses this and every later read.
func (c *collector) reserve(repo string, size int64) bool {
	if c.full {
		return false
	}
	if c.total+size > c.lim.MaxTotalBytes {
		c.full = true
		c.violate(repo, fmt.Sprintf("change set exceeds the total limit of %d bytes", c.lim.MaxTotalBytes))
		return false
	}
	c.total += size
	return true
}

// readBase reads the base (or repository) file rel, nil when absent;
// nothing on its way or in its place is followed. st is its lstat when
// the caller has it, else nil. ok is false when a violation was recorded
// instead: the caller records nothing for the path.
func (c *collector) readBase(rel, repo string, st *unix.Stat_t) (*fileData, bool, error) {
	if st == nil {
		var err error
		if st, err = c.lstatBase(rel); err != nil || st == nil {
			return nil, err == nil, err
		}
	}
	dir, err := c.base.OpenDir(path.Dir(rel), rootfs.NoSymlinks)
	if err != nil {
		return nil, false, fmt.Errorf("opening base %q: %w", repo, err)
	}
	defer dir.Close()
	fd, ok, err := c.readFile(dir, path.Base(rel), repo, st, false)
	if err != nil || !ok {
		return nil, false, err
	}
	return &fd, true, nil
}

// lstatBase returns the status of the base entry rel, nil when there is
// none reachable without following a link.
func (c *collector) lstatBase(rel string) (*unix.Stat_t, error) {
	if c.base == nil {
		return nil, nil
	}
	st, err := c.base.Lstat(rel, rootfs.NoSymlinks)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("stat base %q: %w", c.repoPath(rel), err)
	}
	return &st, nil
}

// deleteBaseFile records the deletion of the base file rel.
func (c *collector) deleteBaseFile(rel string) error {
	repo := c.repoPath(rel)
	// Base names come from the repository: they must pass the same rules
	// to appear in a patch.
	if reason := CheckPath(repo); reason != "" {
		c.violate(repo, reason)
		return nil
	}
	before, ok, err := c.readBase(rel, repo, nil)
	if err != nil || !ok || before == nil {
		return err
	}
	if IsBinary(before.data) {
		c.violate(repo, "base content is binary and cannot be deleted by a text patch")
		return nil
	}
	c.cs.Changes = append(c.cs.Changes, Change{
		Path:         repo,
		Kind:         Delete,
		BeforeSHA256: SHA256(before.data),
		Before:       before.data,
	})
	return nil
}

// deleteBaseTree records the deletion of every base file under the base
// directory rel.
func (c *collector) deleteBaseTree(rel string) error {
	files, err := c.baseFilesUnder(rel)
	if err != nil {
		return err
	}
	return c.deleteRemaining(files)
}

// deleteRemaining records the deletion of each base file in files, in order.
func (c *collector) deleteRemaining(files map[string]struct{}) error {
	if c.stopped {
		return nil // the set is rejected already; read nothing more
	}
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		if err := c.deleteBaseFile(rel); err != nil {
			return err
		}
	}
	return nil
}

// baseFilesUnder lists the entries other than directories below the base
// directory rel (rootfs.Walk: never through a link), each entry counted
// against MaxFiles.
func (c *collector) baseFilesUnder(rel string) (map[string]struct{}, error) {
	files := map[string]struct{}{}
	if c.base == nil {
		return files, nil
	}
	dir, err := c.base.OpenDir(rel, rootfs.NoSymlinks)
	if err != nil {
		if errors.Is(err, unix.ENOENT) && rel == "" {
			return files, nil
		}
		return nil, fmt.Errorf("reading base %q: %w", c.repoPath(rel), err)
	}
	defer dir.Close()
	err = rootfs.Walk(dir, rootfs.Visitor{Entry: func(d *rootfs.Dir, e fs.DirEntry) error {
		if !c.count() {
			return rootfs.SkipAll
		}
		if !e.IsDir() {
			// Other types than regular files become violations when
			// deleteBaseFile reads them.
			files[d.Join(e.Name())] = struct{}{}
		}
		return nil
	}})
	if err != nil {
		return nil, fmt.Errorf("reading base %q: %w", c.repoPath(rel), err)
	}
	return files, nil
}

// typeName names the file type of st for a violation.
func typeName(st *unix.Stat_t) string {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return fmt.Sprintf("character device %d:%d", unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))
	case unix.S_IFBLK:
		return fmt.Sprintf("block device %d:%d", unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))
	}
	return fmt.Sprintf("unknown file type %#o", st.Mode&unix.S_IFMT)
}

// openRoot opens the upper dir, or the directory holding a page's copy:
// its last component is not followed (O_NOFOLLOW); a missing one is
// errdefs.ErrNotFound.
func openRoot(p string) (*rootfs.Dir, error) {
	parent, err := rootfs.OpenRoot(filepath.Dir(p))
	if err == nil {
		defer parent.Close()
		var d *rootfs.Dir
		if d, err = parent.Sub(filepath.Base(p)); err == nil {
			return d, nil
		}
	}
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("opening directory %q: %w: %w", p, errdefs.ErrNotFound, err)
	}
	return nil, fmt.Errorf("opening directory %q: %w", p, err)
}

// getxattr reads one xattr of fd; ok is false when it is absent or the
// filesystem has no xattrs.
func getxattr(fd int, name string) ([]byte, bool, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Fgetxattr(fd, name, buf)
		switch {
		case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP):
			return nil, false, nil
		case errors.Is(err, unix.ERANGE) && len(buf) < 64<<10:
			buf = make([]byte, 64<<10)
			continue
		case err != nil:
			return nil, false, err
		}
		return buf[:n], true, nil
	}
}

// foreignXattr returns the first extended attribute of fd that overlayfs
// did not set itself (anything outside trusted.overlay.*), or "". A change
// set carries bytes and a mode only, so an xattr in the write area is a
// violation rather than something silently dropped.
func foreignXattr(fd int) (string, error) {
	buf := make([]byte, 4096)
	for {
		n, err := unix.Flistxattr(fd, buf)
		if errors.Is(err, unix.ERANGE) && len(buf) < 1<<20 {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if errors.Is(err, unix.ENOTSUP) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		for _, name := range strings.Split(string(buf[:n]), "\x00") {
			if name != "" && !strings.HasPrefix(name, "trusted.overlay.") {
				return name, nil
			}
		}
		return "", nil
	}
}
