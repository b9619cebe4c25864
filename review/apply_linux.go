package review

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
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
	// JournalDir is where Apply keeps the journal of its transaction, in
	// corral's state directory (JournalDir(stateDir)); required when Write
	// is set. Apply first recovers what an interrupted apply left there
	// (Recover).
	JournalDir string
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
	// refusal or conflict, under audit's failure policy.
	Audit *audit.Logger
	// Session names the session in audit events ("" for a patch file).
	Session string
	// RepoDev and RepoIno, when RepoIno is set, identify the repository
	// directory the change set belongs to (the session's, pinned when it
	// was made): the directory the repository path names must be that
	// one, else nothing is read or written (errdefs.ErrPermissionDenied).
	// A path swapped meanwhile for a symbolic link or another directory
	// (by whoever may write its parent: in Pod mode the agent, in its own
	// volume) never redirects the daemon, root, elsewhere.
	RepoDev, RepoIno uint64
}

// hooks let tests stop or fail an apply between its steps; Apply uses
// none.
type hooks struct {
	// beforeVerify runs after every temporary file is written, before the
	// checks that nothing moved and before anything in the repository
	// outside the staging directory changes.
	beforeVerify func()
	// afterStep runs after each step; an error fails the apply there.
	afterStep func(op, rel string) error
	// noExchange forces the fallback for file systems without
	// RENAME_EXCHANGE.
	noExchange bool
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
	c      *checked
	rel    string
	parent string // rel's directory
	name   string // rel's last component
	orig   unix.Stat_t
	temp   string // name in the staging directory: new content (writes), set-aside original (deletes)
	keep   string // name in the staging directory of a modified file's base copy
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
		return nil, auditRefusal(opts, "review", err)
	}
	r, err := openPinnedRepo(repo, opts)
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
		o := newOp(&cks[i])
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

func newOp(c *checked) *op {
	return &op{c: c, rel: c.ch.Path, parent: path.Dir(c.ch.Path), name: path.Base(c.ch.Path)}
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
//  3. What an interrupted earlier apply left in opts.JournalDir is
//     finished or rolled back (Recover).
//  4. Each approved change's base must match the repository: a modified or
//     deleted file must hold exactly the before bytes, a created file must
//     not exist; else a *ConflictError. The repository is read without
//     following any link: directories are opened with openat2
//     (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS) from the
//     root, files with O_NOFOLLOW relative to them; a link on the way is
//     refused.
//  5. Each approval is recorded in the audit log; with opts.Write false,
//     Apply stops here and reports what it would do.
//  6. The transaction is planned as a list of steps, each with its undo
//     (planSteps), journaled in opts.JournalDir (written and fsynced) and
//     announced in the audit log; then the steps run: the write scope's
//     missing directories are made; a staging directory is made inside
//     the scope's base directory, never elsewhere; every new content, and
//     a copy of every modified file's base, is written there (O_EXCL,
//     fsynced); every directory opened is checked to be still the one at
//     its path, reached without a link, and every base is read again;
//     deleted files are moved aside into the staging directory,
//     directories a type change removes are removed, missing directories
//     are made, created files are renamed into place with
//     RENAME_NOREPLACE, modified files are swapped in with RENAME_EXCHANGE
//     (the swapped-out inode is checked to be the base); directories are
//     fsynced; the journal records the commit; the staging directory and
//     the journal are removed.
//
// A failure before the commit undoes every step already taken, in reverse
// (each undo judges from the repository what there is to undo); if an
// undo fails, a *RollbackError lists what to restore by hand and the
// staging directory keeps every original. A process killed at any point
// leaves a journal from which the next Apply, `corral gc` or `corral apply
// --recover` (Recover) makes the repository all-old or all-new and removes
// the staging directory.
//
// Created files get mode 0644; modified files keep their permission bits
// and, where the caller may, their owner. Errors: *RefusedError
// (errdefs.ErrPermissionDenied), *ConflictError
// (errdefs.ErrFailedPrecondition), ErrNoApproval, *RollbackError,
// errdefs.ErrInvalidArgument for a bad scope, a nil set or no journal
// directory, an audit failure (see package audit), or a system call's
// failure.
func Apply(repo string, cs *changeset.Set, scope allowlist.Scope, approvals []Approval, opts Options) (*Report, error) {
	return apply(repo, cs, scope, approvals, opts, hooks{})
}

func apply(repo string, cs *changeset.Set, scope allowlist.Scope, approvals []Approval, opts Options, hk hooks) (rep *Report, retErr error) {
	defer func() {
		if retErr != nil {
			retErr = auditRefusal(opts, "apply", retErr)
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
	if opts.Write {
		if opts.JournalDir == "" {
			return nil, fmt.Errorf("applying to %q: %w: no journal directory", repo, errdefs.ErrInvalidArgument)
		}
		if err := recoverBefore(repo, opts); err != nil {
			return nil, err
		}
	}
	r, err := openPinnedRepo(repo, opts)
	if err != nil {
		return nil, err
	}
	defer r.close()

	rep = &Report{DryRun: !opts.Write, Written: []string{}}
	ops, f, err := inspect(r, cks, approved, scope)
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
	// Approvals precede the effect: an audit log that cannot record them
	// stops the apply before anything is written.
	for _, o := range ops {
		ev := &audit.Approval{Path: o.rel, Kind: string(o.c.ch.Kind), Token: o.c.token, Risk: o.c.risk.Level.String(), BeforeSHA256: o.c.before, AfterSHA256: o.c.after}
		if err := opts.Audit.Log(opts.Session, ev); err != nil {
			return nil, fmt.Errorf("recording approvals (nothing written): %w", err)
		}
	}
	if !opts.Write {
		if err := opts.Audit.Log(opts.Session, &audit.Apply{Repo: repo, DryRun: true, Files: []string{}}); err != nil {
			return nil, err
		}
		return rep, nil
	}
	for _, o := range ops {
		rep.Written = append(rep.Written, o.rel)
	}
	slices.Sort(rep.Written)

	id, err := newTxID()
	if err != nil {
		return nil, err
	}
	steps := planSteps(id, ops, f)
	j, err := createJournal(opts.JournalDir, r, id, path.Join(f.base, stagingName(id)), steps)
	if err != nil {
		return nil, fmt.Errorf("journaling the apply (nothing written): %w", err)
	}
	defer j.close()
	if err := opts.Audit.Log(opts.Session, &audit.ApplyStarted{Repo: repo, TxID: id, Files: rep.Written}); err != nil {
		j.remove()
		return nil, fmt.Errorf("recording the apply (nothing written): %w", err)
	}
	t := &tx{id: id, r: r, j: j, staging: j.rec.Staging, steps: steps, hooks: hk}
	if err := t.run(); err != nil {
		return nil, err
	}
	if err := opts.Audit.Log(opts.Session, &audit.Apply{Repo: repo, TxID: id, Files: rep.Written}); err != nil {
		return rep, fmt.Errorf("applied, but the audit log could not record it: %w", err)
	}
	return rep, nil
}

// auditRefusal records err as a refusal at stage (a policy decision, a
// conflict or a failure) and returns it, joined with the audit error when
// the record could not be written.
func auditRefusal(opts Options, stage string, err error) error {
	if opts.Audit == nil || err == nil {
		return err
	}
	ev := &audit.Refusal{Stage: stage, Error: err.Error()}
	var r *allowlist.Refusal
	if errors.As(err, &r) {
		ev.Rule = r.Rule
	}
	if aerr := opts.Audit.Log(opts.Session, ev); aerr != nil {
		return errors.Join(err, fmt.Errorf("the audit log could not record it: %w", aerr))
	}
	return err
}

// recoverBefore recovers opts.JournalDir, records what it did, and refuses
// to apply to repo while an earlier transaction on it is stuck.
func recoverBefore(repo string, opts Options) error {
	recs, err := Recover(opts.JournalDir)
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("recovering interrupted applies: %w", err))
	}
	for _, rc := range recs {
		var left []string
		for _, p := range rc.Left {
			left = append(left, p.Path+": "+p.Reason)
		}
		if err := opts.Audit.Log(opts.Session, &audit.ApplyRecovered{Repo: rc.Repo, TxID: rc.TxID, Outcome: rc.Outcome, Left: left}); err != nil {
			errs = append(errs, err)
		}
		if rc.Outcome == OutcomeStuck && sameRepo(rc.Repo, repo) {
			errs = append(errs, &RollbackError{Err: fmt.Errorf("an earlier apply (%s) to this repository could not be rolled back", rc.TxID), Left: rc.Left})
		}
	}
	return errors.Join(errs...)
}

// sameRepo compares two repository paths by the directory they name.
func sameRepo(a, b string) bool {
	var sa, sb unix.Stat_t
	if unix.Stat(a, &sa) != nil || unix.Stat(b, &sb) != nil {
		return a == b
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

func newTxID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
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

// inspect checks the base of every approved change against the repository
// and finds what the plan depends on (facts): which directories of the
// scope's base are missing, which directories type changes remove, which
// directories created files need. It reads and opens, never writes.
func inspect(r *repoFS, cks []checked, approved map[string]bool, scope allowlist.Scope) ([]*op, facts, error) {
	f := facts{base: scope.Base(), root: os.Geteuid() == 0}
	deletes := map[string]bool{}
	for i := range cks {
		if approved[cks[i].ch.Path] && cks[i].ch.Kind == changeset.Delete {
			deletes[cks[i].ch.Path] = true
		}
	}
	var ops []*op
	var conflicts, refusals []Problem
	record := func(err error) error {
		var re *repoError
		if !errors.As(err, &re) {
			return err
		}
		p := Problem{Path: changeset.Printable(re.path), Reason: re.reason}
		if re.refuse {
			refusals = append(refusals, p)
		} else {
			conflicts = append(conflicts, p)
		}
		return nil
	}
	for i := range cks {
		if !approved[cks[i].ch.Path] {
			continue
		}
		o := newOp(&cks[i])
		if err := checkBase(r, o, deletes); err != nil {
			if err := record(err); err != nil {
				return nil, f, err
			}
			continue
		}
		ops = append(ops, o)
	}
	if len(refusals) == 0 && len(conflicts) == 0 {
		if err := baseChain(r, &f); err != nil {
			if err := record(err); err != nil {
				return nil, f, err
			}
		}
	}
	switch {
	case len(refusals) > 0:
		return nil, f, &RefusedError{Problems: refusals}
	case len(conflicts) > 0:
		return nil, f, &ConflictError{Problems: conflicts}
	}
	if err := typeChanges(r, ops, &f); err != nil {
		return nil, f, asProblem(err)
	}
	return ops, f, nil
}

// baseChain finds the missing directories of the scope's base, shallowest
// first, and the owner of the deepest existing one. A component that is
// not a directory is a conflict.
func baseChain(r *repoFS, f *facts) error {
	existing := "."
	comps := strings.Split(f.base, "/")
	for i := range comps {
		p := strings.Join(comps[:i+1], "/")
		_, err := r.dir(p)
		switch {
		case err == nil:
			existing = p
			continue
		case errors.Is(err, unix.ENOENT):
			for k := i; k < len(comps); k++ {
				f.baseMissing = append(f.baseMissing, strings.Join(comps[:k+1], "/"))
			}
		case errors.Is(err, unix.ENOTDIR):
			return &repoError{path: p, reason: "is a file in the repository, not the write scope's directory"}
		default:
			return lookupErr(p, err)
		}
		break
	}
	d, err := r.dir(existing)
	if err != nil {
		return lookupErr(existing, err)
	}
	f.baseUID, f.baseGID = int(d.uid), int(d.gid)
	return nil
}

// typeChanges finds the directories created files replace (deepest first,
// with their modes) and the missing directories below the base that
// created files need (shallowest first).
func typeChanges(r *repoFS, ops []*op, f *facts) error {
	var writes, deletes []*op
	for _, o := range ops {
		if o.write() {
			writes = append(writes, o)
		} else {
			deletes = append(deletes, o)
		}
	}
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
	for _, p := range sortedKeys(removeDir, true) {
		// Opened now, so that the verify step checks them too.
		if _, err := r.dir(path.Dir(p)); err != nil {
			return lookupErr(path.Dir(p), err)
		}
		d, err := r.dir(p)
		if err != nil {
			return lookupErr(p, err)
		}
		f.rmdirs = append(f.rmdirs, dirMode{rel: p, mode: d.mode & 0o7777})
	}
	missing := map[string]bool{}
	for _, p := range f.baseMissing {
		missing[p] = true
	}
	makeDir := map[string]bool{}
	for _, w := range writes {
		for p := w.parent; below(p, f.base); p = path.Dir(p) {
			if !missing[f.base] {
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
			}
			makeDir[p] = true
		}
	}
	f.mkdirs = sortedKeys(makeDir, false)
	return nil
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

// below reports whether p lies strictly below the directory base.
func below(p, base string) bool {
	if base == "." {
		return p != "."
	}
	return strings.HasPrefix(p, base+"/")
}

func deletesUnder(deletes map[string]bool, dir string) bool {
	for d := range deletes {
		if strings.HasPrefix(d, dir+"/") {
			return true
		}
	}
	return false
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
