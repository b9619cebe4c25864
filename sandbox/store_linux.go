package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/version"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/mounts/hidden"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/seccomp"
	"github.com/moby/sys/mountinfo"
	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"
)

// A persistent session lives in StateDir/sessions/<id>/ (0700):
//
//	session.json  the SessionRecord: what the launcher fixed
//	profile.yaml  the profile as loaded at creation (re-parsed, never re-read
//	              from its file: an edited profile cannot widen the session)
//	hidden.json   the hidden set computed from the base repository at
//	              creation (an ignore file written later changes nothing)
//	lock          flock'ed while mounts are attached, while a file tool
//	              writes and while violations.json changes, so corral
//	              processes sharing the session agree
//	violations.json  the change set's violations a call was charged with
//	              (CallChanges); written by corral after each call
//	layout/       the host mounts (mounts.Prepare), which stay mounted
//	              between invocations and corral processes
//
// Files but violations.json are written once, at creation; nothing an
// agent does reaches them.
const (
	recordFile  = "session.json"
	profileFile = "profile.yaml"
	hiddenFile  = "hidden.json"
	lockFile    = "lock"
	layoutDir   = "layout"
)

// SessionRecord is what a persistent session's session.json holds.
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
}

// SessionInfo is a persistent session as `corral session ls` shows it.
type SessionInfo struct {
	SessionRecord
	// Mounted says the session's host mounts are present.
	Mounted bool `json:"mounted"`
	// Err is set when the session's record cannot be read.
	Err string `json:"error,omitempty"`
}

// Version returns the version of this corral build, as every surface
// reports it (internal/version.String).
func Version() string { return version.String() }

// sessionIDPattern is the form of a session id (newSessionID).
var sessionIDPattern = regexp.MustCompile(`^[0-9a-f]{12}$`)

func newSessionID() (string, error) {
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(id[:]), nil
}

// sessionStore is the state directory of one persistent session.
type sessionStore struct {
	dir    string
	record SessionRecord
}

func (e *Executor) sessionDir(id string) (string, error) {
	if !sessionIDPattern.MatchString(id) {
		return "", fmt.Errorf("session id %q: %w: want 12 lower-case hex digits", id, errdefs.ErrInvalidArgument)
	}
	return filepath.Join(e.cfg.StateDir, "sessions", id), nil
}

// CreateSession creates a persistent session: the capability (cfg) is
// fixed now and recorded under the state directory with the profile as
// loaded and the hidden set computed from the base repository; the host
// mounts are made now and stay until RemoveSession. Each invocation is
// still a fresh container, and writes add up across invocations and
// across corral processes (OpenSession). profileSource is how the
// launcher named the profile, for the record. The caller must call Close
// (which keeps everything).
func (e *Executor) CreateSession(ctx context.Context, cfg SessionConfig, profileSource string) (s *Session, retErr error) {
	if err := mounts.CheckPaths(cfg.Repo, e.cfg.StateDir); err != nil {
		return nil, err
	}
	p, err := NewPolicy(cfg)
	if err != nil {
		return nil, err
	}
	id, err := newSessionID()
	if err != nil {
		return nil, err
	}
	if err := e.auditSessionCreated(ctx, id, p); err != nil {
		return nil, err
	}
	dir, _ := e.sessionDir(id)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating session directory: %w", err)
	}
	defer func() {
		if retErr != nil {
			_ = removeSessionDir(dir)
		}
	}()
	rec := SessionRecord{
		ID: id, Repo: p.Repo, Profile: profileSource, ProfileName: cfg.Profile.Name,
		WriteDir: cfg.WriteDir, Page: p.Scope.Page, AgentID: cfg.AgentID, ReadOnly: cfg.ReadOnly,
		Created: time.Now().UTC().Truncate(time.Second), Version: Version(),
	}
	switch {
	case cfg.ReadOnly:
	case p.Scope.Page != "":
		rec.Scope = p.Scope.Page
	default:
		rec.Scope = p.Scope.Dir + "/"
	}
	prof, err := yaml.Marshal(cfg.Profile)
	if err != nil {
		return nil, fmt.Errorf("recording the profile: %w", err)
	}
	hidden, err := json.Marshal(p.hidden)
	if err != nil {
		return nil, fmt.Errorf("recording the hidden set: %w", err)
	}
	recJSON, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	// session.json first: from then on gc knows the directory is a
	// persistent session's and leaves it alone.
	for _, f := range []struct {
		name string
		data []byte
	}{{recordFile, recJSON}, {profileFile, prof}, {hiddenFile, hidden}, {lockFile, nil}} {
		if err := writeFileSync(filepath.Join(dir, f.name), f.data); err != nil {
			return nil, fmt.Errorf("recording the session: %w", err)
		}
	}
	s, err = e.newSession(p, id, &sessionStore{dir: dir, record: rec})
	if err != nil {
		return nil, err
	}
	if err := s.prepare(); err != nil {
		return nil, err
	}
	return s, nil
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

// newSession wraps a policy into a session of this executor.
func (e *Executor) newSession(p *Policy, id string, store *sessionStore) (*Session, error) {
	sc, err := seccomp.LoadDefault()
	if err != nil {
		return nil, err
	}
	s := &Session{Policy: p, ID: id, exec: e, seccomp: sc, store: store}
	if store != nil {
		// Containers of one session made by several corral processes must
		// not share names (their argv files are named after them too).
		s.seq.Store(int64(os.Getpid()) << 20)
	}
	return s, nil
}

// readRecord reads a persistent session's record.
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

// OpenSession re-opens a persistent session made by CreateSession, in
// this process or an earlier one: the capability, the profile and the
// hidden set are the ones recorded at creation (nothing is recomputed
// from the repository or re-read from a profile file), and the host
// mounts are re-attached (mounts.Open).
//
// When the mounts are gone (the machine rebooted): a read-only session is
// prepared again (it lost nothing); a writable one fails with an error
// wrapping errdefs.ErrDataLoss, because its write area lived on a tmpfs
// and what it wrote is lost; such a session can only be removed. An
// unknown id wraps errdefs.ErrNotFound. The caller must call Close.
func (e *Executor) OpenSession(ctx context.Context, id string) (*Session, error) {
	dir, err := e.sessionDir(id)
	if err != nil {
		return nil, err
	}
	rec, err := readRecord(dir)
	if err != nil {
		return nil, err
	}
	profData, err := os.ReadFile(filepath.Join(dir, profileFile))
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	prof, err := profiles.Parse(profData)
	if err != nil {
		return nil, fmt.Errorf("session %s: the recorded profile: %w", id, err)
	}
	hiddenData, err := os.ReadFile(filepath.Join(dir, hiddenFile))
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	hidden, err := hidden.Unmarshal(hiddenData)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	cfg := SessionConfig{Repo: rec.Repo, Profile: prof, Page: rec.Page, WriteDir: rec.WriteDir, AgentID: rec.AgentID, ReadOnly: rec.ReadOnly}
	p, err := newPolicy(cfg, hidden)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	s, err := e.newSession(p, id, &sessionStore{dir: dir, record: rec})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	err = s.attachLocked()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Record returns a persistent session's record (nil for a one-shot one).
func (s *Session) Record() *SessionRecord {
	if s.store == nil {
		return nil
	}
	r := s.store.record
	return &r
}

// lock takes the session's cross-process lock; the caller must call the
// returned function.
func (st *sessionStore) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(st.dir, lockFile), os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("locking session: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking session: %w", err)
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// attachLocked re-attaches a persistent session's mounts, or makes them
// when the session is new. s.mu must be held.
func (s *Session) attachLocked() error {
	unlock, err := s.store.lock()
	if err != nil {
		return err
	}
	defer unlock()
	dir := filepath.Join(s.store.dir, layoutDir)
	l, err := mounts.Open(dir, s.plan)
	switch {
	case err == nil:
		s.setLayout(l)
		return nil
	case !errors.Is(err, mounts.ErrNotMounted):
		return fmt.Errorf("session %s: %w; remove it with `corral session rm %s`", s.ID, err, s.ID)
	}
	if _, err := os.Lstat(dir); err == nil {
		// It was mounted once; nothing is now (mounts.Open checked).
		if !s.plan.ReadOnly {
			return fmt.Errorf("session %s: %w: its write area was a tmpfs and its mounts are gone (the machine rebooted, or they were unmounted), so what it wrote is lost; remove it with `corral session rm %s`",
				s.ID, errdefs.ErrDataLoss, s.ID)
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("session %s: clearing its old layout: %w", s.ID, err)
		}
	}
	l, err = mounts.Prepare(dir, s.plan, s.hidden)
	if err != nil {
		return fmt.Errorf("preparing session mounts: %w", err)
	}
	s.setLayout(l)
	return nil
}

// Sessions lists the persistent sessions of the state directory, oldest
// first. A directory whose record cannot be read is listed with Err.
func (e *Executor) Sessions() ([]SessionInfo, error) {
	root := filepath.Join(e.cfg.StateDir, "sessions")
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return []SessionInfo{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []SessionInfo{}
	for _, d := range entries {
		dir := filepath.Join(root, d.Name())
		if _, err := os.Lstat(filepath.Join(dir, recordFile)); err != nil {
			continue // a one-shot session of `corral run`
		}
		info := SessionInfo{}
		rec, err := readRecord(dir)
		if err != nil {
			info.ID, info.Err = d.Name(), err.Error()
		} else {
			info.SessionRecord = rec
		}
		ms, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(filepath.Join(dir, layoutDir)))
		info.Mounted = len(ms) > 0
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// RemoveSession removes a persistent session: its containers (a running
// invocation is killed), its host mounts (unmounted deepest first, never
// removed across a mount) and its state directory. What the session wrote
// is gone with it; collect its change set first. An unknown id wraps
// errdefs.ErrNotFound.
func (e *Executor) RemoveSession(ctx context.Context, id string) error {
	dir, err := e.sessionDir(id)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(filepath.Join(dir, recordFile)); err != nil {
		return fmt.Errorf("session %s: %w", id, errdefs.ErrNotFound)
	}
	cctx := e.Context(ctx)
	filter := fmt.Sprintf("labels.%q==corral,labels.%q==%q,labels.%q==%q", LabelOwner, LabelStateDir, e.cfg.StateDir, LabelSession, id)
	cs, err := e.client.Containers(cctx, filter)
	if err != nil {
		return fmt.Errorf("listing the session's containers: %w", err)
	}
	var errs []error
	for _, c := range cs {
		if err := reap(cctx, c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return removeSessionDir(dir)
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

// persistent reports whether the session directory dir belongs to a
// persistent session (gc leaves those to RemoveSession).
func persistent(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, recordFile))
	return err == nil
}
