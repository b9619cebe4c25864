package mounts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// ChangeKind says what a Change does to its path: "create", "modify" or
// "delete".
type ChangeKind string

// The kinds of Change. A type change (a directory replaced by a file or the
// reverse) is never a kind of its own: it is a delete of every old file plus a
// create of every new one.
const (
	ChangeCreate ChangeKind = "create"
	ChangeModify ChangeKind = "modify"
	ChangeDelete ChangeKind = "delete"
)

// Change is one regular file that the sandbox created, modified or deleted.
//
// Path is repo-relative, slash-separated and clean ("openwiki/pages/a.md").
// BeforeSHA256 and AfterSHA256 are lower-case hex sha256 digests of the
// content before and after, "" where that side is absent (create, delete).
// Size is the after size in bytes and Mode the after permission bits
// (0o777 mask); both are 0 for a delete. Before and After hold the content
// itself; they are not serialised, so a ChangeSet read back from JSON cannot
// be turned into a Patch (the digests no longer match).
type Change struct {
	Path         string      `json:"path"`
	Kind         ChangeKind  `json:"kind"`
	BeforeSHA256 string      `json:"before_sha256"`
	AfterSHA256  string      `json:"after_sha256"`
	Size         int64       `json:"size"`
	Mode         os.FileMode `json:"mode"`
	Before       []byte      `json:"-"`
	After        []byte      `json:"-"`
}

// Violation is one reason the whole ChangeSet is rejected.
//
// Path is the repo-relative path of the offending entry. When that path is not
// safe to print (control characters, bidi marks, invalid UTF-8) it is given
// Go-quoted (strconv.QuoteToASCII) and so starts with a double quote, which a
// valid path never does.
type Violation struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// ChangeSet is what a sandbox left in its write area: the Changes sorted by
// Path, and the Violations sorted by Path. Any violation rejects the whole
// set; see Err.
type ChangeSet struct {
	Changes    []Change    `json:"changes"`
	Violations []Violation `json:"violations"`
}

// Err returns nil when the set has no violations, else a *RejectedError
// listing every violation; it unwraps to errdefs.ErrPermissionDenied.
func (cs *ChangeSet) Err() error {
	if cs == nil || len(cs.Violations) == 0 {
		return nil
	}
	return &RejectedError{Violations: slices.Clone(cs.Violations)}
}

// RejectedError is the error of a ChangeSet with violations. Nothing of such
// a set may be applied.
type RejectedError struct {
	Violations []Violation
}

func (e *RejectedError) Error() string {
	var b strings.Builder
	b.WriteString("change set rejected: ")
	for i, v := range e.Violations {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(v.Path)
		b.WriteString(": ")
		b.WriteString(v.Reason)
	}
	return b.String()
}

// Unwrap returns errdefs.ErrPermissionDenied.
func (e *RejectedError) Unwrap() error { return errdefs.ErrPermissionDenied }

// Limits caps what Collect and CollectPage read. A zero or negative field
// takes its value from DefaultLimits: a limit cannot be switched off.
type Limits struct {
	// MaxFileBytes caps one file, in bytes (after content, and before content
	// of a changed or deleted file). Larger files are rejected from their
	// size without being read.
	MaxFileBytes int64
	// MaxTotalBytes caps the bytes held in memory: the content of every
	// regular file in the upper dir plus the before content of every changed
	// or deleted file.
	MaxTotalBytes int64
	// MaxFiles caps the entries examined: every entry of the upper dir plus
	// every base file that a whiteout or an opaque directory covers.
	MaxFiles int
	// MaxDepth caps the number of path components below the write area.
	MaxDepth int
}

// DefaultLimits returns 8 MiB per file, 64 MiB in total, 10,000 entries and
// a depth of 32.
func DefaultLimits() Limits {
	return Limits{
		MaxFileBytes:  8 << 20,
		MaxTotalBytes: 64 << 20,
		MaxFiles:      10000,
		MaxDepth:      32,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	return l
}

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
// The walk never follows a link: entries are examined with fstatat
// (AT_SYMLINK_NOFOLLOW) relative to an open directory, directories opened with
// O_DIRECTORY|O_NOFOLLOW, regular files with O_RDONLY|O_NOFOLLOW|O_NONBLOCK,
// and each opened fd is fstat'ed to confirm it is the entry examined. Base
// files are read by path, never following their last component, and only
// where upper covers them. Nothing but regular files is ever opened, and a
// file is read only up to lim.MaxFileBytes+1 bytes, not at all when its size
// already exceeds the limit.
//
// Every offender becomes a Violation, and any violation rejects the set (see
// ChangeSet.Err): symbolic links, hard links (regular files with more than one
// link), fifos, sockets, devices other than whiteouts, setuid, setgid, sticky
// or executable bits, binary content (a NUL byte or invalid UTF-8, before or
// after), names with control or Unicode format characters (including bidi
// marks), invalid UTF-8, '"' or '\', any component that is .git or .claims
// (case-insensitive, ignoring trailing dots and spaces), an ignore file
// (.openwikiignore, .gitignore) or git control file (.gitattributes,
// .gitmodules), even with unchanged content, overlay redirect or metacopy
// xattrs, a path that would leave prefix, a change to a base entry that is
// not a regular file, and the limits of lim. Past MaxFiles the walk stops;
// beyond MaxDepth it does not descend.
//
// The returned error is for failures to collect at all: errdefs.ErrNotFound
// when upper is absent, errdefs.ErrInvalidArgument for relative paths or an
// invalid prefix, errdefs.ErrFailedPrecondition when an entry changes while
// being read, else the failing system call. Violations are not errors.
func Collect(upper, base, prefix string, lim Limits) (*ChangeSet, error) {
	if prefix == "." {
		prefix = ""
	}
	if prefix != "" {
		if reason := checkRepoPath(prefix); reason != "" {
			return nil, fmt.Errorf("collecting %q: prefix %s: %s: %w", upper, printablePath(prefix), reason, errdefs.ErrInvalidArgument)
		}
	}
	if !filepath.IsAbs(upper) || !filepath.IsAbs(base) {
		return nil, fmt.Errorf("collecting %q: upper and base must be absolute paths: %w", upper, errdefs.ErrInvalidArgument)
	}
	root, err := openDir(unix.AT_FDCWD, upper)
	if err != nil {
		return nil, fmt.Errorf("collecting %q: %w", upper, err)
	}
	defer root.Close()

	c := &collector{base: base, prefix: prefix, lim: lim.withDefaults()}
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
// "openwiki/pages/a.md") instead of an overlay. origPath is the repository's
// file at relPath; when it is absent the page is a create, and an empty copy
// of an absent page is no change. Page mode cannot delete.
//
// The copy is opened with O_RDONLY|O_NOFOLLOW|O_NONBLOCK and must be a
// regular file with one link, no setuid/setgid/sticky bit, no executable bit
// (unless the original has the same bits and bytes), no binary content and
// within lim.MaxFileBytes; relPath obeys the name rules of Collect. origPath
// must not be a symbolic link in its last component. All of these are
// Violations.
//
// The error is errdefs.ErrNotFound when the copy is absent, else a read
// failure.
func CollectPage(copyPath, origPath, relPath string, lim Limits) (*ChangeSet, error) {
	c := &collector{lim: lim.withDefaults()}
	if reason := checkRepoPath(relPath); reason != "" {
		c.violate(relPath, reason)
		return c.result(), nil
	}
	after, ok, err := c.readFile(unix.AT_FDCWD, copyPath, relPath, nil, true)
	if err != nil {
		return nil, fmt.Errorf("collecting page %q: %w", relPath, err)
	}
	if !ok {
		return c.result(), nil
	}
	before, ok, err := c.readBase(origPath, relPath, nil)
	if err != nil {
		return nil, fmt.Errorf("collecting page %q: %w", relPath, err)
	}
	if !ok || (before == nil && len(after.data) == 0) {
		return c.result(), nil
	}
	c.compare(relPath, before, after)
	return c.result(), nil
}

// collector accumulates one ChangeSet.
type collector struct {
	base    string
	prefix  string
	lim     Limits
	cs      ChangeSet
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
func (c *collector) result() *ChangeSet {
	cs := c.cs
	if cs.Changes == nil {
		cs.Changes = []Change{}
	}
	if cs.Violations == nil {
		cs.Violations = []Violation{}
	}
	slices.SortFunc(cs.Changes, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	slices.SortStableFunc(cs.Violations, func(a, b Violation) int { return strings.Compare(a.Path, b.Path) })
	return &cs
}

func (c *collector) violate(repoPath, reason string) {
	c.cs.Violations = append(c.cs.Violations, Violation{Path: printablePath(repoPath), Reason: reason})
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
func (c *collector) walk(dir *os.File, rel string, depth int, hidden map[string]struct{}) error {
	names, err := c.readNames(dir)
	if err != nil {
		return err
	}
	dirfd := int(dir.Fd())
	for _, name := range names {
		if !c.count() {
			return nil
		}
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
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("stat %q: %w", repo, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if err := c.upperFile(dirfd, name, r, &st, hidden); err != nil {
				return err
			}
		case unix.S_IFDIR:
			if err := c.upperDir(dirfd, name, r, depth+1, &st, hidden); err != nil {
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

// readNames returns the sorted names in dir, reading no more than the entries
// still allowed by MaxFiles (plus one, to detect the excess).
func (c *collector) readNames(dir *os.File) ([]string, error) {
	allowed := c.lim.MaxFiles - c.entries + 1
	if allowed < 1 {
		allowed = 1
	}
	var names []string
	for len(names) < allowed {
		batch, err := dir.Readdirnames(allowed - len(names))
		names = append(names, batch...)
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading directory %q: %w", dir.Name(), err)
		}
	}
	slices.Sort(names)
	return names, nil
}

func (c *collector) inScope(repo string) bool {
	if path.Clean(repo) != repo || path.IsAbs(repo) || repo == ".." || strings.HasPrefix(repo, "../") {
		return false
	}
	return c.prefix == "" || strings.HasPrefix(repo, c.prefix+"/")
}

// upperFile handles a regular file name in the upper directory dirfd.
func (c *collector) upperFile(dirfd int, name, rel string, st *unix.Stat_t, hidden map[string]struct{}) error {
	repo := c.repoPath(rel)
	after, ok, err := c.readFile(dirfd, name, repo, st, true)
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
	before, ok, err := c.readBase(filepath.Join(c.base, filepath.FromSlash(rel)), repo, bst)
	if err != nil || !ok {
		return err
	}
	c.compare(repo, before, after)
	return nil
}

// upperDir handles a directory name in the upper directory dirfd.
func (c *collector) upperDir(dirfd int, name, rel string, depth int, st *unix.Stat_t, hidden map[string]struct{}) error {
	dir, err := openDir(dirfd, name)
	if err != nil {
		return fmt.Errorf("opening %q: %w", c.repoPath(rel), err)
	}
	defer dir.Close()
	if err := sameInode(dir, st); err != nil {
		return fmt.Errorf("opening %q: %w", c.repoPath(rel), err)
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
func (c *collector) dirXattrs(dir *os.File, rel string) (bool, error) {
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
	if isBinary(after.data) {
		c.violate(repo, "binary content (a NUL byte or invalid UTF-8) is not allowed")
		return
	}
	ch := Change{
		Path:        repo,
		Kind:        ChangeCreate,
		AfterSHA256: sha256Hex(after.data),
		Size:        int64(len(after.data)),
		Mode:        os.FileMode(after.mode & 0o777),
		After:       after.data,
	}
	if before != nil {
		if isBinary(before.data) {
			c.violate(repo, "base content is binary and cannot be changed by a text patch")
			return
		}
		ch.Kind = ChangeModify
		ch.BeforeSHA256 = sha256Hex(before.data)
		ch.Before = before.data
	}
	c.cs.Changes = append(c.cs.Changes, ch)
}

// readFile opens name (relative to dirfd) without following links, checks it
// is a single-link regular file within the limits (and, when want is not nil,
// the inode want describes), and reads it. upper says whether it is the
// sandbox's file (checked for the metacopy xattr). ok is false when a
// violation was recorded instead.
func (c *collector) readFile(dirfd int, name, repo string, want *unix.Stat_t, upper bool) (fileData, bool, error) {
	violate := func(reason string) (fileData, bool, error) {
		if !upper {
			reason += " in the base, which a text patch cannot change"
		}
		c.violate(repo, reason)
		return fileData{}, false, nil
	}
	if want == nil {
		want = new(unix.Stat_t)
		err := unix.Fstatat(dirfd, name, want, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			return fileData{}, false, fmt.Errorf("stat %q: %w: %w", repo, errdefs.ErrNotFound, err)
		} else if err != nil {
			return fileData{}, false, fmt.Errorf("stat %q: %w", repo, err)
		}
	}
	if want.Mode&unix.S_IFMT != unix.S_IFREG {
		// Never open anything else: opening a fifo or device has effects.
		return violate(typeName(want))
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	switch {
	case errors.Is(err, unix.ELOOP):
		return violate("symbolic link")
	case err != nil:
		return fileData{}, false, fmt.Errorf("opening %q: %w", repo, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileData{}, false, fmt.Errorf("stat %q: %w", repo, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || want.Dev != st.Dev || want.Ino != st.Ino {
		return fileData{}, false, fmt.Errorf("%q changed while being read: %w", repo, errdefs.ErrFailedPrecondition)
	}
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
	data, err := readAtMost(fd, st.Size, c.lim.MaxFileBytes)
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

// readBase reads a base (or repository) file at the absolute path p, nil
// when absent; its last component is never followed. st is p's lstat when
// the caller has it, else nil. ok is false when a violation was recorded
// instead: the caller records nothing for the path.
func (c *collector) readBase(p, repo string, st *unix.Stat_t) (*fileData, bool, error) {
	if st == nil {
		st = new(unix.Stat_t)
		if err := unix.Lstat(p, st); errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil, true, nil
		} else if err != nil {
			return nil, false, fmt.Errorf("stat base %q: %w", repo, err)
		}
	}
	fd, ok, err := c.readFile(unix.AT_FDCWD, p, repo, st, false)
	if err != nil || !ok {
		return nil, false, err
	}
	return &fd, true, nil
}

func (c *collector) lstatBase(rel string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Lstat(filepath.Join(c.base, filepath.FromSlash(rel)), &st)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
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
	if reason := checkRepoPath(repo); reason != "" {
		c.violate(repo, reason)
		return nil
	}
	before, ok, err := c.readBase(filepath.Join(c.base, filepath.FromSlash(rel)), repo, nil)
	if err != nil || !ok || before == nil {
		return err
	}
	if isBinary(before.data) {
		c.violate(repo, "base content is binary and cannot be deleted by a text patch")
		return nil
	}
	c.cs.Changes = append(c.cs.Changes, Change{
		Path:         repo,
		Kind:         ChangeDelete,
		BeforeSHA256: sha256Hex(before.data),
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
// directory rel, each entry counted against MaxFiles.
func (c *collector) baseFilesUnder(rel string) (map[string]struct{}, error) {
	files := map[string]struct{}{}
	var list func(rel string) error
	list = func(rel string) error {
		p := filepath.Join(c.base, filepath.FromSlash(rel))
		entries, err := os.ReadDir(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && rel == "" {
				return nil
			}
			return fmt.Errorf("reading base %q: %w", c.repoPath(rel), err)
		}
		for _, e := range entries {
			if !c.count() {
				return nil
			}
			r := path.Join(rel, e.Name())
			if e.IsDir() {
				if err := list(r); err != nil {
					return err
				}
				continue
			}
			// Other types than regular files become violations when
			// deleteBaseFile reads them.
			files[r] = struct{}{}
		}
		return nil
	}
	return files, list(rel)
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

// openDir opens name relative to dirfd as a directory, never following a
// link.
func openDir(dirfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("opening directory %q: %w: %w", name, errdefs.ErrNotFound, err)
		}
		return nil, fmt.Errorf("opening directory %q: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// sameInode checks that f is the inode st describes.
func sameInode(f *os.File, st *unix.Stat_t) error {
	var got unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &got); err != nil {
		return err
	}
	if got.Dev != st.Dev || got.Ino != st.Ino {
		return fmt.Errorf("%q changed while being read: %w", f.Name(), errdefs.ErrFailedPrecondition)
	}
	return nil
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

// readAtMost reads fd to its end but never more than max+1 bytes; size (the
// fstat size) only sizes the buffer.
func readAtMost(fd int, size, max int64) ([]byte, error) {
	capacity := min(size, max) + 1
	buf := make([]byte, 0, capacity)
	for int64(len(buf)) <= max {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(int64(cap(buf)), max+1-int64(len(buf)))))
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	return buf, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// isBinary reports content a text patch cannot carry: a NUL byte or invalid
// UTF-8.
func isBinary(b []byte) bool {
	return bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b)
}

// checkRepoPath validates a repo-relative path: clean, relative, not
// leaving the repository, and every component valid for checkName. It returns
// "" or the reason it is refused.
func checkRepoPath(p string) string {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." {
		return "not a clean relative path"
	}
	for _, name := range strings.Split(p, "/") {
		if reason := checkName(name); reason != "" {
			return reason
		}
	}
	return ""
}

// CheckName validates one path component of a change set and returns ""
// or the reason it is refused: no control, format (bidi, invisible) or line
// separator characters, no '"' or '\\', no .git, git~1 or .claims, no
// ignore files or git control files (case-insensitive, trailing dots and
// spaces ignored as NTFS does). review applies the same rule at apply.
func CheckName(name string) string { return checkName(name) }

func checkName(name string) string {
	switch name {
	case "", ".", "..":
		return "path leaves the write area"
	}
	if !utf8.ValidString(name) {
		return "name is not valid UTF-8"
	}
	for _, r := range name {
		switch {
		case r == '/':
			return "path leaves the write area"
		case r == '"' || r == '\\':
			return fmt.Sprintf("name contains %q", r)
		case unicode.Is(unicode.Cc, r):
			return fmt.Sprintf("name contains control character %U", r)
		case unicode.Is(unicode.Cf, r):
			return fmt.Sprintf("name contains format character %U (bidi or invisible)", r)
		case r == '\u2028' || r == '\u2029':
			return fmt.Sprintf("name contains line separator %U", r)
		}
	}
	// Trailing dots and spaces are dropped by NTFS (git's core.protectNTFS
	// treats ".git." as ".git").
	folded := strings.ToLower(strings.TrimRight(name, ". "))
	switch folded {
	case ".git", "git~1":
		return "hidden path (.git)"
	case ".claims":
		return "hidden path (.claims)"
	case ".openwikiignore", ".gitignore":
		return "ignore files cannot be changed from the sandbox"
	case ".gitattributes", ".gitmodules":
		return "git control files cannot be changed from the sandbox"
	}
	return ""
}

// printablePath returns p, or p Go-quoted when it is not safe to print.
func printablePath(p string) string {
	if !utf8.ValidString(p) || strings.HasPrefix(p, `"`) {
		return strconv.QuoteToASCII(p)
	}
	for _, r := range p {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return strconv.QuoteToASCII(p)
		}
	}
	return p
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
