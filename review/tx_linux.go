package review

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/corral-sandbox/corral/mounts/changeset"
	"golang.org/x/sys/unix"
)

// tx is one apply transaction being run or recovered: the repository, the
// staging directory inside the scope's base, the planned steps and the
// journal that holds them.
type tx struct {
	id      string
	r       *repoFS
	j       *journal
	staging string // repo-relative
	steps   []*txStep
	hooks   hooks
}

// run does every step in order; before each, the step's undo is pushed on
// a cleanup stack, so that a failure undoes what was done, last first.
// Once the journal records the commit the stack is released: what remains
// (removing the staging directory) is finished, now or by Recover.
func (t *tx) run() (retErr error) {
	var c cleanup
	defer func() {
		if retErr == nil {
			return
		}
		if left := t.rollback(&c); len(left) > 0 {
			retErr = &RollbackError{Err: retErr, Left: left}
			t.j.markStuck(left)
			return
		}
		t.j.remove()
	}()
	for _, s := range t.steps {
		if s.Op == opVerify && t.hooks.beforeVerify != nil {
			t.hooks.beforeVerify()
		}
		if s.Op == opFinish {
			c.release()
		}
		c.add(func() error { return s.undo(t) })
		if err := s.do(t); err != nil {
			if s.Op == opFinish {
				// Committed: the journal lets Recover finish.
				return nil
			}
			return err
		}
		if t.hooks.afterStep != nil {
			if err := t.hooks.afterStep(s.Op, s.Path); err != nil {
				if s.Op == opCommit || s.Op == opFinish {
					return nil
				}
				return err
			}
		}
	}
	return nil
}

// rollback runs the cleanup stack and returns what could not be undone.
func (t *tx) rollback(c *cleanup) []Problem {
	var left []Problem
	for _, err := range c.clean() {
		var le *leftError
		if errors.As(err, &le) {
			left = append(left, le.left...)
			continue
		}
		left = append(left, problemOf(err))
	}
	return left
}

// leftError is what discard could not remove.
type leftError struct{ left []Problem }

func (e *leftError) Error() string { return changeset.Join(e.left) }

// recoverSteps undoes every step, last first, as Recover does for a
// transaction that did not commit, and returns what could not be undone.
func (t *tx) recoverSteps() []Problem {
	var c cleanup
	for _, s := range t.steps {
		c.add(func() error { return s.undo(t) })
	}
	return t.rollback(&c)
}

// stepError is an undo that failed: the path and why.
type stepError struct {
	path   string
	reason string
}

func (e *stepError) Error() string { return e.path + ": " + e.reason }

func problemOf(err error) Problem {
	var se *stepError
	if errors.As(err, &se) {
		return Problem{Path: changeset.Printable(se.path), Reason: se.reason}
	}
	return Problem{Path: ".", Reason: err.Error()}
}

func undoFailed(p, format string, args ...any) error {
	return &stepError{path: p, reason: fmt.Sprintf(format, args...)}
}

// stagingDir opens the staging directory; ok is false when it does not
// exist.
func (t *tx) stagingDir() (*dirFD, bool, error) {
	d, err := t.r.dir(t.staging)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, lookupErr(t.staging, err)
	}
	return d, true, nil
}

// parentDir opens the directory of rel; ok is false when it does not
// exist.
func (t *tx) parentDir(rel string) (*dirFD, bool, error) {
	d, err := t.r.dir(path.Dir(rel))
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, lookupErr(path.Dir(rel), err)
	}
	return d, true, nil
}

// do performs the step.
func (s *txStep) do(t *tx) error {
	switch s.Op {
	case opMkdirBase, opMkdir:
		return t.mkdir(s.Path, s.Mode)
	case opStage:
		return t.mkdir(s.Path, s.Mode)
	case opTemp:
		sd, err := t.r.dir(t.staging)
		if err != nil {
			return asProblem(lookupErr(t.staging, err))
		}
		// Made durable, with the staging directory, by the verify step.
		return writeFileAt(sd, s.Temp, s.data, s.mode, s.uid, s.gid, false)
	case opKeep:
		return t.keep(s)
	case opVerify:
		// Everything staged reaches the disk before the first step that
		// changes the repository outside the staging directory.
		if err := t.syncStaging(); err != nil {
			return err
		}
		return t.verify()
	case opDelete:
		return t.delete(s)
	case opRmdir:
		pd, err := t.r.dir(path.Dir(s.Path))
		if err != nil {
			return asProblem(lookupErr(path.Dir(s.Path), err))
		}
		if err := unix.Unlinkat(pd.fd, path.Base(s.Path), unix.AT_REMOVEDIR); err != nil {
			if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
				return &ConflictError{Problems: []Problem{{Path: changeset.Printable(s.Path), Reason: "directory holds files the change set does not delete"}}}
			}
			return fmt.Errorf("removing directory %q: %w", s.Path, err)
		}
		t.r.forget(s.Path)
		return nil
	case opCreate:
		return t.create(s)
	case opModify:
		return t.modify(s)
	case opSync:
		for _, d := range t.r.dirs {
			if err := unix.Fsync(d.fd); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("syncing directory %q: %w", d.rel, err)
			}
		}
		return nil
	case opCommit:
		return t.j.commit()
	case opFinish:
		if left := t.discard(true); len(left) > 0 {
			return fmt.Errorf("removing the staging directory: %s", changeset.Join(left))
		}
		t.pruneEmptyDirs()
		t.j.remove()
		return nil
	}
	return fmt.Errorf("unknown apply step %q", s.Op)
}

// undo reverses the step if it was done, judging from the repository
// alone, so that it is right whether the step was done, half done or not
// done, and can run again: after a failure in this process, or in Recover
// after a crash.
func (s *txStep) undo(t *tx) error {
	switch s.Op {
	case opMkdirBase, opMkdir:
		pd, ok, err := t.parentDir(s.Path)
		if err != nil || !ok {
			return err
		}
		t.r.forget(s.Path)
		err = unix.Unlinkat(pd.fd, path.Base(s.Path), unix.AT_REMOVEDIR)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
			// Removed, or never made (not a directory: not the apply's).
			return nil
		case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
			return undoFailed(s.Path, "made by the apply, now holds files: left in place")
		}
		return undoFailed(s.Path, "removing the directory the apply made: %v", err)
	case opStage:
		// Every step after it is undone: remove what nothing needs.
		if left := t.discard(false); len(left) > 0 {
			return &leftError{left}
		}
		return nil
	case opTemp, opKeep, opVerify, opSync, opCommit, opFinish:
		// Their files live in the staging directory (see opStage).
		return nil
	case opDelete:
		return t.undoDelete(s)
	case opRmdir:
		pd, ok, err := t.parentDir(s.Path)
		if err != nil {
			return err
		}
		if !ok {
			return undoFailed(s.Path, "its parent directory is gone; the removed directory was not made again")
		}
		var st unix.Stat_t
		err = unix.Fstatat(pd.fd, path.Base(s.Path), &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
			return nil
		case err == nil:
			return undoFailed(s.Path, "something else now stands where the removed directory was")
		case !errors.Is(err, unix.ENOENT):
			return undoFailed(s.Path, "%v", err)
		}
		if err := unix.Mkdirat(pd.fd, path.Base(s.Path), s.Mode); err != nil && !errors.Is(err, unix.EEXIST) {
			return undoFailed(s.Path, "making the removed directory again: %v", err)
		}
		return nil
	case opCreate:
		return t.undoCreate(s)
	case opModify:
		return t.undoModify(s)
	}
	return undoFailed(s.Path, "unknown apply step %q", s.Op)
}

// mkdir makes rel (mode), giving it its parent's owner when root applies.
func (t *tx) mkdir(rel string, mode uint32) error {
	pd, err := t.r.dir(path.Dir(rel))
	if err != nil {
		return asProblem(lookupErr(path.Dir(rel), err))
	}
	if err := unix.Mkdirat(pd.fd, path.Base(rel), mode); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return &ConflictError{Problems: []Problem{{Path: changeset.Printable(rel), Reason: "appeared in the repository during apply"}}}
		}
		return fmt.Errorf("making directory %q: %w", rel, err)
	}
	d, err := t.r.dir(rel)
	if err != nil {
		return asProblem(lookupErr(rel, err))
	}
	if os.Geteuid() == 0 {
		_ = unix.Fchown(d.fd, int(pd.uid), int(pd.gid))
	}
	return nil
}

// keep gives a modified file's base a second name in the staging
// directory (a hard link: the base's own inode, no copy), from which an
// undo restores it when the file system has no RENAME_EXCHANGE; where the
// link is refused, a copy of the base bytes.
func (t *tx) keep(s *txStep) error {
	sd, err := t.r.dir(t.staging)
	if err != nil {
		return asProblem(lookupErr(t.staging, err))
	}
	pd, err := t.r.dir(path.Dir(s.Path))
	if err != nil {
		return asProblem(lookupErr(path.Dir(s.Path), err))
	}
	if err := unix.Linkat(pd.fd, path.Base(s.Path), sd.fd, s.Keep, 0); err == nil {
		return nil
	}
	return writeFileAt(sd, s.Keep, s.data, s.mode, s.uid, s.gid, false)
}

// syncStaging makes the staged files and the staging directory durable:
// one syncfs of their file system, or an fsync of each where syncfs fails.
func (t *tx) syncStaging() error {
	sd, err := t.r.dir(t.staging)
	if err != nil {
		return asProblem(lookupErr(t.staging, err))
	}
	if err := unix.Syncfs(sd.fd); err == nil {
		return nil
	}
	names, err := readDirNames(sd)
	if err != nil {
		return err
	}
	for _, name := range names {
		f, err := sd.dir.OpenEntry(name, unix.O_RDONLY, 0)
		if err != nil {
			return fmt.Errorf("syncing %s/%s: %w", t.staging, name, err)
		}
		err = unix.Fsync(int(f.Fd()))
		f.Close()
		if err != nil {
			return fmt.Errorf("syncing %s/%s: %w", t.staging, name, err)
		}
	}
	return unix.Fsync(sd.fd)
}

// verify checks, after the temporary files are written and before any
// path outside the staging directory changes, that every directory opened
// is still the one at its path, reached without a link, and that every
// base still holds the bytes and inode inspected.
func (t *tx) verify() error {
	if err := t.r.verify(); err != nil {
		return asProblem(err)
	}
	for _, s := range t.steps {
		if s.Op != opModify && s.Op != opDelete {
			continue
		}
		o := s.o
		data, st, exists, err := t.r.readFile(o.rel, int64(len(o.c.ch.Before)))
		if err != nil {
			return asProblem(err)
		}
		if !exists || st.Ino != o.orig.Ino || st.Dev != o.orig.Dev || !bytes.Equal(data, o.c.ch.Before) {
			return &ConflictError{Problems: []Problem{{Path: changeset.Printable(o.rel), Reason: "changed in the repository during apply"}}}
		}
	}
	return nil
}

// delete moves the file aside into the staging directory and checks it is
// the base.
func (t *tx) delete(s *txStep) error {
	pd, err := t.r.dir(path.Dir(s.Path))
	if err != nil {
		return asProblem(lookupErr(path.Dir(s.Path), err))
	}
	sd, err := t.r.dir(t.staging)
	if err != nil {
		return asProblem(lookupErr(t.staging, err))
	}
	if err := unix.Renameat2(pd.fd, path.Base(s.Path), sd.fd, s.Temp, unix.RENAME_NOREPLACE); err != nil {
		return fmt.Errorf("deleting %q: %w", s.Path, err)
	}
	return checkMoved(sd, s.Temp, s.o)
}

func (t *tx) undoDelete(s *txStep) error {
	sd, ok, err := t.stagingDir()
	if err != nil || !ok {
		return err
	}
	if !existsAt(sd, s.Temp) {
		return nil // not moved aside, or already restored
	}
	pd, ok, err := t.parentDir(s.Path)
	if err != nil {
		return err
	}
	if !ok {
		return undoFailed(s.Path, "its directory is gone; the deleted original is kept at %s/%s", t.staging, s.Temp)
	}
	if err := unix.Renameat2(sd.fd, s.Temp, pd.fd, path.Base(s.Path), unix.RENAME_NOREPLACE); err != nil {
		return undoFailed(s.Path, "restoring the deleted file failed (%v); the original is kept at %s/%s", err, t.staging, s.Temp)
	}
	return nil
}

// create renames the new file into place; it must not exist.
func (t *tx) create(s *txStep) error {
	sd, err := t.r.dir(t.staging)
	if err != nil {
		return asProblem(lookupErr(t.staging, err))
	}
	pd, err := t.r.dir(path.Dir(s.Path))
	if err != nil {
		return asProblem(lookupErr(path.Dir(s.Path), err))
	}
	if err := unix.Renameat2(sd.fd, s.Temp, pd.fd, path.Base(s.Path), unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return &ConflictError{Problems: []Problem{{Path: changeset.Printable(s.Path), Reason: "appeared in the repository during apply"}}}
		}
		return fmt.Errorf("creating %q: %w", s.Path, err)
	}
	return nil
}

func (t *tx) undoCreate(s *txStep) error {
	sd, ok, err := t.stagingDir()
	if err != nil {
		return err
	}
	if ok && existsAt(sd, s.Temp) {
		return nil // not renamed into place
	}
	pd, pok, err := t.parentDir(s.Path)
	if err != nil || !pok {
		return err
	}
	sum, exists, err := hashAt(pd, path.Base(s.Path))
	switch {
	case err != nil:
		return undoFailed(s.Path, "%v", err)
	case !exists:
		return nil
	case sum != s.After:
		return undoFailed(s.Path, "changed since the apply created it: left in place")
	case !ok:
		return undoFailed(s.Path, "the staging directory is gone: the created file is left in place")
	}
	if err := unix.Renameat2(pd.fd, path.Base(s.Path), sd.fd, s.Temp, unix.RENAME_NOREPLACE); err != nil {
		return undoFailed(s.Path, "removing the created file: %v", err)
	}
	return nil
}

// modify swaps the new file in with RENAME_EXCHANGE, after which the
// original sits in the staging directory and is checked to be the base;
// without RENAME_EXCHANGE it checks the base once more and replaces it.
func (t *tx) modify(s *txStep) error {
	sd, err := t.r.dir(t.staging)
	if err != nil {
		return asProblem(lookupErr(t.staging, err))
	}
	pd, err := t.r.dir(path.Dir(s.Path))
	if err != nil {
		return asProblem(lookupErr(path.Dir(s.Path), err))
	}
	name := path.Base(s.Path)
	if !t.hooks.noExchange {
		err := unix.Renameat2(sd.fd, s.Temp, pd.fd, name, unix.RENAME_EXCHANGE)
		if err == nil {
			return checkMoved(sd, s.Temp, s.o)
		}
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("replacing %q: %w", s.Path, err)
		}
	}
	if err := checkMoved(pd, name, s.o); err != nil {
		return err
	}
	if err := unix.Renameat(sd.fd, s.Temp, pd.fd, name); err != nil {
		return fmt.Errorf("replacing %q: %w", s.Path, err)
	}
	return nil
}

// undoModify puts the original back: swapped back from the staging
// directory after an exchange (whatever the swap took out, the base or a
// concurrent edit), or from the base's copy after a replacement.
func (t *tx) undoModify(s *txStep) error {
	pd, ok, err := t.parentDir(s.Path)
	if err != nil {
		return err
	}
	if !ok {
		return undoFailed(s.Path, "its directory is gone; its original is kept at %s/%s", t.staging, s.Keep)
	}
	name := path.Base(s.Path)
	cur, exists, err := hashAt(pd, name)
	if err != nil {
		return undoFailed(s.Path, "%v", err)
	}
	if exists && cur == s.Before {
		return nil // not replaced, or already restored
	}
	sd, sok, err := t.stagingDir()
	if err != nil {
		return err
	}
	if !sok {
		return undoFailed(s.Path, "the staging directory is gone: the original cannot be restored")
	}
	tmp, tmpExists, err := hashAt(sd, s.Temp)
	if err != nil {
		return undoFailed(s.Path, "%v", err)
	}
	switch {
	case tmpExists && tmp == s.After:
		return nil // the new content was never swapped in
	case exists && cur != s.After:
		return undoFailed(s.Path, "changed since the apply wrote it: left in place; the original is kept in %s", t.staging)
	case tmpExists:
		// Exchanged: staging/Temp holds what the swap took out.
		flags := uint(unix.RENAME_EXCHANGE)
		if !exists {
			flags = unix.RENAME_NOREPLACE
		}
		err := unix.Renameat2(sd.fd, s.Temp, pd.fd, name, flags)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
			err = unix.Renameat(sd.fd, s.Temp, pd.fd, name)
		}
		if err != nil {
			return undoFailed(s.Path, "restoring the original failed (%v); it is kept at %s/%s", err, t.staging, s.Temp)
		}
		return nil
	}
	// Replaced without an exchange: restore the base's copy.
	keep, keepExists, err := hashAt(sd, s.Keep)
	if err != nil || !keepExists || keep != s.Before {
		return undoFailed(s.Path, "the copy of the original at %s/%s is missing or damaged: restore it by hand", t.staging, s.Keep)
	}
	if err := unix.Renameat(sd.fd, s.Keep, pd.fd, name); err != nil {
		return undoFailed(s.Path, "restoring the original failed (%v); it is kept at %s/%s", err, t.staging, s.Keep)
	}
	return nil
}

// discard removes the staging directory's entries and the directory
// itself. committed says the transaction committed: every entry goes.
// Otherwise an entry goes only when nothing depends on it — a new content,
// a create's temporary file, the copy of a base the repository holds
// again — and the entries that hold an original are kept and listed.
func (t *tx) discard(committed bool) []Problem {
	sd, ok, err := t.stagingDir()
	if err != nil {
		return []Problem{problemOf(err)}
	}
	if !ok {
		return nil
	}
	names, err := readDirNames(sd)
	if err != nil {
		return []Problem{{Path: t.staging, Reason: err.Error()}}
	}
	// Decide for every entry before removing any: whether one is needed
	// depends on the others.
	var left []Problem
	var remove []string
	for _, name := range names {
		if !committed {
			if keep, why := t.needed(sd, name); keep {
				left = append(left, Problem{Path: changeset.Printable(t.staging + "/" + name), Reason: why})
				continue
			}
		}
		remove = append(remove, name)
	}
	for _, name := range remove {
		if err := unix.Unlinkat(sd.fd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			left = append(left, Problem{Path: changeset.Printable(t.staging + "/" + name), Reason: err.Error()})
		}
	}
	if len(left) > 0 {
		return left
	}
	pd, pok, err := t.parentDir(t.staging)
	if err != nil || !pok {
		return nil
	}
	t.r.forget(t.staging)
	if err := unix.Unlinkat(pd.fd, path.Base(t.staging), unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return []Problem{{Path: changeset.Printable(t.staging), Reason: "removing the staging directory: " + err.Error()}}
	}
	return nil
}

// needed says whether the staging entry name of an uncommitted
// transaction holds an original the repository does not hold again.
func (t *tx) needed(sd *dirFD, name string) (bool, string) {
	for _, s := range t.steps {
		switch {
		case s.Op == opCreate && s.Temp == name:
			return false, ""
		case s.Op == opDelete && s.Temp == name:
			return true, "the original of " + s.Path + ", which could not be restored"
		case s.Op == opModify && (s.Temp == name || s.Keep == name):
			cur, exists, err := t.hashOf(s.Path)
			if err == nil && exists && cur == s.Before {
				return false, "" // the repository holds the original again
			}
			// While the new content is still in Temp it was never
			// swapped in: neither file holds an original the
			// repository lost.
			if sum, ok, _ := hashAt(sd, s.Temp); ok && sum == s.After {
				return false, ""
			}
			return true, "the original of " + s.Path + ", which could not be restored"
		}
	}
	return true, "not written by this apply"
}

// hashOf is the sha256 of the regular file rel.
func (t *tx) hashOf(rel string) (string, bool, error) {
	pd, ok, err := t.parentDir(rel)
	if err != nil || !ok {
		return "", false, err
	}
	return hashAt(pd, path.Base(rel))
}

// pruneEmptyDirs removes directories left empty by deletions, below the
// scope's base (the staging directory's parent), as git apply does.
// Failures are ignored: the content is applied.
func (t *tx) pruneEmptyDirs() {
	stop := path.Dir(t.staging)
	for _, s := range t.steps {
		if s.Op != opDelete {
			continue
		}
		for p := path.Dir(s.Path); p != "." && p != stop && strings.HasPrefix(p, stop+"/"); p = path.Dir(p) {
			pd, err := t.r.dir(path.Dir(p))
			if err != nil {
				break
			}
			if err := unix.Unlinkat(pd.fd, path.Base(p), unix.AT_REMOVEDIR); err != nil {
				break
			}
			t.r.forget(p)
		}
	}
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
