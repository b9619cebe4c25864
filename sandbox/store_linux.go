package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/version"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/mounts/hidden"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// The store: every session, ephemeral or persistent, lives in
// StateDir/sessions/<id>/ (0700):
//
//	session.json  the SessionRecord: what the launcher fixed
//	profile.yaml  the profile as loaded at creation (re-parsed, never re-read
//	              from its file: an edited profile cannot widen the session)
//	hidden.json   the hidden set computed from the base repository at
//	              creation (an ignore file written later changes nothing)
//	inuse         flock'ed shared by every process that has the session
//	              open, for as long as it has it open: a session nobody
//	              holds may be swept (ephemeral, half-made) or pruned
//	              (expired); its mtime is the session's last use
//	lock          flock'ed exclusively while a file tool writes and while
//	              violations.json changes, so corral processes sharing
//	              the session agree
//	violations.json  the change set's violations a call was charged with
//	              (CallChanges); written by corral after each call
//	layout/       the host mounts (mounts.Prepare), which stay mounted
//	              between invocations and corral processes
//
// A session directory is made under the name .new-<id>, filled (inuse
// first, then the record, the profile and the hidden set, each synced)
// and renamed to <id>: a directory named <id> always has a complete
// record. Files but violations.json are written once, at creation;
// nothing an agent does reaches them.
const (
	recordFile  = "session.json"
	profileFile = "profile.yaml"
	hiddenFile  = "hidden.json"
	inUseFile   = "inuse"
	lockFile    = "lock"
	layoutDir   = "layout"
	newPrefix   = ".new-"
	// ownerFile is the pid file of sessions made before the store kept
	// records for ephemeral sessions; gc still honours it.
	ownerFile = "owner.pid"
)

// SessionRecord is what a session's session.json holds.
type SessionRecord struct {
	ID string `json:"id"`
	// Repo is the repository root (absolute).
	Repo string `json:"repo"`
	// Profile is how the launcher named the profile: a built-in name or
	// an absolute file path. The profile itself is snapshot in
	// profile.yaml; ProfileName is its name field.
	Profile     string `json:"profile"`
	ProfileName string `json:"profile_name"`
	// WriteDir, Page and AgentID are the capability, as SessionConfig.
	WriteDir string `json:"write_dir,omitempty"`
	Page     string `json:"page,omitempty"`
	AgentID  string `json:"agent_id,omitempty"`
	ReadOnly bool   `json:"read_only"`
	// Scope is the resulting write scope: a directory ("openwiki/") or a
	// page; "" when read-only.
	Scope   string    `json:"scope"`
	Created time.Time `json:"created"`
	// Version is the corral that created the session.
	Version string `json:"corral_version"`
	// Ephemeral sessions (NewSession) belong to the process that made
	// them and end with it; persistent ones (CreateSession) end by
	// RemoveSession, or by Prune once idle for IdleTTL.
	Ephemeral bool `json:"ephemeral,omitempty"`
	// IdleTTL is how long the session may go unused (a Go duration);
	// records made before it existed get profiles.DefaultIdleTTL.
	IdleTTL string `json:"idle_ttl,omitempty"`
	// RepoDev and RepoIno identify the repository directory the session
	// was made on (stat(2) of Repo then); a session whose mounts must be
	// made again (after a reboot) refuses a Repo that is no longer that
	// directory. 0 in records made before they existed.
	RepoDev uint64 `json:"repo_dev,omitempty"`
	RepoIno uint64 `json:"repo_ino,omitempty"`
}

// checkRepoIdentity checks that the directory mounted at the layout's
// repository bind (or, before mounting, Repo itself) is the one the
// record names: the session never mounts another directory than the one
// it was made on (a path replaced by another directory, or by a
// symbolic link to one its owner could not read). Records without an
// identity pass.
func (r *SessionRecord) checkRepoIdentity(path string) error {
	if r.RepoIno == 0 {
		return nil
	}
	var st unix.Stat_t
	err := unix.Stat(path, &st)
	if err == nil && uint64(st.Dev) == r.RepoDev && st.Ino == r.RepoIno {
		return nil
	}
	return fmt.Errorf("session %s: repository %s: %w: it is not the directory the session was made on (replaced, or a symbolic link now); remove it with `corral session rm %s`",
		r.ID, r.Repo, errdefs.ErrFailedPrecondition, r.ID)
}

// idleTTL returns the record's idle TTL.
func (r *SessionRecord) idleTTL() time.Duration {
	if d, err := time.ParseDuration(r.IdleTTL); err == nil && d > 0 {
		return d
	}
	return profiles.DefaultIdleTTL
}

// SessionInfo is a persistent session as `corral session ls` shows it.
type SessionInfo struct {
	SessionRecord
	// Mounted says the session's host mounts are present.
	Mounted bool `json:"mounted"`
	// InUse says a live process has the session open.
	InUse bool `json:"in_use"`
	// LastUsed is when a call last ran in it (or it was opened).
	LastUsed time.Time `json:"last_used"`
	// Expires is LastUsed plus the idle TTL: from then on, unless a
	// process has it open, Prune removes it (keeping its change set).
	Expires time.Time `json:"expires"`
	// Err is set when the session's record cannot be read.
	Err string `json:"error,omitempty"`
}

// Version returns the version of this corral build, as every surface
// reports it (internal/version.String).
func Version() string { return version.String() }

// sessionIDPattern is the form of a session id (newSessionID).
var sessionIDPattern = regexp.MustCompile(`^[0-9a-f]{12}$`)

// NewSessionID returns a new random session id (12 lower-case hex
// digits), for SessionConfig.ID.
func NewSessionID() (string, error) { return newSessionID() }

func newSessionID() (string, error) {
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(id[:]), nil
}

// sessionsDir is where the executor's sessions live.
func (e *Executor) sessionsDir() string { return filepath.Join(e.cfg.StateDir, "sessions") }

func (e *Executor) sessionDir(id string) (string, error) {
	if !sessionIDPattern.MatchString(id) {
		return "", fmt.Errorf("session id %q: %w: want 12 lower-case hex digits", id, errdefs.ErrInvalidArgument)
	}
	return filepath.Join(e.sessionsDir(), id), nil
}

// store is one session's directory, held open (inuse, shared) by this
// process until release.
type store struct {
	dir    string
	record SessionRecord
	inuse  *os.File
}

// storeFile is one file createStore writes.
type storeFile struct {
	name string
	data []byte
}

// createStore makes the session directory root/<id> for rec: under the
// name .new-<id> first, holding inuse, then the files, then the rename.
func createStore(root string, rec SessionRecord, files []storeFile) (_ *store, retErr error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	// From the mkdir until inuse is held, the creators' lock (shared)
	// says a live creator may hold the staging directory: the sweep
	// takes it exclusively to tell a crash's staging directory from one
	// being made (sweepStaging).
	unlock, err := lockCreators(root, unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer func() { unlock() }()
	staging := filepath.Join(root, newPrefix+rec.ID)
	if err := os.Mkdir(staging, 0o700); err != nil {
		return nil, fmt.Errorf("creating session directory: %w", err)
	}
	st := &store{dir: staging, record: rec}
	defer func() {
		if retErr != nil {
			st.release()
			_ = os.RemoveAll(staging)
		}
	}()
	f, err := lockInUse(staging, true)
	if err != nil {
		return nil, err
	}
	st.inuse = f
	unlock()
	unlock = func() {}
	recJSON, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	files = append([]storeFile{{recordFile, recJSON}}, files...)
	files = append(files, storeFile{lockFile, nil})
	for _, f := range files {
		if err := writeFileSync(filepath.Join(staging, f.name), f.data); err != nil {
			return nil, fmt.Errorf("recording the session: %w", err)
		}
	}
	dir := filepath.Join(root, rec.ID)
	if err := os.Rename(staging, dir); err != nil {
		return nil, fmt.Errorf("recording the session: %w", err)
	}
	st.dir = dir
	return st, nil
}

// CreatorsLock is the file, in the sessions directory, that every
// creator holds shared between making its staging directory and holding
// the directory's inuse (createStore), and the sweep exclusively while it
// judges staging directories (tryStaging). It stays for good once made:
// the one entry of STATE_DIR/sessions that is neither a session nor
// staging.
const CreatorsLock = ".create.lock"

// lockCreators takes how (unix.LOCK_SH, or unix.LOCK_EX|unix.LOCK_NB) on
// root's CreatorsLock; the caller calls unlock.
func lockCreators(root string, how int) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(root, CreatorsLock), os.O_RDONLY|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating session directory: %w", err)
	}
	if err := flock(f, how); err != nil {
		f.Close()
		return nil, err
	}
	return sync.OnceFunc(func() {
		_ = flock(f, unix.LOCK_UN)
		f.Close()
	}), nil
}

// tryStaging holds the staging directory dir (a half-made session of
// root, the sessions directory) exclusively when no live creator can
// hold it: none is between its mkdir and its inuse lock (the creators'
// lock is free) and none holds its inuse. When a creator is in that
// window right now, only a staging directory older than a minute is
// taken for a crash's (no creation takes that long to lock inuse).
func tryStaging(root, dir string, now time.Time) (release func(), ok bool) {
	unlock, err := lockCreators(root, unix.LOCK_EX|unix.LOCK_NB)
	if err != nil {
		if st, err := os.Lstat(dir); err != nil || now.Sub(st.ModTime()) < time.Minute {
			return nil, false
		}
		return tryExclusive(dir)
	}
	defer unlock()
	return tryExclusive(dir)
}

// lockInUse opens dir/inuse (creating it when create is set) and takes
// its shared lock, which the caller holds while it has the session open.
func lockInUse(dir string, create bool) (*os.File, error) {
	flags := os.O_RDONLY
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(filepath.Join(dir, inUseFile), flags, 0o600)
	if err != nil {
		return nil, err
	}
	if err := flock(f, unix.LOCK_SH); err != nil {
		f.Close()
		return nil, fmt.Errorf("holding session %s: %w", filepath.Base(dir), err)
	}
	return f, nil
}

// flock takes how on f, retrying when a signal interrupts the wait.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// openStore opens the session directory dir: its record is read and its
// inuse lock held shared; use records the opening as a use (touch). An
// unknown session wraps errdefs.ErrNotFound.
func openStore(dir string, use bool) (*store, error) {
	rec, err := readRecord(dir)
	if err != nil {
		return nil, err
	}
	// Sessions made before inuse existed get one.
	f, err := lockInUse(dir, true)
	if err != nil {
		return nil, err
	}
	// A remover may have held the lock while we waited: the session must
	// still be there.
	if _, err := os.Lstat(filepath.Join(dir, recordFile)); err != nil {
		f.Close()
		return nil, fmt.Errorf("session %s: %w", filepath.Base(dir), errdefs.ErrNotFound)
	}
	st := &store{dir: dir, record: rec, inuse: f}
	if use {
		st.touch()
	}
	return st, nil
}

// touch records a use of the session: inuse's mtime.
func (st *store) touch() {
	now := time.Now()
	_ = os.Chtimes(filepath.Join(st.dir, inUseFile), now, now)
}

// release lets go of the session in this process (inuse).
func (st *store) release() {
	if st.inuse != nil {
		_ = flock(st.inuse, unix.LOCK_UN)
		st.inuse.Close()
		st.inuse = nil
	}
}

// lock takes the session's cross-process exclusive lock (the lock file,
// through a new open file description each time: it is never taken twice
// by one call path); the caller must call the returned function.
func (st *store) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(st.dir, lockFile), os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("locking session: %w", err)
	}
	if err := flock(f, unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking session: %w", err)
	}
	return func() {
		_ = flock(f, unix.LOCK_UN)
		f.Close()
	}, nil
}

// profile and hiddenSet read the snapshots taken at creation.
func (st *store) profile() (*profiles.Profile, error) {
	data, err := os.ReadFile(filepath.Join(st.dir, profileFile))
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", st.record.ID, err)
	}
	prof, err := profiles.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("session %s: the recorded profile: %w", st.record.ID, err)
	}
	return prof, nil
}

func (st *store) hiddenSet() (*hidden.Set, error) {
	data, err := os.ReadFile(filepath.Join(st.dir, hiddenFile))
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", st.record.ID, err)
	}
	hs, err := hidden.Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", st.record.ID, err)
	}
	return hs, nil
}

// config is the SessionConfig the record fixed (with the recorded
// profile).
func (st *store) config(prof *profiles.Profile) SessionConfig {
	r := st.record
	return SessionConfig{Repo: r.Repo, Profile: prof, Page: r.Page, WriteDir: r.WriteDir, AgentID: r.AgentID, ReadOnly: r.ReadOnly}
}

func (st *store) layoutDir() string { return filepath.Join(st.dir, layoutDir) }

// attach re-attaches the session's mounts (mounts.Open) under the
// session lock, or makes them when they were never made. When they are
// gone (the machine rebooted): a read-only session is prepared again (it
// lost nothing); a writable one fails with errdefs.ErrDataLoss, because
// its write area lived on a tmpfs.
func (st *store) attach(plan mounts.Plan, hs *hidden.Set) (*mounts.Layout, error) {
	unlock, err := st.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	id, dir := st.record.ID, st.layoutDir()
	l, err := mounts.Open(dir, plan)
	switch {
	case err == nil:
		return l, nil
	case !errors.Is(err, mounts.ErrNotMounted):
		return nil, fmt.Errorf("session %s: %w; remove it with `corral session rm %s`", id, err, id)
	}
	if _, err := os.Lstat(dir); err == nil {
		// It was mounted once; nothing is now (mounts.Open checked).
		if !plan.ReadOnly {
			return nil, fmt.Errorf("session %s: %w: its write area was a tmpfs and its mounts are gone (the machine rebooted, or they were unmounted), so what it wrote is lost; remove it with `corral session rm %s`",
				id, errdefs.ErrDataLoss, id)
		}
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("session %s: clearing its old layout: %w", id, err)
		}
	}
	if hs == nil {
		return nil, fmt.Errorf("session %s: %w: its mounts are not there", id, mounts.ErrNotMounted)
	}
	if err := st.record.checkRepoIdentity(st.record.Repo); err != nil {
		return nil, err
	}
	l, err = mounts.Prepare(dir, plan, hs)
	if err != nil {
		return nil, fmt.Errorf("preparing session mounts: %w", err)
	}
	// What was mounted, not the path checked a moment before.
	if err := st.record.checkRepoIdentity(l.Repo); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

func writeFileSync(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readRecord reads a session's record. A missing record wraps
// errdefs.ErrNotFound, an unreadable one errdefs.ErrDataLoss.
func readRecord(dir string) (SessionRecord, error) {
	var rec SessionRecord
	data, err := os.ReadFile(filepath.Join(dir, recordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return rec, fmt.Errorf("session %s: %w", filepath.Base(dir), errdefs.ErrNotFound)
	}
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, fmt.Errorf("session %s: reading %s: %w: %v", filepath.Base(dir), recordFile, errdefs.ErrDataLoss, err)
	}
	return rec, nil
}

// Sessions lists the persistent sessions of the state directory, oldest
// first. A directory whose record cannot be read is listed with Err. It
// needs no containerd.
func (e *Executor) Sessions() ([]SessionInfo, error) {
	entries, err := os.ReadDir(e.sessionsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return []SessionInfo{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []SessionInfo{}
	for _, d := range entries {
		if strings.HasPrefix(d.Name(), ".") {
			continue
		}
		dir := filepath.Join(e.sessionsDir(), d.Name())
		if _, err := os.Lstat(filepath.Join(dir, recordFile)); err != nil {
			continue // half-made, or an old one-call session
		}
		info := SessionInfo{}
		rec, err := readRecord(dir)
		if err != nil {
			info.ID, info.Err = d.Name(), err.Error()
		} else {
			if rec.Ephemeral {
				continue // one process's own
			}
			info.SessionRecord = rec
		}
		ms, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(filepath.Join(dir, layoutDir)))
		info.Mounted = len(ms) > 0
		info.LastUsed = lastUse(dir, rec.Created)
		info.Expires = info.LastUsed.Add(rec.idleTTL())
		info.InUse = inUse(dir)
		out = append(out, info)
	}
	sortSessions(out)
	return out, nil
}

// lastUse is the mtime of dir/inuse, else created.
func lastUse(dir string, created time.Time) time.Time {
	if st, err := os.Stat(filepath.Join(dir, inUseFile)); err == nil {
		return st.ModTime().UTC().Truncate(time.Second)
	}
	return created
}

// inUse reports whether a live process holds the session dir open: its
// inuse lock cannot be taken exclusively at once.
func inUse(dir string) bool {
	release, ok := tryExclusive(dir)
	if ok {
		release()
	}
	return !ok
}

// tryExclusive takes dir/inuse exclusively without waiting: nobody has
// the session open until release is called. ok is false when a process
// holds it. A missing inuse file counts as free.
func tryExclusive(dir string) (release func(), ok bool) {
	f, err := os.OpenFile(filepath.Join(dir, inUseFile), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return func() {}, true
	}
	if err != nil {
		return nil, false
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, true
}

// removeSessionDir unmounts everything under dir and removes it; nothing
// is removed while a mount is left.
func removeSessionDir(dir string) error {
	if _, err := mounts.Sweep(dir); err != nil {
		return fmt.Errorf("unmounting %s: %w", dir, err)
	}
	if left, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir)); err != nil || len(left) > 0 {
		return fmt.Errorf("unmounting %s: %w: %d mounts left", dir, errdefs.ErrFailedPrecondition, len(left))
	}
	return os.RemoveAll(dir)
}
