package hidden

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/rootfs"
	"github.com/corral-sandbox/corral/mounts/ignore"
	"golang.org/x/sys/unix"
)

// Defaults of Options.
const (
	DefaultIgnoreFileName = ".openwikiignore"
	DefaultWriteDir       = "openwiki"
)

// gitDirRule is the rule of every hidden ".git", file or directory.
const gitDirRule = ".git is hidden at any depth"

// Options says what Compute hides besides the repository's own
// ignore files. It comes from the trusted launcher and profile only.
type Options struct {
	// IgnoreFileName is the per-directory ignore file, gitignore syntax,
	// each applying to its own directory. Default ".openwikiignore".
	IgnoreFileName string
	// WriteDir is the write scope's directory (canonical); its ".claims"
	// is always hidden. Default "openwiki".
	WriteDir string
	// Forced are agent-config patterns in gitignore syntax, matched as if
	// in a root ignore file (e.g. "AGENTS.md", ".claude/"). No repository
	// file can re-include what they hide.
	Forced []string
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
	opts    Options
	claims  string       // WriteDir + "/.claims"
	forced  *ignore.File // opts.Forced, as a root ignore file
	ignores map[string]*ignore.File
	hides   map[string]Hide
	paths   []string
}

// Compute walks the repository at root once and returns its hidden set:
// paths matched by the ignore files (git's semantics, nested files
// included), ".git" at any depth (file or directory, any case), the
// write directory's ".claims" (any case), and opts.Forced.
//
// The walk is rootfs.Walk: directories are read with getdents through
// descriptors opened O_NOFOLLOW relative to their parent, no symlink is
// ever followed, no hidden directory is entered, and nothing is stat'ed
// that the walk does not need. Symlinked or non-regular ignore files are
// skipped, as git does.
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
	w := &walker{h: h}
	if err := rootfs.Walk(d, rootfs.Visitor{Dir: w.enter, Entry: w.visit}); err != nil {
		return nil, fmt.Errorf("computing hidden paths of %q: %w", root, err)
	}
	h.paths = make([]string, 0, len(h.hides))
	for p := range h.hides {
		h.paths = append(h.paths, p)
	}
	sort.Strings(h.paths)
	return h, nil
}

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
	opts.Forced = append([]string(nil), opts.Forced...)
	forced := &ignore.File{Dir: ".", Source: "profile"}
	for i, f := range opts.Forced {
		if strings.TrimSpace(f) == "" || strings.ContainsAny(f, "\n\x00") {
			return nil, fmt.Errorf("forced pattern %q: %w", f, errdefs.ErrInvalidArgument)
		}
		forced.Patterns = append(forced.Patterns, ignore.ParsePattern(ignore.TrimTrailingSpaces(strings.TrimSuffix(f, "\r")), i+1))
	}
	return &Set{
		opts:    opts,
		claims:  opts.WriteDir + "/.claims",
		forced:  forced,
		ignores: map[string]*ignore.File{},
		hides:   map[string]Hide{},
	}, nil
}

// Paths returns the hidden paths, sorted.
func (h *Set) Paths() []string {
	return append([]string(nil), h.paths...)
}

// Hides returns the hidden paths with their rules, sorted by path.
func (h *Set) Hides() []Hide {
	out := make([]Hide, len(h.paths))
	for i, p := range h.paths {
		out[i] = h.hides[p]
	}
	return out
}

// Lookup returns the entry for p if p itself (not an ancestor) is in the
// set.
func (h *Set) Lookup(p string) (Hide, bool) {
	e, ok := h.hides[p]
	return e, ok
}

// Len is the number of hidden paths.
func (h *Set) Len() int { return len(h.paths) }

// Options returns the options the set was computed with, defaults filled
// in.
func (h *Set) Options() Options {
	o := h.opts
	o.Forced = append([]string(nil), o.Forced...)
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

// judge decides p (canonical, not ".") of the given type alone, its
// ancestors assumed visible: forced hides first, then the ignore files
// in stack (those of p's ancestor directories).
//
// Ignore files follow git, for which a symlink is never a directory
// ("d/" does not match a link d). Forced directory patterns do match a
// symlink: a link ".claude -> conf" must not let an agent read
// ".claude/settings.json" through it.
func (h *Set) judge(p string, typ entryType, stack ignore.Stack) (rule string, hidden bool) {
	if strings.EqualFold(p[strings.LastIndexByte(p, '/')+1:], ".git") {
		return gitDirRule, true
	}
	if len(p) == len(h.claims) && strings.EqualFold(p, h.claims) {
		return h.claims + " is owned by corral", true
	}
	if res, pat := h.forced.Match(p, typ != typeFile); res == ignore.Excluded {
		return "profile hides agent config " + pat.Text, true
	}
	return stack.Match(p, typ == typeDir)
}

// stackFor returns the ignore files that apply to the entries of dir,
// read at Compute time.
func (h *Set) stackFor(dir string) ignore.Stack {
	var s ignore.Stack
	if f := h.ignores["."]; f != nil {
		s = append(s, f)
	}
	if dir == "." {
		return s
	}
	for i := 0; i <= len(dir); i++ {
		if i == len(dir) || dir[i] == '/' {
			if f := h.ignores[dir[:i]]; f != nil {
				s = append(s, f)
			}
		}
	}
	return s
}

// walker is one Compute: the set it fills and the ignore files that apply
// to the directory being visited.
type walker struct {
	h     *Set
	dir   string       // the directory whose entries are visited
	stack ignore.Stack // the ignore files that apply to them
}

// enter reads the ignore file of the directory d, which the walk just
// entered, if it has one: it applies to d's entries whether or not d
// itself is ignored (as in git). A symlink or anything but a regular file
// in its place is skipped, never opened.
func (w *walker) enter(d *rootfs.Dir, entries []fs.DirEntry) error {
	name := w.h.opts.IgnoreFileName
	i, found := slices.BinarySearchFunc(entries, name, func(e fs.DirEntry, n string) int { return strings.Compare(e.Name(), n) })
	if found && entries[i].Type().IsRegular() {
		f, _, err := d.OpenRegular(name, nil)
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP), errors.Is(err, rootfs.ErrNotRegular):
		case err != nil:
			return fmt.Errorf("reading %s: %w", d.Join(name), osError(err))
		default:
			defer f.Close()
			data, err := rootfs.ReadAtMost(f, 0, ignore.MaxFileSize)
			if err != nil {
				return fmt.Errorf("reading %s: %w", d.Join(name), err)
			}
			if len(data) > ignore.MaxFileSize {
				return fmt.Errorf("reading %s: larger than %d bytes: %w", d.Join(name), ignore.MaxFileSize, errdefs.ErrInvalidArgument)
			}
			w.h.ignores[d.Rel()] = ignore.Parse(d.Rel(), d.Join(name), data)
		}
	}
	w.dir, w.stack = d.Rel(), w.h.stackFor(d.Rel())
	return nil
}

// visit records the entry e of the visible directory d when the rules
// hide it, and keeps the walk out of it.
func (w *walker) visit(d *rootfs.Dir, e fs.DirEntry) error {
	if d.Rel() != w.dir {
		// Back from a subdirectory.
		w.dir, w.stack = d.Rel(), w.h.stackFor(d.Rel())
	}
	p := d.Join(e.Name())
	typ := typeOf(e.Type())
	if rule, hidden := w.h.judge(p, typ, w.stack); hidden {
		w.h.hides[p] = Hide{Path: p, Rule: rule, Dir: typ == typeDir}
		return rootfs.SkipDir
	}
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
