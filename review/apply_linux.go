package review

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"golang.org/x/sys/unix"
)

// Options are the trusted caller's choices for Preview and Apply. The zero
// value is a dry run with the default limits.
type Options struct {
	// Write must be true for Apply to write; otherwise it checks
	// everything (approvals, bases, the repository's directories) and
	// reports what it would write.
	Write bool
	// View, when set, is the session's view of the repository: paths it
	// hides are refused as they are for the container's writes.
	View allowlist.View
	// DryRunOnly lists risk classes that are never applied, even when
	// approved (e.g. a profile that lets a human only look at high-risk
	// changes).
	DryRunOnly []Level
	// Limits cap the change set as at collection; zero fields take
	// changeset.DefaultLimits.
	Limits changeset.Limits
	// Audit, when set, records each approval used, the apply, and each
	// refusal or conflict.
	Audit *audit.Logger
	// Session names the session in audit events ("" for a patch file).
	Session string

	// Test hooks: beforeCommit runs after every temporary file is written
	// and before anything in the repository changes; afterStep after each
	// step of the commit. noExchange forces the fallback for file systems
	// without RENAME_EXCHANGE.
	beforeCommit func()
	afterStep    func(step, rel string) error
	noExchange   bool
}

// Report is what Preview or Apply found and did.
type Report struct {
	// Items holds every change of the set, highest risk first.
	Items []Item `json:"items"`
	// DryRun is true when nothing was written.
	DryRun bool `json:"dry_run"`
	// Written lists the paths written, in path order.
	Written []string `json:"written"`
}

// op is one approved change and what applying it takes.
type op struct {
	c        *checked
	rel      string
	parent   string // rel's directory
	name     string // rel's last component
	orig     unix.Stat_t
	tmpDir   string // directory holding the temporary file (writes)
	tmpName  string
	stashDir string // directory the deleted file moves to (deletes)
	stash    string
}

func (o *op) write() bool { return o.c.ch.Kind != changeset.Delete }

// Preview validates cs as Apply does and checks every change against the
// repository without writing anything: each Item says pending,
// dry-run-only, conflict or refused. The report is returned with a
// *ConflictError or *RefusedError when some change cannot be applied as it
// stands; validation failures return no report.
func Preview(repo string, cs *changeset.Set, scope allowlist.Scope, opts Options) (*Report, error) {
	cks, err := validate(cs, scope, opts.View, opts.Limits)
	if err != nil {
		opts.Audit.Refusal(opts.Session, "review", err)
		return nil, err
	}
	r, err := openRepo(repo)
	if err != nil {
		return nil, err
	}
	defer r.close()
	rep := &Report{DryRun: true, Written: []string{}}
	var conflicts, refusals []Problem
	approvedDeletes := map[string]bool{}
	for i := range cks {
		if cks[i].ch.Kind == changeset.Delete {
			approvedDeletes[cks[i].ch.Path] = true
		}
	}
	for i := range cks {
		it := cks[i].item()
		it.Status = StatusPending
		if slices.Contains(opts.DryRunOnly, it.Risk.Level) {
			it.Status, it.Detail = StatusDryRunOnly, fmt.Sprintf("%s-risk changes are dry-run only", it.Risk.Level)
		}
		o := &op{c: &cks[i], rel: cks[i].ch.Path, parent: path.Dir(cks[i].ch.Path), name: path.Base(cks[i].ch.Path)}
		if err := checkBase(r, o, approvedDeletes); err != nil {
			var re *repoError
			if !errors.As(err, &re) {
				return nil, err
			}
			it.Detail = re.reason
			if re.refuse {
				it.Status = StatusRefused
				refusals = append(refusals, Problem{Path: changeset.Printable(re.path), Reason: re.reason})
			} else {
				it.Status = StatusConflict
				conflicts = append(conflicts, Problem{Path: changeset.Printable(re.path), Reason: re.reason})
			}
		}
		rep.Items = append(rep.Items, it)
	}
	sortItems(rep.Items)
	switch {
	case len(refusals) > 0:
		return rep, &RefusedError{Problems: refusals}
	case len(conflicts) > 0:
		return rep, &ConflictError{Problems: conflicts}
	}
	return rep, nil
}

// Apply is the only function in corral that writes a change set to a
// repository. It writes the approved changes of cs to repo, all or none,
// and only when opts.Write is true.
//
// In order, and with nothing written unless every step passes:
//  1. cs is validated as at collection and with the same write policy as
//     the container's writes, trusting none of its metadata (see Review):
//     a set with violations, a path outside scope, a forbidden name, a
//     digest that does not match the bytes is refused as a whole.
//  2. Each approval must match a change exactly: path, kind, the sha256
//     of the bytes before and after, and the risk class recomputed here
//     from the bytes (Classify). An approval for other bytes or another
//     class, or for no change, refuses the apply; no approval at all is
//     ErrNoApproval. Changes without an approval are left out. An approved
//     change whose class is in opts.DryRunOnly refuses the apply.
//  3. Each approved change's base must match the repository: a modified or
//     deleted file must hold exactly the before bytes, a created file must
//     not exist; else a *ConflictError. The repository is read without
//     following any link: directories are opened with openat2
//     (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS) from the
//     root, files with O_NOFOLLOW relative to them; a link on the way is
//     refused.
//  4. With opts.Write false, Apply stops here and reports what it would do.
//  5. Every new content is written to a temporary file (O_EXCL|O_NOFOLLOW)
//     in the target's directory (or, where that directory does not exist
//     yet, its deepest existing ancestor) and fsynced. Then every directory
//     opened is checked to be still the one at its path, reached without a
//     link, and every base is read again.
//  6. The commit: deleted files are renamed aside, directories a type change
//     removes are removed, missing directories are made (mkdirat), created
//     files are renamed into place with RENAME_NOREPLACE, modified files are
//     swapped with RENAME_EXCHANGE and the swapped-out inode is checked to
//     be the base. The directories are fsynced; the set-aside originals are
//     then removed.
//
// A failure in the commit undoes every step already taken, in reverse (the
// originals are still on disk until the end), and returns the error; if
// the undo fails too, a *RollbackError lists what to restore by hand. Each
// file is replaced by rename, so a process killed at any point leaves
// every file either old or new (and possibly a .corral-apply-*.tmp file).
//
// Created files get mode 0644; modified files keep their permission bits
// and, where the caller may, their owner. Errors: *RefusedError
// (errdefs.ErrPermissionDenied), *ConflictError
// (errdefs.ErrFailedPrecondition), ErrNoApproval, *RollbackError,
// errdefs.ErrInvalidArgument for a bad scope or nil set, or a system call's
// failure.
func Apply(repo string, cs *changeset.Set, scope allowlist.Scope, approvals []Approval, opts Options) (rep *Report, retErr error) {
	defer func() {
		if retErr != nil {
			opts.Audit.Refusal(opts.Session, "apply", retErr)
		}
	}()
	cks, err := validate(cs, scope, opts.View, opts.Limits)
	if err != nil {
		return nil, err
	}
	if len(approvals) == 0 {
		return nil, fmt.Errorf("applying to %q: %w", repo, ErrNoApproval)
	}
	approved, err := matchApprovals(cks, approvals, opts.DryRunOnly)
	if err != nil {
		return nil, err
	}
	r, err := openRepo(repo)
	if err != nil {
		return nil, err
	}
	defer r.close()

	rep = &Report{DryRun: !opts.Write, Written: []string{}}
	ops, err := plan(r, cks, approved)
	if err != nil {
		return nil, err
	}
	for i := range cks {
		it := cks[i].item()
		it.Status = StatusNotApproved
		if approved[cks[i].ch.Path] {
			it.Status = StatusWouldApply
			if opts.Write {
				it.Status = StatusApplied
			}
		}
		rep.Items = append(rep.Items, it)
	}
	sortItems(rep.Items)
	// Approvals are recorded before anything is written: an audit log that
	// cannot be written stops the apply.
	for _, o := range ops {
		if err := opts.Audit.Approval(opts.Session, o.rel, string(o.c.ch.Kind), o.c.token, o.c.risk.Level.String(), o.c.before, o.c.after); err != nil {
			return nil, fmt.Errorf("recording approvals (nothing written): %w", err)
		}
	}
	if !opts.Write {
		if err := opts.Audit.Apply(opts.Session, repo, true, nil); err != nil {
			return nil, err
		}
		return rep, nil
	}
	if err := commit(r, ops, scope, opts); err != nil {
		return nil, err
	}
	for _, o := range ops {
		rep.Written = append(rep.Written, o.rel)
	}
	slices.Sort(rep.Written)
	if err := opts.Audit.Apply(opts.Session, repo, false, rep.Written); err != nil {
		return rep, fmt.Errorf("applied, but the audit log could not record it: %w", err)
	}
	return rep, nil
}

// matchApprovals returns the paths approved. Every approval must match a
// change exactly.
func matchApprovals(cks []checked, approvals []Approval, dryRunOnly []Level) (map[string]bool, error) {
	byPath := map[string]*checked{}
	for i := range cks {
		byPath[cks[i].ch.Path] = &cks[i]
	}
	approved := map[string]bool{}
	var problems []Problem
	for _, a := range approvals {
		c, ok := byPath[a.Path]
		switch {
		case !ok:
			problems = append(problems, Problem{Path: changeset.Printable(a.Path), Reason: "approval for a path the change set does not change"})
		case a.Kind != c.ch.Kind || a.BeforeSHA256 != c.before || a.AfterSHA256 != c.after:
			problems = append(problems, Problem{Path: changeset.Printable(a.Path), Reason: fmt.Sprintf("approval is for other content (approved %s %.12s..%.12s, change is %s %.12s..%.12s)", a.Kind, a.BeforeSHA256, a.AfterSHA256, c.ch.Kind, c.before, c.after)})
		case a.Risk != c.risk.Level:
			problems = append(problems, Problem{Path: changeset.Printable(a.Path), Reason: fmt.Sprintf("approval was given for risk %s but the change is %s: %s", a.Risk, c.risk.Level, strings.Join(c.risk.Reasons, "; "))})
		case slices.Contains(dryRunOnly, c.risk.Level):
			problems = append(problems, Problem{Path: changeset.Printable(a.Path), Reason: fmt.Sprintf("%s-risk changes are dry-run only and are never applied", c.risk.Level)})
		default:
			approved[a.Path] = true
		}
	}
	if len(problems) > 0 {
		return nil, &RefusedError{Problems: problems}
	}
	return approved, nil
}

// plan checks the base of every approved change against the repository and
// works out where each temporary file and set-aside original goes.
func plan(r *repoFS, cks []checked, approved map[string]bool) ([]*op, error) {
	deletes := map[string]bool{}
	for i := range cks {
		if approved[cks[i].ch.Path] && cks[i].ch.Kind == changeset.Delete {
			deletes[cks[i].ch.Path] = true
		}
	}
	var ops []*op
	var conflicts, refusals []Problem
	for i := range cks {
		c := &cks[i]
		if !approved[c.ch.Path] {
			continue
		}
		o := &op{c: c, rel: c.ch.Path, parent: path.Dir(c.ch.Path), name: path.Base(c.ch.Path)}
		if err := checkBase(r, o, deletes); err != nil {
			var re *repoError
			if !errors.As(err, &re) {
				return nil, err
			}
			p := Problem{Path: changeset.Printable(re.path), Reason: re.reason}
			if re.refuse {
				refusals = append(refusals, p)
			} else {
				conflicts = append(conflicts, p)
			}
			continue
		}
		ops = append(ops, o)
	}
	switch {
	case len(refusals) > 0:
		return nil, &RefusedError{Problems: refusals}
	case len(conflicts) > 0:
		return nil, &ConflictError{Problems: conflicts}
	}
	return ops, nil
}

// checkBase compares o's base with the repository and records the original
// file's identity. deletes are the paths deleted in the same apply (a file
// deleted to make room for a directory, or files deleted to make room for
// a file). The error is a *repoError for a conflict or a refusal.
func checkBase(r *repoFS, o *op, deletes map[string]bool) error {
	c := o.c
	conflict := func(format string, args ...any) error {
		return &repoError{path: o.rel, reason: fmt.Sprintf(format, args...)}
	}
	if c.ch.Kind == changeset.Create {
		n, err := r.lstat(o.rel)
		if err != nil {
			return err
		}
		if n.exists && !n.isDir {
			return conflict("already exists in the repository")
		}
		if n.isDir && !deletesUnder(deletes, o.rel) {
			return conflict("is a directory in the repository")
		}
		_, blocker, err := r.deepestDir(o.rel)
		if err != nil {
			return err
		}
		if blocker != "" && !deletes[blocker] {
			return conflict("%s is a file in the repository, not a directory", blocker)
		}
		return nil
	}
	data, st, exists, err := r.readFile(o.rel, int64(len(c.ch.Before)))
	switch {
	case err != nil:
		return err
	case !exists:
		return conflict("no longer exists in the repository")
	case changeset.SHA256(data) != c.before:
		return conflict("changed in the repository since the change set was made (base sha256 %.12s, repository has %.12s)", c.before, changeset.SHA256(data))
	}
	o.orig = st
	return nil
}

func deletesUnder(deletes map[string]bool, dir string) bool {
	for d := range deletes {
		if strings.HasPrefix(d, dir+"/") {
			return true
		}
	}
	return false
}

// undoStack records how to reverse each step of a commit.
type undoStack []undoStep

type undoStep struct {
	rel string
	fn  func() error
}

func (u *undoStack) push(rel string, fn func() error) { *u = append(*u, undoStep{rel, fn}) }

// run undoes every step in reverse and returns what could not be undone.
func (u undoStack) run() []Problem {
	var left []Problem
	for i := len(u) - 1; i >= 0; i-- {
		if err := u[i].fn(); err != nil {
			left = append(left, Problem{Path: changeset.Printable(u[i].rel), Reason: err.Error()})
		}
	}
	return left
}

// commit writes ops (see Apply, steps 5 and 6).
func commit(r *repoFS, ops []*op, scope allowlist.Scope, opts Options) (retErr error) {
	var writes, deletes []*op
	for _, o := range ops {
		if o.write() {
			writes = append(writes, o)
		} else {
			deletes = append(deletes, o)
		}
	}
	// Directories a file replaces: the created path and every directory
	// between it and the files deleted below it, deepest first.
	removeDir := map[string]bool{}
	for _, w := range writes {
		for _, d := range deletes {
			if strings.HasPrefix(d.rel, w.rel+"/") {
				for p := d.parent; p != w.rel; p = path.Dir(p) {
					removeDir[p] = true
				}
				removeDir[w.rel] = true
			}
		}
	}
	rmdirs := sortedKeys(removeDir, true)
	// Directories to make: every missing ancestor of a written file, and
	// every ancestor that is a file deleted to make room.
	makeDir := map[string]bool{}
	for _, w := range writes {
		for p := w.parent; p != "."; p = path.Dir(p) {
			n, err := r.lstat(p)
			if err != nil {
				var re *repoError
				if !errors.As(err, &re) || re.refuse {
					return err
				}
			}
			if n.isDir && !removeDir[p] {
				break
			}
			makeDir[p] = true
		}
	}
	mkdirs := sortedKeys(makeDir, false)
	// nearestKept is the closest existing directory at or above dir that
	// the commit neither removes nor makes.
	nearestKept := func(dir string) (*dirFD, error) {
		for p := dir; ; p = path.Dir(p) {
			if !removeDir[p] && !makeDir[p] {
				return r.dir(p)
			}
		}
	}

	// Step 5: temporary files, then the checks that nothing moved.
	defer func() {
		var rb *RollbackError
		if errors.As(retErr, &rb) {
			// Some original may sit at a temporary or set-aside name:
			// leave every one for the reviewer.
			return
		}
		removeTemps(r, ops, retErr == nil)
	}()
	for _, o := range writes {
		d, err := nearestKept(o.parent)
		if err != nil {
			return asProblem(err)
		}
		mode, uid, gid := uint32(0o644), -1, -1
		if o.c.ch.Kind == changeset.Modify {
			mode, uid, gid = o.orig.Mode&0o777, int(o.orig.Uid), int(o.orig.Gid)
		} else if os.Geteuid() == 0 {
			// root writes files that belong to the repository's owner.
			uid, gid = int(d.uid), int(d.gid)
		}
		name, err := writeTemp(d, o.c.ch.After, mode, uid, gid)
		if err != nil {
			return err
		}
		o.tmpDir, o.tmpName = d.rel, name
	}
	for _, o := range deletes {
		d, err := nearestKept(o.parent)
		if err != nil {
			return asProblem(err)
		}
		o.stashDir = d.rel
	}
	for _, p := range rmdirs {
		if _, err := r.dir(path.Dir(p)); err != nil {
			return asProblem(err)
		}
		if _, err := r.dir(p); err != nil {
			return asProblem(err)
		}
	}
	if opts.beforeCommit != nil {
		opts.beforeCommit()
	}
	if err := r.verify(); err != nil {
		return asProblem(err)
	}
	for _, o := range ops {
		if o.c.ch.Kind == changeset.Create {
			continue
		}
		data, st, exists, err := r.readFile(o.rel, int64(len(o.c.ch.Before)))
		if err != nil {
			return asProblem(err)
		}
		if !exists || st.Ino != o.orig.Ino || st.Dev != o.orig.Dev || !bytes.Equal(data, o.c.ch.Before) {
			return &ConflictError{Problems: []Problem{{Path: changeset.Printable(o.rel), Reason: "changed in the repository during apply"}}}
		}
	}

	// Step 6: the commit, undone in reverse on any failure.
	var undo undoStack
	defer func() {
		if retErr == nil {
			return
		}
		if left := undo.run(); len(left) > 0 {
			retErr = &RollbackError{Err: retErr, Left: left}
		}
	}()
	step := func(name, rel string) error {
		if opts.afterStep != nil {
			return opts.afterStep(name, rel)
		}
		return nil
	}
	for _, o := range deletes {
		pd, err := r.dir(o.parent)
		if err != nil {
			return asProblem(err)
		}
		sd := r.dirs[o.stashDir]
		stash := tempName()
		if err := unix.Renameat2(pd.fd, o.name, sd.fd, stash, unix.RENAME_NOREPLACE); err != nil {
			return fmt.Errorf("deleting %q: %w", o.rel, err)
		}
		o.stash = stash
		undo.push(o.rel, func() error {
			if err := unix.Renameat2(sd.fd, stash, pd.fd, o.name, unix.RENAME_NOREPLACE); err != nil {
				return fmt.Errorf("restoring the deleted file from %s/%s: %w", o.stashDir, stash, err)
			}
			o.stash = ""
			return nil
		})
		if err := checkMoved(sd, stash, o); err != nil {
			return err
		}
		if err := step("delete", o.rel); err != nil {
			return err
		}
	}
	for _, p := range rmdirs {
		pd, err := r.dir(path.Dir(p))
		if err != nil {
			return asProblem(err)
		}
		mode := r.dirs[p].mode & 0o7777
		if err := unix.Unlinkat(pd.fd, path.Base(p), unix.AT_REMOVEDIR); err != nil {
			if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
				return &ConflictError{Problems: []Problem{{Path: changeset.Printable(p), Reason: "directory holds files the change set does not delete"}}}
			}
			return fmt.Errorf("removing directory %q: %w", p, err)
		}
		r.forget(p)
		undo.push(p, func() error {
			if err := unix.Mkdirat(pd.fd, path.Base(p), mode); err != nil {
				return fmt.Errorf("re-making the removed directory: %w", err)
			}
			return nil
		})
		if err := step("rmdir", p); err != nil {
			return err
		}
	}
	for _, p := range mkdirs {
		pd, err := r.dir(path.Dir(p))
		if err != nil {
			return asProblem(err)
		}
		if err := unix.Mkdirat(pd.fd, path.Base(p), 0o755); err != nil {
			if errors.Is(err, unix.EEXIST) {
				return &ConflictError{Problems: []Problem{{Path: changeset.Printable(p), Reason: "appeared in the repository during apply"}}}
			}
			return fmt.Errorf("making directory %q: %w", p, err)
		}
		undo.push(p, func() error {
			r.forget(p)
			if err := unix.Unlinkat(pd.fd, path.Base(p), unix.AT_REMOVEDIR); err != nil {
				return fmt.Errorf("removing the made directory: %w", err)
			}
			return nil
		})
		d, err := r.dir(p)
		if err != nil {
			return asProblem(err)
		}
		if os.Geteuid() == 0 {
			_ = unix.Fchown(d.fd, int(pd.uid), int(pd.gid))
		}
		if err := step("mkdir", p); err != nil {
			return err
		}
	}
	for _, o := range writes {
		if err := renameIn(r, o, &undo, opts.noExchange); err != nil {
			return err
		}
		if err := step("write", o.rel); err != nil {
			return err
		}
	}
	for _, d := range r.dirs {
		if err := unix.Fsync(d.fd); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("syncing directory %q: %w", d.rel, err)
		}
	}
	undo = nil // committed: the originals can go
	removeTemps(r, ops, true)
	pruneEmptyDirs(r, deletes, scope)
	return nil
}

// removeTemps removes the temporary files left by ops and, when originals
// is true (the commit is complete), the set-aside originals. It is safe to
// call more than once.
func removeTemps(r *repoFS, ops []*op, originals bool) {
	for _, o := range ops {
		if o.tmpName != "" {
			if d, ok := r.dirs[o.tmpDir]; ok {
				_ = unix.Unlinkat(d.fd, o.tmpName, 0)
			}
		}
		if o.stash != "" && originals {
			if d, ok := r.dirs[o.stashDir]; ok {
				_ = unix.Unlinkat(d.fd, o.stash, 0)
			}
		}
	}
}

// renameIn moves o's temporary file into place: RENAME_NOREPLACE for a
// create; for a modify RENAME_EXCHANGE, after which the original sits at
// the temporary name and is checked to be the base.
func renameIn(r *repoFS, o *op, undo *undoStack, noExchange bool) error {
	td := r.dirs[o.tmpDir]
	pd, err := r.dir(o.parent)
	if err != nil {
		return asProblem(err)
	}
	tmp := o.tmpName
	if o.c.ch.Kind == changeset.Create {
		if err := unix.Renameat2(td.fd, tmp, pd.fd, o.name, unix.RENAME_NOREPLACE); err != nil {
			if errors.Is(err, unix.EEXIST) {
				return &ConflictError{Problems: []Problem{{Path: changeset.Printable(o.rel), Reason: "appeared in the repository during apply"}}}
			}
			return fmt.Errorf("creating %q: %w", o.rel, err)
		}
		undo.push(o.rel, func() error {
			if err := unix.Renameat2(pd.fd, o.name, td.fd, tmp, unix.RENAME_NOREPLACE); err != nil {
				return fmt.Errorf("removing the created file: %w", err)
			}
			return nil
		})
		return nil
	}
	// The temporary file of a modify is always beside its target.
	if !noExchange {
		err := unix.Renameat2(td.fd, tmp, pd.fd, o.name, unix.RENAME_EXCHANGE)
		if err == nil {
			undo.push(o.rel, func() error {
				if err := unix.Renameat2(td.fd, tmp, pd.fd, o.name, unix.RENAME_EXCHANGE); err != nil {
					return fmt.Errorf("swapping the original back from %s/%s: %w", o.tmpDir, tmp, err)
				}
				return nil
			})
			return checkMoved(td, tmp, o)
		}
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("replacing %q: %w", o.rel, err)
		}
	}
	// No RENAME_EXCHANGE here: check the base once more, replace, and keep
	// the base bytes to restore.
	if err := checkMoved(pd, o.name, o); err != nil {
		return err
	}
	if err := unix.Renameat(td.fd, tmp, pd.fd, o.name); err != nil {
		return fmt.Errorf("replacing %q: %w", o.rel, err)
	}
	undo.push(o.rel, func() error {
		name, err := writeTemp(pd, o.c.ch.Before, o.orig.Mode&0o777, int(o.orig.Uid), int(o.orig.Gid))
		if err != nil {
			return err
		}
		if err := unix.Renameat(pd.fd, name, pd.fd, o.name); err != nil {
			_ = unix.Unlinkat(pd.fd, name, 0)
			return fmt.Errorf("restoring the original: %w", err)
		}
		return nil
	})
	return nil
}

// checkMoved verifies that the file at name in d is o's original: the
// inode checked before and the base bytes.
func checkMoved(d *dirFD, name string, o *op) error {
	data, st, exists, err := readAt(d, name, o.rel, int64(len(o.c.ch.Before)))
	if err != nil {
		return asProblem(err)
	}
	if !exists || st.Ino != o.orig.Ino || st.Dev != o.orig.Dev || !bytes.Equal(data, o.c.ch.Before) {
		return &ConflictError{Problems: []Problem{{Path: changeset.Printable(o.rel), Reason: "changed in the repository during apply"}}}
	}
	return nil
}

// pruneEmptyDirs removes directories left empty by deletions, below the
// scope's directory, as git apply does. Failures are ignored: the content
// is applied.
func pruneEmptyDirs(r *repoFS, deletes []*op, scope allowlist.Scope) {
	stop := scope.Dir
	if scope.Page != "" {
		stop = path.Dir(scope.Page)
	}
	for _, o := range deletes {
		for p := o.parent; p != "." && p != stop && strings.HasPrefix(p, stop+"/"); p = path.Dir(p) {
			pd, err := r.dir(path.Dir(p))
			if err != nil {
				break
			}
			if err := unix.Unlinkat(pd.fd, path.Base(p), unix.AT_REMOVEDIR); err != nil {
				break
			}
			r.forget(p)
		}
	}
}

// asProblem turns a *repoError into a *RefusedError or *ConflictError.
func asProblem(err error) error {
	var re *repoError
	if !errors.As(err, &re) {
		return err
	}
	p := []Problem{{Path: changeset.Printable(re.path), Reason: re.reason}}
	if re.refuse {
		return &RefusedError{Problems: p}
	}
	return &ConflictError{Problems: p}
}

// sortedKeys returns m's keys by depth, deepest first when deep is true,
// else shallowest first; equal depths in path order.
func sortedKeys(m map[string]bool, deep bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		da, db := strings.Count(a, "/"), strings.Count(b, "/")
		if da != db {
			if deep {
				return db - da
			}
			return da - db
		}
		return strings.Compare(a, b)
	})
	return keys
}
