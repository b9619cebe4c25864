package mounts

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// Defaults of HideOptions.
const (
	DefaultIgnoreFileName = ".openwikiignore"
	DefaultWriteDir       = "openwiki"
)

// gitDirRule is the rule of every hidden ".git", file or directory.
const gitDirRule = ".git is hidden at any depth"

// HideOptions says what ComputeHidden hides besides the repository's own
// ignore files. It comes from the trusted launcher and profile only.
type HideOptions struct {
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

// Hide is one path of a HiddenSet.
type Hide struct {
	// Path is canonical and repository-relative, e.g. "secrets".
	Path string
	// Rule names what hides it, e.g. ".openwikiignore:3 hides secrets/".
	Rule string
	// Dir is true for a directory (hidden with everything below it).
	Dir bool
}

// HiddenSet is the minimal set of paths hidden from the repository view
// (a hidden directory, never its contents), computed once from the base
// repository when the session starts, with the rules that produced it.
// Later writes to the repository, to an ignore file included, never
// change it. It is safe for concurrent reads.
type HiddenSet struct {
	opts    HideOptions
	claims  string      // WriteDir + "/.claims"
	forced  *ignoreFile // opts.Forced, as a root ignore file
	ignores map[string]*ignoreFile
	hides   map[string]Hide
	paths   []string
}

// ComputeHidden walks the repository at root once and returns its hidden
// set: paths matched by the ignore files (git's semantics, nested files
// included), ".git" at any depth (file or directory, any case), the
// write directory's ".claims" (any case), and opts.Forced.
//
// The walk reads directories with getdents through descriptors opened
// O_NOFOLLOW relative to their parent, never follows a symlink, never
// descends into a hidden directory and stats nothing it does not need.
// Symlinked or non-regular ignore files are skipped, as git does.
func ComputeHidden(root string, opts HideOptions) (*HiddenSet, error) {
	h, err := newHiddenSet(opts)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("computing hidden paths: opening repository %q: %w", root, osError(err))
	}
	w := walker{h: h, root: root}
	if err := w.dir(fd, ".", nil); err != nil {
		return nil, fmt.Errorf("computing hidden paths of %q: %w", root, err)
	}
	h.paths = make([]string, 0, len(h.hides))
	for p := range h.hides {
		h.paths = append(h.paths, p)
	}
	sort.Strings(h.paths)
	return h, nil
}

func newHiddenSet(opts HideOptions) (*HiddenSet, error) {
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
	forced := &ignoreFile{dir: ".", source: "profile"}
	for i, f := range opts.Forced {
		if strings.TrimSpace(f) == "" || strings.ContainsAny(f, "\n\x00") {
			return nil, fmt.Errorf("forced pattern %q: %w", f, errdefs.ErrInvalidArgument)
		}
		forced.patterns = append(forced.patterns, parsePattern(trimTrailingSpaces(strings.TrimSuffix(f, "\r")), i+1))
	}
	return &HiddenSet{
		opts:    opts,
		claims:  opts.WriteDir + "/.claims",
		forced:  forced,
		ignores: map[string]*ignoreFile{},
		hides:   map[string]Hide{},
	}, nil
}

// Paths returns the hidden paths, sorted.
func (h *HiddenSet) Paths() []string {
	return append([]string(nil), h.paths...)
}

// Hides returns the hidden paths with their rules, sorted by path.
func (h *HiddenSet) Hides() []Hide {
	out := make([]Hide, len(h.paths))
	for i, p := range h.paths {
		out[i] = h.hides[p]
	}
	return out
}

// Lookup returns the entry for p if p itself (not an ancestor) is in the
// set.
func (h *HiddenSet) Lookup(p string) (Hide, bool) {
	e, ok := h.hides[p]
	return e, ok
}

// Len is the number of hidden paths.
func (h *HiddenSet) Len() int { return len(h.paths) }

// Options returns the options the set was computed with, defaults filled
// in.
func (h *HiddenSet) Options() HideOptions {
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
func (h *HiddenSet) judge(p string, typ entryType, stack ignoreStack) (rule string, hidden bool) {
	if strings.EqualFold(p[strings.LastIndexByte(p, '/')+1:], ".git") {
		return gitDirRule, true
	}
	if len(p) == len(h.claims) && strings.EqualFold(p, h.claims) {
		return h.claims + " is owned by corral", true
	}
	if res, pat := h.forced.match(p, typ != typeFile); res == excluded {
		return "profile hides agent config " + pat.text, true
	}
	return stack.match(p, typ == typeDir)
}

// stackFor returns the ignore files that apply to the entries of dir,
// read at ComputeHidden time.
func (h *HiddenSet) stackFor(dir string) ignoreStack {
	var s ignoreStack
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

type walker struct {
	h    *HiddenSet
	root string
}

// dir reads the directory open at fd (canonical path rel, not hidden),
// records its hidden entries and descends into the others. It closes fd.
func (w *walker) dir(fd int, rel string, stack ignoreStack) error {
	f := os.NewFile(uintptr(fd), path.Join(w.root, rel))
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("reading %s: %w", rel, err)
	}
	// The directory's own ignore file applies to its entries, whether or
	// not it is itself ignored (as in git).
	for _, e := range entries {
		if e.Name() == w.h.opts.IgnoreFileName && e.Type().IsRegular() {
			data, err := readIgnoreFile(fd, e.Name())
			if err != nil {
				return fmt.Errorf("reading %s: %w", join(rel, e.Name()), err)
			}
			if data != nil {
				ig := parseIgnore(rel, join(rel, e.Name()), data)
				w.h.ignores[rel] = ig
				stack = append(stack[:len(stack):len(stack)], ig)
			}
			break
		}
	}
	for _, e := range entries {
		p := join(rel, e.Name())
		typ := typeOf(e.Type())
		isDir := typ == typeDir
		if rule, hidden := w.h.judge(p, typ, stack); hidden {
			w.h.hides[p] = Hide{Path: p, Rule: rule, Dir: isDir}
			continue
		}
		if !isDir {
			continue
		}
		cfd, err := unix.Openat(fd, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening %s: %w", p, osError(err))
		}
		if err := w.dir(cfd, p, stack); err != nil {
			return err
		}
	}
	return nil
}

// readIgnoreFile reads name in the directory at dirfd without following a
// symlink or blocking on a fifo swapped in since the directory was read.
// It returns nil data for anything but a regular file.
func readIgnoreFile(dirfd int, name string) ([]byte, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, osError(err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil
	}
	if st.Size() > maxIgnoreFileSize {
		return nil, fmt.Errorf("larger than %d bytes: %w", maxIgnoreFileSize, errdefs.ErrInvalidArgument)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxIgnoreFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxIgnoreFileSize {
		return nil, fmt.Errorf("larger than %d bytes: %w", maxIgnoreFileSize, errdefs.ErrInvalidArgument)
	}
	return data, nil
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
