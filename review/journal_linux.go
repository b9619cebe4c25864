package review

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// JournalDirName is the directory of apply journals in corral's state
// directory.
const JournalDirName = "apply"

// JournalDir is the apply journal directory of the state directory
// stateDir.
func JournalDir(stateDir string) string { return filepath.Join(stateDir, JournalDirName) }

// journalVersion is the format of journalRecord.
const journalVersion = 1

// journalRecord is the journal of one transaction: enough to finish it or
// roll it back without the change set. It is written once, fsynced, before
// the first repository write, and never changed; the commit is a separate
// marker file (<id>.committed), written and fsynced when every step but the
// cleanup is done.
type journalRecord struct {
	Version int    `json:"version"`
	TxID    string `json:"tx_id"`
	// Repo is the repository's absolute path, RepoDev and RepoIno its
	// root directory's identity: recovery refuses a repository that is
	// not the one written.
	Repo    string `json:"repo"`
	RepoDev uint64 `json:"repo_dev"`
	RepoIno uint64 `json:"repo_ino"`
	// Staging is the staging directory, repo-relative, inside the scope.
	Staging string    `json:"staging"`
	Steps   []*txStep `json:"steps"`
}

// The files of transaction id in the journal directory. The lock file is
// held (flock) by whoever runs or recovers the transaction.
func journalFiles(dir, id string) (record, committed, stuck, lock string) {
	b := filepath.Join(dir, id)
	return b + ".json", b + ".committed", b + ".stuck", b + ".lock"
}

// journal is an open, locked transaction journal.
type journal struct {
	dir  string
	rec  journalRecord
	lock *os.File
}

// createJournal takes the lock of a new transaction id and writes its
// record (through a temporary name, renamed into place and fsynced with
// the directory), so that the record a recovery reads is always whole.
func createJournal(dir string, r *repoFS, id, staging string, steps []*txStep) (*journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	st, err := r.root.Fstat()
	if err != nil {
		return nil, err
	}
	repo, err := filepath.Abs(r.path)
	if err != nil {
		return nil, err
	}
	rec := journalRecord{Version: journalVersion, TxID: id, Repo: repo, RepoDev: uint64(st.Dev), RepoIno: uint64(st.Ino), Staging: staging, Steps: steps}
	recPath, _, _, lockPath := journalFiles(dir, id)
	lock, err := lockFile(lockPath, true)
	if err != nil {
		return nil, err
	}
	j := &journal{dir: dir, rec: rec, lock: lock}
	data, err := json.MarshalIndent(rec, "", " ")
	if err == nil {
		err = writeSynced(recPath, data)
	}
	if err != nil {
		j.remove()
		j.close()
		return nil, fmt.Errorf("writing the journal: %w", err)
	}
	return j, nil
}

// commit records that every step but the cleanup is done: from now on a
// recovery finishes the transaction instead of rolling it back.
func (j *journal) commit() error {
	_, committed, _, _ := journalFiles(j.dir, j.rec.TxID)
	if err := writeSynced(committed, nil); err != nil {
		return fmt.Errorf("journaling the commit: %w", err)
	}
	return nil
}

// markStuck records what a rollback could not undo; Recover reports it
// until someone restores it by hand.
func (j *journal) markStuck(left []Problem) {
	_, _, stuck, _ := journalFiles(j.dir, j.rec.TxID)
	data, _ := json.Marshal(left)
	_ = writeSynced(stuck, data)
}

// remove deletes the transaction's files, the lock last (it stays held
// until close).
func (j *journal) remove() {
	rec, committed, stuck, lock := journalFiles(j.dir, j.rec.TxID)
	for _, p := range []string{rec, committed, stuck, rec + ".tmp", committed + ".tmp", stuck + ".tmp", lock} {
		_ = os.Remove(p)
	}
	syncDir(j.dir)
}

func (j *journal) close() {
	if j.lock != nil {
		_ = j.lock.Close()
		j.lock = nil
	}
}

// lockFile opens (creating it) and flocks path exclusively; without wait
// it fails with unix.EWOULDBLOCK when another process holds it. It returns
// only a lock on the file still at path: one that was removed while it
// waited is taken again.
func lockFile(path string, wait bool) (*os.File, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, err
		}
		how := unix.LOCK_EX
		if !wait {
			how |= unix.LOCK_NB
		}
		for {
			err = unix.Flock(int(f.Fd()), how)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		var held, now unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &held); err != nil {
			f.Close()
			return nil, err
		}
		if unix.Stat(path, &now) == nil && now.Dev == held.Dev && now.Ino == held.Ino {
			return f, nil
		}
		f.Close()
	}
}

// writeSynced writes data to path through a temporary name, fsyncs it,
// renames it into place and fsyncs the directory.
func writeSynced(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// The outcomes of a recovered transaction.
const (
	// OutcomeCommitted: the transaction had committed; its cleanup was
	// finished. The repository holds the new contents.
	OutcomeCommitted = "committed"
	// OutcomeRolledBack: the transaction had not committed; every step
	// was undone. The repository holds the old contents.
	OutcomeRolledBack = "rolled-back"
	// OutcomeStuck: an undo failed; Left says what to restore by hand
	// (the originals stay in the staging directory). Recover tries again
	// each time.
	OutcomeStuck = "stuck"
)

// Recovered is one interrupted transaction Recover found.
type Recovered struct {
	TxID    string    `json:"tx_id"`
	Repo    string    `json:"repo"`
	Outcome string    `json:"outcome"`
	Left    []Problem `json:"left,omitempty"`
}

// Recover finishes or rolls back every transaction in journalDir that no
// running apply holds, so that each repository it wrote ends all-old (the
// transaction had not committed) or all-new (it had), with no staging
// directory left, and removes its journal. A transaction whose undo fails
// stays, reported as OutcomeStuck with what to restore by hand. The
// repository is reached as Apply reaches it: openat2 beneath its root, no
// link followed; one whose root is no longer the directory the journal
// names is not touched (reported stuck). A missing journalDir holds
// nothing. The error is for a journal directory or record that cannot be
// read.
func Recover(journalDir string) ([]Recovered, error) {
	entries, err := os.ReadDir(journalDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the apply journal %s: %w", journalDir, err)
	}
	var ids []string
	for _, e := range entries {
		name := e.Name()
		for _, suffix := range []string{".json.tmp", ".committed.tmp", ".stuck.tmp", ".json", ".committed", ".stuck", ".lock"} {
			if id, ok := strings.CutSuffix(name, suffix); ok && id != "" {
				if !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
				break
			}
		}
	}
	slices.Sort(ids)
	var out []Recovered
	var errs []error
	for _, id := range ids {
		rc, ok, err := recoverTx(journalDir, id)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			out = append(out, rc)
		}
	}
	return out, errors.Join(errs...)
}

// recoverTx recovers transaction id unless a running apply holds it. ok
// is false when there was nothing to report.
func recoverTx(dir, id string) (Recovered, bool, error) {
	recPath, committedPath, _, lockPath := journalFiles(dir, id)
	lock, err := lockFile(lockPath, false)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return Recovered{}, false, nil // a running apply holds it
	}
	if err != nil {
		return Recovered{}, false, fmt.Errorf("locking apply journal %s: %w", id, err)
	}
	j := &journal{dir: dir, rec: journalRecord{TxID: id}, lock: lock}
	defer j.close()
	data, err := os.ReadFile(recPath)
	if errors.Is(err, os.ErrNotExist) {
		// Never written whole: nothing reached the repository.
		j.remove()
		return Recovered{}, false, nil
	}
	if err != nil {
		return Recovered{}, false, fmt.Errorf("reading apply journal %s: %w", id, err)
	}
	if err := json.Unmarshal(data, &j.rec); err != nil || j.rec.Version != journalVersion || j.rec.TxID != id {
		return Recovered{}, false, fmt.Errorf("apply journal %s is not a journal this corral reads (left in place): %v", recPath, err)
	}
	rc := Recovered{TxID: id, Repo: j.rec.Repo}
	stuck := func(reason string) (Recovered, bool, error) {
		rc.Outcome, rc.Left = OutcomeStuck, []Problem{{Path: j.rec.Repo, Reason: reason}}
		j.markStuck(rc.Left)
		return rc, true, nil
	}
	r, err := openRepo(j.rec.Repo)
	if err != nil {
		return stuck(fmt.Sprintf("cannot open the repository: %v", err))
	}
	defer r.close()
	if st, err := r.root.Fstat(); err != nil || uint64(st.Dev) != j.rec.RepoDev || uint64(st.Ino) != j.rec.RepoIno {
		return stuck("the directory at this path is not the repository the apply wrote (moved or replaced); nothing touched")
	}
	t := &tx{id: id, r: r, j: j, staging: j.rec.Staging, steps: j.rec.Steps}
	if _, err := os.Stat(committedPath); err == nil {
		if left := t.discard(true); len(left) > 0 {
			rc.Outcome, rc.Left = OutcomeStuck, left
			j.markStuck(left)
			return rc, true, nil
		}
		t.pruneEmptyDirs()
		j.remove()
		rc.Outcome = OutcomeCommitted
		return rc, true, nil
	}
	if left := t.recoverSteps(); len(left) > 0 {
		rc.Outcome, rc.Left = OutcomeStuck, left
		j.markStuck(left)
		return rc, true, nil
	}
	j.remove()
	rc.Outcome = OutcomeRolledBack
	return rc, true, nil
}
