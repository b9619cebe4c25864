package hidden

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/corral-sandbox/corral/internal/rootfs"
	"github.com/corral-sandbox/corral/mounts/ignore"
	"golang.org/x/sys/unix"
)

// Defaults of Options.
const (
	DefaultIgnoreFileName = ".openwikiignore"
	DefaultWriteDir       = "openwiki"
	// GitignoreFileName is git's per-directory ignore file, read when the
	// names.Gitignore list is applied.
	GitignoreFileName = ".gitignore"
)

// Rules the walk gives besides the ignore files' and the name table's.
const (
	// SymlinkRule hides a symbolic link whose target leaves the
	// repository (absolute, or ".." above the root): in the container it
	// would lead a tool that follows links found in directories (diff -r,
	// ls -RL, find -L) out of /workspace.
	SymlinkRule = "symlink leaves the repository"
	// hardLinkRule is followed by the hidden path that shares the inode.
	hardLinkRule = "hard link of hidden "
)

// Options says what Compute hides besides the repository's own
// ignore files. It comes from the trusted launcher and profile only.
type Options struct {
	// IgnoreFileName is the per-directory ignore file, gitignore syntax,
	// each applying to its own directory. Default ".openwikiignore".
	IgnoreFileName string
	// WriteDir is the write scope's directory (canonical); its ".claims"
	// (compared folded) is always hidden. Default "openwiki".
	WriteDir string
	// Lists are the built-in hide lists applied (a profile's
	// HideLists): names.AgentConfig and names.Secrets hide the name
	// table's entries of that list, compared folded (names.Fold) at any
	// depth, and no repository file can re-include them; names.Gitignore
	// reads the repository's .gitignore files as a second rule set beside
	// IgnoreFileName's. ".git" is hidden whatever the lists.
	Lists []names.List
}

// Hide is one path of a Set.
type Hide struct {
	// Path is canonical and repository-relative, e.g. "secrets".
	Path string
	// Rule names what hides it, e.g. ".openwikiignore:3 hides secrets/".
	Rule string
	// Dir is true for a directory (hidden with everything below it).
	Dir bool
}

// Set is the minimal set of paths hidden from the repository view
// (a hidden directory, never its contents), computed once from the base
// repository when the session starts, with the rules that produced it.
// Later writes to the repository, to an ignore file included, never
// change it. It is safe for concurrent reads.
type Set struct {
	opts       Options
	claims     string   // WriteDir + "/.claims"
	claimsFold []string // its components, folded
	// gitignore is set when .gitignore files are a rule set of their own
	// (Lists has names.Gitignore and IgnoreFileName is another name).
	gitignore  bool
	ignores    map[string]*ignore.File // IgnoreFileName files by directory
	gitignores map[string]*ignore.File // .gitignore files by directory
	// hides are sorted by ComparePaths (the walk's order), looked up by
	// binary search: a repository may hide hundreds of thousands of
	// files one by one, and a map of them costs more than the walk.
	hides []Hide
	// dirs are the visible directories Compute's walk entered, sorted by
	// ComparePaths; nil for a set read back with Unmarshal.
	dirs []VisibleDir
}

// VisibleDir is a visible directory of the repository as Compute's walk
// found it (fstat(2) of the descriptor it listed): what the whiteout
// layer mirrors.
type VisibleDir struct {
	// Path is canonical and repository-relative; "." is the root.
	Path string
	// Mode is st_mode: the type and permission bits, set-id and sticky
	// bits included.
	Mode uint32
	// UID and GID own the directory.
	UID, GID uint32
	// Atime and Mtime are its access and modification times.
	Atime, Mtime unix.Timespec
}

// Compute walks the repository at root once and returns its hidden set.
// A path is hidden, with the first rule that applies:
//
//   - as ".git" at any depth, file or directory (the name table,
//     compared folded);
//   - as the write directory's ".claims" (compared folded);
//   - by the IgnoreFileName files, git's semantics, nested files
//     included;
//   - by the name table's entries of opts.Lists (names.HiddenEntry,
//     compared folded);
//   - with names.Gitignore, by the .gitignore files. Each rule set is
//     judged on its own, so a negation ("!x") in one never re-includes
//     what another hides;
//   - as a symbolic link whose target leaves the repository (SymlinkRule):
//     the kernel resolves it below the root (openat2 RESOLVE_BENEATH)
//     and refuses the escape;
//   - as a visible regular file sharing its inode with a hidden file
//     ("hard link of hidden <path>"): a second name for hidden bytes.
//     Regular files are stat'ed for their link count; hidden trees are
//     walked for inodes only when a visible file has more than one link.
//
// The walk is rootfs.Walk: directories are read with getdents through
// descriptors opened O_NOFOLLOW relative to their parent, no symlink is
// ever followed on the way, no hidden directory is entered (it is one
// entry of the set, its contents never listed). Symlinked or non-regular
// ignore files are skipped, as git does. The visible directories it
// entered are kept with their status (Dirs), for the whiteout layer.
func Compute(root string, opts Options) (*Set, error) {
	h, err := newSet(opts)
	if err != nil {
		return nil, err
	}
	d, err := rootfs.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("computing hidden paths: opening repository %q: %w", root, osError(err))
	}
	defer d.Close()
	if err := h.walk(d, walkers()); err != nil {
		return nil, fmt.Errorf("computing hidden paths of %q: %w", root, err)
	}
	return h, nil
}

// walkers is how many subtrees Compute walks at once: the walk is
// system calls (getdents, openat, fstatat), one CPU each.
func walkers() int { return min(runtime.GOMAXPROCS(0), 4) }

// walk fills h from the repository open as root with n walkers: the top
// of the tree breadth first, alone, until it has enough subtrees to share
// (frontierPerWalker each), then those subtrees in parallel, each walker
// with maps of its own, merged at the end; then the hard links.
func (h *Set) walk(root *rootfs.Dir, n int) error {
	top := newWalker(h, root, nil)
	var frontier []string
	if n <= 1 {
		if err := rootfs.Walk(root, rootfs.Visitor{Dir: top.enter, Entry: top.visit}); err != nil {
			return err
		}
	} else {
		var err error
		frontier, err = top.breadthFirst(n * frontierPerWalker)
		if err != nil {
			return err
		}
	}
	all := []*walker{top}
	if len(frontier) > 0 {
		next := make(chan string)
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for range min(n, len(frontier)) {
			w := newWalker(h, root, top)
			all = append(all, w)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for rel := range next {
					if err := w.subtree(rel); err != nil {
						errs <- err
						for range next {
						}
						return
					}
				}
			}()
		}
		for _, rel := range frontier {
			next <- rel
		}
		close(next)
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
	}
	links := map[inode][]string{}
	total := 0
	for _, w := range all {
		total += w.hides.len()
	}
	h.hides = make([]Hide, 0, total)
	ndirs := 0
	for _, w := range all {
		ndirs += len(w.dirs)
	}
	h.dirs = make([]VisibleDir, 0, ndirs)
	for _, w := range all {
		h.dirs = append(h.dirs, w.dirs...)
		maps.Copy(h.ignores, w.ignores)
		maps.Copy(h.gitignores, w.gitignores)
		for _, c := range w.hides {
			h.hides = append(h.hides, c...)
		}
		for k, ps := range w.links {
			links[k] = append(links[k], ps...)
		}
	}
	h.sortHides()
	slices.SortFunc(h.dirs, func(a, b VisibleDir) int { return ComparePaths(a.Path, b.Path) })
	if len(links) > 0 {
		return h.hideHardLinks(root, links)
	}
	return nil
}

// frontierPerWalker is how many subtrees the breadth-first top of the
// walk hands each walker, so that one large subtree does not leave the
// others idle.
const frontierPerWalker = 8

func newSet(opts Options) (*Set, error) {
	if opts.IgnoreFileName == "" {
		opts.IgnoreFileName = DefaultIgnoreFileName
	}
	if opts.WriteDir == "" {
		opts.WriteDir = DefaultWriteDir
	}
	if n := opts.IgnoreFileName; strings.ContainsAny(n, "/\x00") || n == "." || n == ".." {
		return nil, fmt.Errorf("ignore file name %q: %w", n, errdefs.ErrInvalidArgument)
	}
	if !canonical(opts.WriteDir) || opts.WriteDir == "." {
		return nil, fmt.Errorf("write directory %q is not canonical: %w", opts.WriteDir, errdefs.ErrInvalidArgument)
	}
	opts.Lists = slices.Clone(opts.Lists)
	for _, l := range opts.Lists {
		if _, err := names.ParseList(string(l)); err != nil {
			return nil, fmt.Errorf("hide lists: %w: %w", errdefs.ErrInvalidArgument, err)
		}
	}
	claims := opts.WriteDir + "/.claims"
	return &Set{
		opts:       opts,
		claims:     claims,
		claimsFold: foldDir(claims),
		gitignore:  slices.Contains(opts.Lists, names.Gitignore) && opts.IgnoreFileName != GitignoreFileName,
		ignores:    map[string]*ignore.File{},
		gitignores: map[string]*ignore.File{},
	}, nil
}

// sortHides sorts h.hides by ComparePaths, the walk's order (most of
// them already are).
func (h *Set) sortHides() {
	slices.SortFunc(h.hides, func(a, b Hide) int { return ComparePaths(a.Path, b.Path) })
}

// ComparePaths orders canonical paths component by component, each
// compared bytewise (a directory comes right before what it holds: "a",
// "a/x", "a-b"), the order of a depth-first walk in name order. It
// returns -1, 0 or +1.
func ComparePaths(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		ca, cb := a[i], b[i]
		switch {
		case ca == cb:
			continue
		case ca == '/':
			return -1
		case cb == '/':
			return 1
		case ca < cb:
			return -1
		default:
			return 1
		}
	}
	return cmp.Compare(len(a), len(b))
}

// Paths returns the hidden paths, in ComparePaths order.
func (h *Set) Paths() []string {
	out := make([]string, len(h.hides))
	for i, e := range h.hides {
		out[i] = e.Path
	}
	return out
}

// Hides returns the hidden paths with their rules, in ComparePaths order.
func (h *Set) Hides() []Hide {
	return slices.Clone(h.hides)
}

// Lookup returns the entry for p if p itself (not an ancestor) is in the
// set.
func (h *Set) Lookup(p string) (Hide, bool) {
	i, ok := slices.BinarySearchFunc(h.hides, p, func(e Hide, p string) int { return ComparePaths(e.Path, p) })
	if !ok {
		return Hide{}, false
	}
	return h.hides[i], true
}

// Dirs returns the visible directories that Compute's walk entered, the
// root (".") first, in ComparePaths order (a directory before what it
// holds), with their status at that time; nil for a set read back with
// Unmarshal, which never reads the repository. A directory below a
// hidden one is never listed.
func (h *Set) Dirs() []VisibleDir {
	if h.dirs == nil {
		return nil
	}
	return slices.Clone(h.dirs)
}

// Len is the number of hidden paths.
func (h *Set) Len() int { return len(h.hides) }

// Options returns the options the set was computed with, defaults filled
// in.
func (h *Set) Options() Options {
	o := h.opts
	o.Lists = slices.Clone(o.Lists)
	return o
}

// entryType is what judge needs to know of a path's type.
type entryType uint8

const (
	typeFile entryType = iota // anything but a directory or a symlink
	typeDir
	typeSymlink
)

func typeOf(m fs.FileMode) entryType {
	switch {
	case m.IsDir():
		return typeDir
	case m&fs.ModeSymlink != 0:
		return typeSymlink
	}
	return typeFile
}

// stacks are the ignore files that apply to one directory's entries: the
// IgnoreFileName files and the .gitignore files, each shallowest first.
type stacks struct{ own, git ignore.Stack }

// judge decides p (canonical, not ".") of the given type alone, its
// ancestors assumed visible; fdir holds the folded components of p's
// directory and st the ignore files that apply there. The first rule
// that hides p names it: .git, the write directory's .claims, the
// IgnoreFileName files (the line the repository's author wrote for
// corral), the profile's lists, the .gitignore files. Each hides on its
// own: no rule re-includes what another hides.
//
// Ignore files follow git, for which a symlink is never a directory
// ("d/" does not match a link d). The table's directory entries do match
// a symlink: a link ".claude -> conf" must not let an agent read
// ".claude/settings.json" through it.
func (h *Set) judge(p string, fdir []string, typ entryType, st stacks) (rule string, hidden bool) {
	name := names.Fold(p[strings.LastIndexByte(p, '/')+1:])
	if rule, hidden := names.HiddenEntry(fdir, name, typ != typeFile); hidden {
		return rule, true
	}
	if len(fdir) == len(h.claimsFold)-1 && name == h.claimsFold[len(fdir)] && slices.Equal(fdir, h.claimsFold[:len(fdir)]) {
		return h.claims + " is owned by corral", true
	}
	if rule, hidden := st.own.Match(p, typ == typeDir); hidden {
		return rule, true
	}
	if len(h.opts.Lists) > 0 {
		if rule, hidden := names.HiddenEntry(fdir, name, typ != typeFile, h.opts.Lists...); hidden {
			return rule, true
		}
	}
	return st.git.Match(p, typ == typeDir)
}

// judgePath is judge for p alone, computing what a walk keeps per
// directory.
func (h *Set) judgePath(p string, typ entryType) (rule string, hidden bool) {
	dir := "."
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir = p[:i]
	}
	return h.judge(p, foldDir(dir), typ, h.stacksFor(dir))
}

// foldDir returns the folded components of the canonical directory dir
// (none for ".").
func foldDir(dir string) []string {
	if dir == "." || dir == "" {
		return nil
	}
	comps := strings.Split(dir, "/")
	for i, c := range comps {
		comps[i] = names.Fold(c)
	}
	return comps
}

// stacksFor returns the ignore files that apply to the entries of dir,
// read at Compute time.
func (h *Set) stacksFor(dir string) stacks {
	var s stacks
	s = s.push(h, ".")
	if dir == "." {
		return s
	}
	for i := 0; i <= len(dir); i++ {
		if i == len(dir) || dir[i] == '/' {
			s = s.push(h, dir[:i])
		}
	}
	return s
}

// push returns s with the ignore files of dir appended (never in place:
// s may be shared).
func (s stacks) push(h *Set, dir string) stacks {
	if f := h.ignores[dir]; f != nil {
		s.own = append(s.own[:len(s.own):len(s.own)], f)
	}
	if f := h.gitignores[dir]; f != nil {
		s.git = append(s.git[:len(s.git):len(s.git)], f)
	}
	return s
}

// inode identifies a file for the hard-link check.
type inode struct{ dev, ino uint64 }

// walker walks part of the repository for Compute: what it found, and
// what applies to the directory being visited. Each walker has maps of
// its own; a walker of a subtree finds the ignore files above the
// subtree in its parent's, which no longer change.
type walker struct {
	h      *Set
	root   *rootfs.Dir
	parent *walker
	dir    string   // the directory whose entries are visited
	fdir   []string // its components, folded
	st     stacks   // the ignore files that apply to them

	ignores, gitignores map[string]*ignore.File
	hides               chunks
	dirs                []VisibleDir
	// links are the visible regular files with more than one link.
	links map[inode][]string
}

func newWalker(h *Set, root *rootfs.Dir, parent *walker) *walker {
	return &walker{h: h, root: root, parent: parent, dir: "\x00",
		ignores: map[string]*ignore.File{}, gitignores: map[string]*ignore.File{},
		links: map[inode][]string{}}
}

// chunks hold a walker's hides in blocks that are never copied to grow.
type chunks [][]Hide

const chunkLen = 1024

func (c *chunks) add(h Hide) {
	if n := len(*c); n == 0 || len((*c)[n-1]) == chunkLen {
		*c = append(*c, make([]Hide, 0, chunkLen))
	}
	last := &(*c)[len(*c)-1]
	*last = append(*last, h)
}

func (c chunks) len() int {
	n := 0
	for _, b := range c {
		n += len(b)
	}
	return n
}

// breadthFirst visits the top of the tree level by level until the next
// level holds at least want directories, or is maxLevels deep, and
// returns it (visible directories, their entries not yet visited); nil
// when the whole tree was visited. Its directories are opened by path
// (rootfs.NoSymlinks), which the depth limit keeps below PATH_MAX.
func (w *walker) breadthFirst(want int) ([]string, error) {
	const maxLevels = 8 // × NAME_MAX (255) < PATH_MAX (4096)
	level := []string{"."}
	for depth := 0; len(level) > 0 && len(level) < want && depth < maxLevels; depth++ {
		var next []string
		for _, rel := range level {
			d := w.root
			if rel != "." {
				var err error
				if d, err = w.root.OpenDir(rel, rootfs.NoSymlinks); err != nil {
					if errors.Is(err, unix.ENOENT) {
						continue // removed since its parent was read
					}
					return nil, err
				}
			}
			sub, err := w.level(d)
			if d != w.root {
				d.Close()
			}
			if err != nil {
				return nil, err
			}
			next = append(next, sub...)
		}
		level = next
	}
	return level, nil
}

// level visits the entries of d and returns its visible subdirectories.
func (w *walker) level(d *rootfs.Dir) ([]string, error) {
	entries, err := d.ReadDir(0)
	if err != nil {
		return nil, err
	}
	if err := w.enter(d, entries); err != nil {
		return nil, err
	}
	var subs []string
	for _, e := range entries {
		if err := w.visit(d, e); errors.Is(err, rootfs.SkipDir) {
			continue
		} else if err != nil {
			return nil, err
		}
		if e.IsDir() {
			subs = append(subs, d.Join(e.Name()))
		}
	}
	return subs, nil
}

// subtree walks the visible directory rel, whose own entry was visited.
func (w *walker) subtree(rel string) error {
	d, err := w.root.OpenDir(rel, rootfs.NoSymlinks)
	if errors.Is(err, unix.ENOENT) {
		return nil // removed since its parent was read
	}
	if err != nil {
		return err
	}
	defer d.Close()
	return rootfs.Walk(d, rootfs.Visitor{Dir: w.enter, Entry: w.visit})
}

// enter records the directory d, which the walk just entered (it is
// visible), with its status, and reads its ignore files if it has them:
// they apply to d's entries whether or not d itself is ignored (as in
// git). A symlink or anything but a regular file in their place is
// skipped, never opened.
func (w *walker) enter(d *rootfs.Dir, entries []fs.DirEntry) error {
	st, err := d.Fstat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", d.Rel(), err)
	}
	w.dirs = append(w.dirs, VisibleDir{Path: d.Rel(), Mode: st.Mode, UID: st.Uid, GID: st.Gid, Atime: st.Atim, Mtime: st.Mtim})
	if err := w.readIgnore(d, entries, w.h.opts.IgnoreFileName, w.ignores); err != nil {
		return err
	}
	if w.h.gitignore {
		if err := w.readIgnore(d, entries, GitignoreFileName, w.gitignores); err != nil {
			return err
		}
	}
	w.setDir(d.Rel())
	return nil
}

func (w *walker) readIgnore(d *rootfs.Dir, entries []fs.DirEntry, name string, into map[string]*ignore.File) error {
	i, found := slices.BinarySearchFunc(entries, name, func(e fs.DirEntry, n string) int { return strings.Compare(e.Name(), n) })
	if !found || !entries[i].Type().IsRegular() {
		return nil
	}
	f, _, err := d.OpenRegular(name, nil)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP), errors.Is(err, rootfs.ErrNotRegular):
		return nil
	case err != nil:
		return fmt.Errorf("reading %s: %w", d.Join(name), osError(err))
	}
	defer f.Close()
	data, err := rootfs.ReadAtMost(f, 0, ignore.MaxFileSize)
	if err != nil {
		return fmt.Errorf("reading %s: %w", d.Join(name), err)
	}
	if len(data) > ignore.MaxFileSize {
		return fmt.Errorf("reading %s: larger than %d bytes: %w", d.Join(name), ignore.MaxFileSize, errdefs.ErrInvalidArgument)
	}
	into[d.Rel()] = ignore.Parse(d.Rel(), d.Join(name), data)
	return nil
}

// setDir makes dir the directory whose entries are visited.
func (w *walker) setDir(dir string) {
	w.dir, w.fdir = dir, foldDir(dir)
	w.st = stacks{}
	w.st = w.push(w.st, ".")
	if dir == "." {
		return
	}
	for i := 0; i <= len(dir); i++ {
		if i == len(dir) || dir[i] == '/' {
			w.st = w.push(w.st, dir[:i])
		}
	}
}

// push is stacks.push over the walker's ignore files and its parent's.
func (w *walker) push(s stacks, dir string) stacks {
	own, git := w.ignores[dir], w.gitignores[dir]
	if p := w.parent; p != nil {
		if own == nil {
			own = p.ignores[dir]
		}
		if git == nil {
			git = p.gitignores[dir]
		}
	}
	if own != nil {
		s.own = append(s.own[:len(s.own):len(s.own)], own)
	}
	if git != nil {
		s.git = append(s.git[:len(s.git):len(s.git)], git)
	}
	return s
}

// visit records the entry e of the visible directory d when the rules
// hide it, and keeps the walk out of it. A visible symlink is checked for
// an escape, a visible regular file for other links.
func (w *walker) visit(d *rootfs.Dir, e fs.DirEntry) error {
	if d.Rel() != w.dir {
		// Back from a subdirectory.
		w.setDir(d.Rel())
	}
	p := d.Join(e.Name())
	typ := typeOf(e.Type())
	if rule, hidden := w.h.judge(p, w.fdir, typ, w.st); hidden {
		w.hides.add(Hide{Path: p, Rule: rule, Dir: typ == typeDir})
		return rootfs.SkipDir
	}
	switch {
	case typ == typeSymlink:
		// The kernel resolves the link below the root exactly as the
		// container would below /workspace, and says EXDEV where that
		// leaves it (an absolute target, ".." above the root, at any
		// step of a chain).
		f, err := w.root.Open(p, rootfs.Beneath, unix.O_PATH)
		if err == nil {
			f.Close()
		}
		if errors.Is(err, unix.EXDEV) {
			w.hides.add(Hide{Path: p, Rule: SymlinkRule})
		}
	case e.Type().IsRegular():
		var st unix.Stat_t
		if err := unix.Fstatat(d.Fd(), e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil // removed since the directory was read
			}
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if st.Nlink > 1 && st.Mode&unix.S_IFMT == unix.S_IFREG {
			k := inode{uint64(st.Dev), st.Ino}
			w.links[k] = append(w.links[k], p)
		}
	}
	return nil
}

// hideHardLinks hides the visible files of links that share their inode
// with a hidden file: it looks at the hidden files and walks the hidden
// directories (never through a link), until every such inode is found or
// nothing hidden is left. The rule names the first hidden path found with
// that inode, in path order.
func (h *Set) hideHardLinks(root *rootfs.Dir, links map[inode][]string) error {
	found := map[inode]string{}
	note := func(st *unix.Stat_t, p string) {
		if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink < 2 {
			return
		}
		k := inode{uint64(st.Dev), st.Ino}
		if _, ok := links[k]; ok {
			if _, seen := found[k]; !seen {
				found[k] = p
			}
		}
	}
	for _, hd := range h.hides {
		if len(found) == len(links) {
			break
		}
		p := hd.Path
		if !hd.Dir {
			if st, err := root.Lstat(p, rootfs.NoSymlinks); err == nil {
				note(&st, p)
			}
			continue
		}
		sub, err := root.OpenDir(p, rootfs.NoSymlinks)
		if err != nil {
			continue // gone or replaced since: nothing to share an inode with
		}
		err = rootfs.Walk(sub, rootfs.Visitor{Entry: func(d *rootfs.Dir, e fs.DirEntry) error {
			if !e.Type().IsRegular() {
				return nil
			}
			var st unix.Stat_t
			if unix.Fstatat(d.Fd(), e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				note(&st, d.Join(e.Name()))
			}
			if len(found) == len(links) {
				return rootfs.SkipAll
			}
			return nil
		}})
		sub.Close()
		if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) {
			return fmt.Errorf("looking for hard links under %s: %w", p, err)
		}
	}
	for k, hiddenPath := range found {
		for _, p := range links[k] {
			h.hides = append(h.hides, Hide{Path: p, Rule: hardLinkRule + hiddenPath})
		}
	}
	h.sortHides()
	return nil
}

// join appends name to the canonical directory dir.
func join(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// canonical reports whether p is a canonical repository-relative path:
// "." or slash-separated components, none empty, "." or "..", no NUL.
func canonical(p string) bool {
	if p == "." {
		return true
	}
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}

// osError gives a raw errno the errdefs category callers test for.
func osError(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %w", errdefs.ErrNotFound, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: %w", errdefs.ErrPermissionDenied, err)
	}
	return err
}
