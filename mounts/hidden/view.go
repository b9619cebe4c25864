package hidden

import (
	"errors"
	"fmt"
	"strings"
	"sync"

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
// reads ignore files only once, when the set is computed.
type View struct {
	root string
	h    *Set

	// overlays maps a repository-relative directory to the host path of
	// what the container sees there instead (the session's merged write
	// area), so that links the agent made there resolve as in the
	// container. Set once by Overlay after the mounts exist.
	mu       sync.RWMutex
	overlays map[string]string
}

var _ allowlist.View = (*View)(nil)

// NewView returns the view of the repository at root (the one h was
// computed from) without the paths in h.
func NewView(root string, h *Set) *View {
	return &View{root: root, h: h}
}

// Overlay makes Resolve read the directory rel (canonical,
// repository-relative) from hostDir instead of the repository: the
// session's merged write area, where the agent can create symlinks that
// the repository does not have.
func (v *View) Overlay(rel, hostDir string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.overlays == nil {
		v.overlays = map[string]string{}
	}
	v.overlays[rel] = hostDir
}

func (v *View) overlayFor(rel string) (string, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
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
			// What the container sees here is the write area.
			d, err := rootfs.OpenRoot(host)
			if err != nil {
				return "", fmt.Errorf("resolving %s: opening the write area: %w", p, osError(err))
			}
			dirs = append(dirs, d)
			resolved = append(resolved, c)
			continue
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
