package hidden

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/corral-sandbox/corral/internal/rootfs"
)

// maxSymlinks is the kernel's limit on links followed in one lookup
// (Linux MAXSYMLINKS).
const maxSymlinks = 40

// View is the repository as the container sees it: the repository at
// root minus a Set. It implements allowlist.View. Like the set, it
// reads ignore files only once, when the set is computed. It is
// immutable once made: safe for concurrent use.
type View struct {
	root string
	h    *Set

	// overlays maps a repository-relative directory to the host path of
	// what the container sees there instead (the session's merged write
	// area), so that links the agent made there resolve as in the
	// container.
	overlays map[string]string
}

var _ allowlist.View = (*View)(nil)

// Overlay is a directory of the view that the container sees elsewhere:
// Dir (canonical, repository-relative) is read from HostDir instead of
// the repository. A session's write area is one: the agent can create
// symlinks there that the repository does not have.
type Overlay struct {
	Dir, HostDir string
}

// NewView returns the view of the repository at root (the one h was
// computed from) without the paths in h, reading each overlay's
// directory from its host directory. The overlays are fixed here, from
// the session's layout paths, before anything is mounted: until an
// overlay's host directory is a mount point, Resolve reads the
// repository's directory there instead.
func NewView(root string, h *Set, overlays ...Overlay) *View {
	v := &View{root: root, h: h}
	for _, o := range overlays {
		if v.overlays == nil {
			v.overlays = map[string]string{}
		}
		v.overlays[o.Dir] = o.HostDir
	}
	return v
}

func (v *View) overlayFor(rel string) (string, bool) {
	d, ok := v.overlays[rel]
	return d, ok
}

// Hidden reports whether p or one of its ancestors is hidden, and the
// rule that hides the outermost hidden one. For paths that did not exist
// when the set was computed it answers from the same rules: the name
// table's (folded) and the write directory's .claims anywhere in p, then
// the ignore files read at start, each ancestor judged first as git does
// ("parent excluded, child excluded"). Inner components are judged as
// directories; the last one by its current type in the repository
// (lstat, no symlink followed) or, when it does not exist, as hidden if
// it would be as either a file or a directory. A non-canonical p is
// reported hidden.
func (v *View) Hidden(p string) (rule string, hidden bool) {
	if !canonical(p) {
		return fmt.Sprintf("path %q is not canonical", p), true
	}
	if p == "." {
		return "", false
	}
	if e, ok := v.h.Lookup(p); ok {
		return e.Rule, true
	}
	st := v.h.stacksFor(".")
	var fdir []string
	start := 0
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		q := p[:i]
		if e, ok := v.h.Lookup(q); ok {
			return e.Rule, true
		}
		if rule, hidden := v.h.judge(q, fdir, typeDir, st); hidden {
			return rule, true
		}
		st = st.push(v.h, q)
		fdir = append(fdir, names.Fold(p[start:i]))
		start = i + 1
	}
	if typ, exists := v.lstatType(p); exists {
		return v.h.judge(p, fdir, typ, st)
	}
	if rule, hidden := v.h.judge(p, fdir, typeFile, st); hidden {
		return rule, true
	}
	return v.h.judge(p, fdir, typeDir, st)
}

// lstatType returns the type of p in the repository if it exists; no
// symlink is followed on the way (rootfs.NoSymlinks), nor in p's last
// component.
func (v *View) lstatType(p string) (typ entryType, exists bool) {
	d, err := rootfs.OpenRoot(v.root)
	if err != nil {
		return typeFile, false
	}
	defer d.Close()
	st, err := d.Lstat(p, rootfs.NoSymlinks)
	if err != nil {
		return typeFile, false
	}
	return statType(st.Mode), true
}

func statType(mode uint32) entryType {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return typeDir
	case unix.S_IFLNK:
		return typeSymlink
	}
	return typeFile
}

// Resolve follows symlinks in p inside the repository, component by
// component as the kernel would (relative targets from the link's
// directory, at most 40 links), and returns the canonical path reached.
// Components that do not exist, or that the view hides (they are absent
// in the container), end the resolution: they and the rest of the path
// are kept lexically. It returns a *allowlist.Refusal (KindPath) for an
// absolute link target, for ".." above the root, for a loop and for a
// non-canonical p. Unlike securejoin.SecureJoin, which clamps such paths
// to the root, Resolve refuses them.
func (v *View) Resolve(p string) (string, error) {
	if !canonical(p) {
		return "", refuse(p, "path %q is not canonical", p)
	}
	if p == "." {
		return ".", nil
	}
	root, err := rootfs.OpenRoot(v.root)
	if err != nil {
		return "", fmt.Errorf("resolving %s: opening repository: %w", p, osError(err))
	}
	// dirs[i] is the directory resolved[:i]; dirs[0] is the root. Once
	// lexical, dirs is no longer extended or consulted.
	dirs := []*rootfs.Dir{root}
	defer func() {
		for _, d := range dirs {
			d.Close()
		}
	}()
	var resolved []string
	remaining := strings.Split(p, "/")
	lexical := false
	links := 0
	lastLink := ""
	for len(remaining) > 0 {
		c := remaining[0]
		remaining = remaining[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(resolved) == 0 {
				return "", refuse(p, "symlink %s leaves the repository", lastLink)
			}
			resolved = resolved[:len(resolved)-1]
			if !lexical {
				dirs[len(dirs)-1].Close()
				dirs = dirs[:len(dirs)-1]
			}
			continue
		}
		cand := strings.Join(append(resolved, c), "/")
		if lexical {
			resolved = append(resolved, c)
			continue
		}
		dir := dirs[len(dirs)-1]
		if host, ok := v.overlayFor(cand); ok {
			// What the container sees here is the write area, once it is
			// mounted.
			d, err := openOverlay(host)
			if err != nil {
				return "", fmt.Errorf("resolving %s: opening the write area: %w", p, osError(err))
			}
			if d != nil {
				dirs = append(dirs, d)
				resolved = append(resolved, c)
				continue
			}
		}
		st, err := dir.Lstat(c, rootfs.NoSymlinks)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			lexical = true
			resolved = append(resolved, c)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("resolving %s: %s: %w", p, cand, osError(err))
		}
		if v.hiddenEntry(cand, statType(st.Mode)) {
			// Absent in the container: the kernel would stop here.
			lexical = true
			resolved = append(resolved, c)
			continue
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			links++
			if links > maxSymlinks {
				return "", refuse(p, "symlink %s: too many levels of symbolic links", cand)
			}
			target, err := dir.Readlink(c)
			if err != nil {
				return "", fmt.Errorf("resolving %s: reading link %s: %w", p, cand, osError(err))
			}
			if target == "" {
				// The kernel fails an empty target with ENOENT.
				lexical = true
				resolved = append(resolved, c)
				continue
			}
			if strings.HasPrefix(target, "/") {
				return "", refuse(p, "symlink %s leaves the repository", cand)
			}
			lastLink = cand
			remaining = append(strings.Split(target, "/"), remaining...)
		case unix.S_IFDIR:
			sub, err := dir.Sub(c)
			if err != nil {
				return "", fmt.Errorf("resolving %s: opening %s: %w", p, cand, osError(err))
			}
			dirs = append(dirs, sub)
			resolved = append(resolved, c)
		default:
			// Nothing can be below a file: the rest is lexical.
			lexical = true
			resolved = append(resolved, c)
		}
	}
	if len(resolved) == 0 {
		return ".", nil
	}
	return strings.Join(resolved, "/"), nil
}

// openOverlay opens an overlay's host directory, or returns nil when it
// is not mounted yet (absent, or not a mount point: the same device as
// its parent). Until then the container would see the repository's
// directory there (a write area starts as a copy of it, hidden paths
// left out), so Resolve reads the repository instead.
func openOverlay(host string) (*rootfs.Dir, error) {
	d, err := rootfs.OpenRoot(host)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := d.Fstat()
	if err != nil {
		d.Close()
		return nil, err
	}
	var parent unix.Stat_t
	if err := unix.Lstat(filepath.Dir(host), &parent); err != nil {
		d.Close()
		return nil, err
	}
	if st.Dev == parent.Dev {
		d.Close()
		return nil, nil
	}
	return d, nil
}

// hiddenEntry reports whether cand, whose parent is visible, is hidden
// itself.
func (v *View) hiddenEntry(cand string, typ entryType) bool {
	if _, ok := v.h.Lookup(cand); ok {
		return true
	}
	_, hidden := v.h.judgePath(cand, typ)
	return hidden
}

func refuse(p, format string, args ...any) *allowlist.Refusal {
	return &allowlist.Refusal{Kind: allowlist.KindPath, Index: -1, Token: p, Rule: fmt.Sprintf(format, args...)}
}
