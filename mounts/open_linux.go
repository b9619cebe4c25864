package mounts

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/moby/sys/mountinfo"
)

// ErrNotMounted is returned by Open when none of a layout's host mounts is
// present any more (the machine rebooted, or they were unmounted). The
// write area lived on a tmpfs: what the session wrote is gone with it.
var ErrNotMounted = fmt.Errorf("the session's host mounts are gone: %w", errdefs.ErrNotFound)

// LayoutAt returns the paths of the layout Prepare builds under dir for
// plan, without touching anything.
func LayoutAt(dir string, plan Plan) *Layout {
	l := &Layout{
		Dir: dir, Plan: plan,
		Repo: filepath.Join(dir, "repo"), WH: filepath.Join(dir, "wh"), View: filepath.Join(dir, "view"),
		Base: filepath.Join(dir, "base"), Area: filepath.Join(dir, "area"), Write: filepath.Join(dir, "write"),
		Ctl: filepath.Join(dir, "ctl"),
	}
	l.Upper = filepath.Join(l.Area, "upper")
	l.Work = filepath.Join(l.Area, "work")
	if plan.Page != "" && !plan.ReadOnly {
		l.PageCopy = filepath.Join(l.Area, "page")
	}
	return l
}

// Open re-attaches to the layout that Prepare built under dir for plan
// and that is still mounted (host mounts belong to no process: they stay
// between a session's invocations, across corral processes). It verifies
// with mountinfo that every expected mount is present and of the expected
// kind: the private self-bind of dir, the repository bind, the view (a
// read-only overlay over the whiteout layer and the repository) and, for
// a writable session, the write area's tmpfs and its overlay.
//
// It returns ErrNotMounted when none of them is present, and an error
// wrapping errdefs.ErrFailedPrecondition, naming what is missing or
// wrong, when only some are: such a layout is neither used nor repaired.
func Open(dir string, plan Plan) (*Layout, error) {
	l := LayoutAt(dir, plan)
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
	type want struct {
		path, fstype string
		check        func(*mountinfo.Info) string
	}
	wants := []want{
		{path: l.Dir},
		{path: l.Repo, check: func(m *mountinfo.Info) string {
			if !hasOption(m.Options, "ro") {
				return "the repository bind is not read-only"
			}
			return ""
		}},
		{path: l.View, fstype: "overlay", check: func(m *mountinfo.Info) string {
			if !hasOption(m.Options, "ro") {
				return "the view is not read-only"
			}
			if !strings.Contains(m.VFSOptions, "lowerdir="+l.WH+":"+l.Repo) {
				return "the view is not an overlay of the whiteout layer over the repository"
			}
			return ""
		}},
	}
	if !plan.ReadOnly {
		wants = append(wants, want{path: l.Area, fstype: "tmpfs"})
		if plan.Page == "" {
			wants = append(wants, want{path: l.Write, fstype: "overlay", check: func(m *mountinfo.Info) string {
				if !strings.Contains(m.VFSOptions, "upperdir="+l.Upper) {
					return "the write area is not an overlay on the session's upperdir"
				}
				return ""
			}})
		}
	}
	var problems []string
	for _, w := range wants {
		m := top[w.path]
		switch {
		case m == nil:
			problems = append(problems, w.path+" is not mounted")
		case w.fstype != "" && m.FSType != w.fstype:
			problems = append(problems, fmt.Sprintf("%s is %s, want %s", w.path, m.FSType, w.fstype))
		case w.check != nil:
			if p := w.check(m); p != "" {
				problems = append(problems, p)
			}
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("re-attaching to %s: %w: %s", dir, errdefs.ErrFailedPrecondition, strings.Join(problems, "; "))
	}
	return l, nil
}

func hasOption(opts, opt string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}
