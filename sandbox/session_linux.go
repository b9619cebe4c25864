package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/internal/initctl"
	"github.com/corral-sandbox/corral/internal/testhook"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/mounts/hidden"
	"github.com/corral-sandbox/corral/seccomp"
	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"
)

// Session is one session open in this process: its immutable Policy, its
// store (the on-disk record this process holds open), its host layout
// (attached when the session opens, never later), the runner that makes
// and runs its containers, the pool of containers created ahead and, in
// a long-lived owner, the repository watch. Each call is a fresh
// container. The caller must call Close.
type Session struct {
	*Policy
	ID string

	exec   *Executor
	record SessionRecord
	runner *runner
	pool   *pool

	// readyMu guards the parts made on the session's first need (ready):
	// the store and the layout of an ephemeral session (a persistent one
	// has them from its creation), and the watch.
	readyMu sync.Mutex
	// store is the session's directory, held open by this process.
	store *store
	// layout is the host mounts, attached once, never changed after.
	layout *mounts.Layout
	// watch is the repository watch of a long-lived owner (not Cold);
	// nil in a one-call process, whose check is the rescan at open.
	watch *watcher
	// pending are the store's files of an ephemeral session not made yet.
	pending []storeFile

	// calls is held shared by every call until its container has exited,
	// and exclusively by Changes: the write area is never read while a
	// container of the session can still change it.
	calls sync.RWMutex
	// fileMu serializes the session's file-tool writes in this process
	// (store.lock does across processes).
	fileMu sync.Mutex

	mu     sync.Mutex
	closed bool
	failed error // the session failed closed (fail)
	// charged are the violations a call was charged with (CallChanges)
	// in an ephemeral session; a persistent one keeps them in its store.
	charged []changeset.Problem

	bg sync.WaitGroup
}

// errClosed is the error of a call on a closed session.
var errClosed = fmt.Errorf("session is closed: %w", errdefs.ErrFailedPrecondition)

// NewSession creates an ephemeral session: the lifecycle of
// CreateSession, except that its store and mounts are made at its first
// call (so a session whose calls are all refused leaves no trace), and
// that Close removes it (containers, mounts, state). See CreateSession
// for the errors.
func (e *Executor) NewSession(ctx context.Context, cfg SessionConfig) (*Session, error) {
	return e.create(ctx, cfg, "", true)
}

// CreateSession creates a persistent session: the capability (cfg) is
// fixed now and recorded under the state directory with the profile as
// loaded and the hidden set computed from the base repository; the host
// mounts are made now and stay until RemoveSession, or until the session
// has gone unused for its idle TTL (Prune). Each call is still a fresh
// container, and writes add up across calls and across corral processes
// (OpenSession). profileSource is how the launcher named the profile, for
// the record. The caller must call Close (which keeps everything).
//
// Errors: see NewPolicy; a repository that holds the state directory, or
// that the state directory holds, is errdefs.ErrInvalidArgument
// (mounts.CheckPaths), as is an IdleTTL longer than the profile's.
func (e *Executor) CreateSession(ctx context.Context, cfg SessionConfig, profileSource string) (*Session, error) {
	return e.create(ctx, cfg, profileSource, false)
}

func (e *Executor) create(ctx context.Context, cfg SessionConfig, profileSource string, ephemeral bool) (_ *Session, retErr error) {
	if err := mounts.CheckPaths(cfg.Repo, e.cfg.StateDir); err != nil {
		return nil, err
	}
	if cfg.Profile == nil {
		return nil, fmt.Errorf("session: %w: no profile", errdefs.ErrInvalidArgument)
	}
	ttl, err := cfg.idleTTL()
	if err != nil {
		return nil, err
	}
	id := cfg.ID
	if id == "" {
		if id, err = newSessionID(); err != nil {
			return nil, err
		}
	}
	dir, err := e.sessionDir(id)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{dir, filepath.Join(e.sessionsDir(), newPrefix+id)} {
		if _, err := os.Lstat(d); err == nil {
			return nil, fmt.Errorf("session %s: %w", id, errdefs.ErrAlreadyExists)
		}
	}
	p, err := newPolicy(cfg, nil, filepath.Join(dir, layoutDir))
	if err != nil {
		return nil, err
	}
	if err := e.auditSessionCreated(ctx, id, p); err != nil {
		return nil, err
	}
	rec := SessionRecord{
		ID: id, Repo: p.Repo, Profile: profileSource, ProfileName: cfg.Profile.Name,
		WriteDir: cfg.WriteDir, Page: p.Scope.Page, AgentID: cfg.AgentID, ReadOnly: cfg.ReadOnly,
		Created: timeNow(), Version: Version(), Ephemeral: ephemeral, IdleTTL: ttl.String(),
	}
	var repoSt unix.Stat_t
	if err := unix.Stat(p.Repo, &repoSt); err != nil {
		return nil, fmt.Errorf("repository %s: %w", p.Repo, err)
	}
	rec.RepoDev, rec.RepoIno = uint64(repoSt.Dev), repoSt.Ino
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
	hs, err := json.Marshal(p.hidden)
	if err != nil {
		return nil, fmt.Errorf("recording the hidden set: %w", err)
	}
	files := []storeFile{{profileFile, prof}, {hiddenFile, hs}}
	if ephemeral {
		// Made on the first call (ready): a session whose calls are all
		// refused leaves no trace.
		return e.open(p, rec, nil, nil, files, cfg.WarmOwner)
	}
	st, err := createStore(e.sessionsDir(), rec, files)
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			st.release()
			_ = removeSessionDir(st.dir)
		}
	}()
	p.plan.Shared = e.cfg.SharedMounts
	p.plan.CopyAs = cfg.CopyAs
	l, err := st.attach(p.plan, p.hidden)
	if err != nil {
		return nil, err
	}
	s, err := e.open(p, rec, st, l, nil, cfg.WarmOwner)
	if err != nil {
		return nil, err
	}
	s.startWatch()
	return s, nil
}

// OpenSession opens a persistent session made by CreateSession, in this
// process or another: the capability, the profile and the hidden set are
// the ones recorded at creation (nothing is re-read from a profile file),
// the host mounts are re-attached, and the repository is rescanned like
// a new session's: a path the rules hide that appeared since the
// session's start, and that its whiteouts therefore do not cover, fails
// the open (errdefs.ErrFailedPrecondition, naming the path). A long-lived
// owner then keeps watching the repository.
//
// Errors: an unknown id wraps errdefs.ErrNotFound; a repository that
// moved or vanished wraps errdefs.ErrNotFound and says how to reach the
// writes (ForChanges); mounts that are gone (the machine rebooted) wrap
// errdefs.ErrDataLoss for a writable session, whose write area lived on
// a tmpfs; a read-only one is prepared again. The caller must call Close.
func (e *Executor) OpenSession(ctx context.Context, id string, opts ...OpenOption) (_ *Session, retErr error) {
	var o openOptions
	for _, opt := range opts {
		opt(&o)
	}
	dir, err := e.sessionDir(id)
	if err != nil {
		return nil, err
	}
	st, err := openStore(dir, !o.notAUse)
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			st.release()
		}
	}()
	if st.record.Ephemeral {
		return nil, fmt.Errorf("session %s: %w: it is an ephemeral session of another process", id, errdefs.ErrNotFound)
	}
	prof, err := st.profile()
	if err != nil {
		return nil, err
	}
	hs, err := st.hiddenSet()
	if err != nil {
		return nil, err
	}
	cfg := st.config(prof)
	var p *Policy
	if o.changesOnly {
		p, err = policyOf(cfg, st.record.Repo, hs, st.layoutDir())
	} else {
		p, err = newPolicy(cfg, hs, st.layoutDir())
		if errdefs.IsNotFound(err) {
			err = fmt.Errorf("%w; its writes stay reachable: `corral session diff %s --format patch`", err, id)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	if !o.changesOnly {
		// Whatever appeared in the repository since the session started
		// must be covered, whichever process runs it now.
		if err := hidden.Rescan(p.Repo, hs); err != nil {
			return nil, fmt.Errorf("session %s: %w", id, err)
		}
	}
	var l *mounts.Layout
	switch {
	case o.changesOnly && p.plan.ReadOnly:
		l = mounts.LayoutAt(st.layoutDir(), p.plan) // it wrote nothing
	case o.changesOnly:
		l, err = mounts.Open(st.layoutDir(), p.plan)
		if errors.Is(err, mounts.ErrNotMounted) {
			err = fmt.Errorf("session %s: %w: its write area was a tmpfs and its mounts are gone (the machine rebooted, or they were unmounted), so what it wrote is lost", id, errdefs.ErrDataLoss)
		}
	default:
		p.plan.Shared = e.cfg.SharedMounts
		l, err = st.attach(p.plan, hs)
	}
	if err != nil {
		return nil, err
	}
	s, err := e.open(p, st.record, st, l, nil, o.warmOwner)
	if err != nil {
		return nil, err
	}
	if o.changesOnly {
		s.failed = fmt.Errorf("session %s: %w: opened only to read its change set", id, errdefs.ErrFailedPrecondition)
	} else {
		s.startWatch()
	}
	return s, nil
}

// open assembles a session of the executor from its parts. A persistent
// session comes with its store and attached layout; an ephemeral one gets
// them, from files, on its first need (ready). Its containers created
// ahead count against warmOwner's share of the cap ("" for none).
func (e *Executor) open(p *Policy, rec SessionRecord, st *store, l *mounts.Layout, files []storeFile, warmOwner string) (*Session, error) {
	sc, err := seccomp.LoadDefault()
	if err != nil {
		return nil, err
	}
	s := &Session{Policy: p, ID: rec.ID, exec: e, record: rec, store: st, layout: l, pending: files, runner: newRunner(e, rec.ID, p, sc, l)}
	floor, max := p.Profile.Depth(), p.Profile.MaxDepth()
	if e.cfg.Cold {
		floor, max = 0, 0
	}
	s.pool = newPool(floor, max, e.cfg.PoolIdle, e.warm, warmOwner, s.runner.createAhead, s.runner.destroy)
	return s, nil
}

// ready makes what the session's first need needs: the store and the
// layout of an ephemeral session, and the watch. It is called by every
// call and by Changes; later calls find everything made.
func (s *Session) ready() error {
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	if s.layout != nil {
		return nil
	}
	// Close takes readyMu after it marked the session closed: a session
	// closed before its first need makes nothing (readyMu, then mu).
	if err := s.Err(); errors.Is(err, errClosed) {
		return err
	}
	st, err := createStore(s.exec.sessionsDir(), s.record, s.pending)
	if err != nil {
		return err
	}
	// No other process opens an ephemeral session (OpenSession refuses
	// it), so the store's lock is not needed to prepare its mounts; not
	// taking it keeps readyMu below the store lock (the lock order).
	plan := s.plan
	plan.Shared = s.exec.cfg.SharedMounts
	l, err := mounts.Prepare(st.layoutDir(), plan, s.hidden)
	if err != nil {
		st.release()
		_ = removeSessionDir(st.dir)
		return fmt.Errorf("preparing session mounts: %w", err)
	}
	s.store, s.layout, s.pending = st, l, nil
	s.runner.setLayout(l)
	s.startWatch()
	return nil
}

// startWatch starts the repository watch of a long-lived owner (not
// Cold). Where inotify is not available every call rescans instead.
func (s *Session) startWatch() {
	e := s.exec
	if e.cfg.Cold {
		return
	}
	w, err := newWatcher(s.Repo, s.hidden, s.store.dir, s.fail)
	if err != nil {
		fmt.Fprintf(e.cfg.Log, "corral: %v; every call of session %s rescans the repository instead\n", err, s.ID)
	}
	s.watch = w
}

// Warm starts creating the session's containers ahead of its calls now
// rather than after the first call (a long-lived owner that expects
// calls). It makes the session's store and layout if they are not made.
func (s *Session) Warm() error {
	if err := s.ready(); err != nil {
		return err
	}
	s.pool.refill()
	return nil
}

// fail fails the session closed with err: every later call returns err,
// the containers running now are killed (their calls return err, not
// their output) and those created ahead destroyed. Changes still works:
// what the session wrote stays reachable.
func (s *Session) fail(err error) {
	s.mu.Lock()
	if s.failed == nil {
		s.failed = err
	}
	s.mu.Unlock()
	s.runner.stop(err)
	s.pool.stop()
	_ = s.auditOutcome(context.Background(), "the session failed closed", refusalEvent("repository", err))
}

// Err returns the error the session failed closed with (a path the rules
// hide appeared in the repository), errClosed after Close, else nil.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	return s.failed
}

// checkRepo is every call's check that the repository still holds no
// hidden path the session's whiteouts do not cover: the watch's exact
// check in a long-lived owner, a rescan where the watch could not start,
// nothing more in a one-call process (it rescanned when it opened the
// session). A failure fails the session closed.
func (s *Session) checkRepo() error {
	if err := s.Err(); err != nil {
		return err
	}
	var err error
	switch {
	case s.watch != nil:
		err = s.watch.Check()
	case !s.exec.cfg.Cold:
		err = hidden.Rescan(s.Repo, s.hidden)
	}
	if err != nil && errdefs.IsFailedPrecondition(err) {
		s.fail(err)
	}
	return err
}

// CheckRepository is checkRepo for callers outside a call (an apply of
// the session's change set): nil when the session may still be used.
func (s *Session) CheckRepository() error { return s.checkRepo() }

// Exec checks argv and, when permitted, runs it in a fresh container;
// stdout and stderr (may be nil) receive the output as it arrives. A
// refusal is returned as a *allowlist.Refusal with nothing started.
func (s *Session) Exec(ctx context.Context, argv []string, stdout, stderr io.Writer) (*Result, error) {
	d, err := s.Check(argv)
	if err != nil {
		return nil, s.auditRefusal(ctx, "invocation", argv, err)
	}
	res, err := s.execWithoutPolicy(ctx, d.Argv, stdout, stderr)
	if err != nil {
		return res, s.auditFailed(ctx, d.Argv, res, err)
	}
	return res, s.auditOutcome(ctx, "the command ran", audit.Ran(d.Argv, res.ExitCode, res.Duration, res.LimitsHit))
}

// auditFailed records an allowed invocation whose call failed with err
// (audit.Failed; with res's exit code, duration and limits when the
// call has a result all the same) and returns err, joined with the audit
// error when the record could not be written. A call that ended before
// it asked for a container (beforeCallError: the session failed closed,
// closed, not ready) is the session's state, recorded where it arose: no
// invocation.
func (s *Session) auditFailed(ctx context.Context, argv []string, res *Result, err error) error {
	var before *beforeCallError
	if errors.As(err, &before) {
		return err
	}
	ev := audit.Failed(argv, err)
	if res != nil {
		ran := audit.Ran(argv, res.ExitCode, res.Duration, res.LimitsHit)
		ran.Error = ev.Error
		ev = ran
	}
	if aerr := s.exec.audit.For(ctx).Log(s.ID, ev); aerr != nil {
		return errors.Join(err, fmt.Errorf("the audit log could not record the failed call: %w", aerr))
	}
	return err
}

// beforeCallError is the error of a call that ended before it asked for a
// container, for the session's own state (Err, ready, checkRepo); its
// message and what it wraps are err's.
type beforeCallError struct{ err error }

func (e *beforeCallError) Error() string { return e.err.Error() }
func (e *beforeCallError) Unwrap() error { return e.err }

// auditRefusal records a refused invocation (argv is what the agent sent)
// and returns err, joined with the audit error when the record could not
// be written.
func (s *Session) auditRefusal(ctx context.Context, stage string, argv []string, err error) error {
	rule := err.Error()
	var r *allowlist.Refusal
	if errors.As(err, &r) {
		rule = r.Rule
	}
	aerr := errors.Join(
		s.exec.audit.For(ctx).Log(s.ID, &audit.Invocation{Argv: argv, Decision: audit.Refused, Rule: rule}),
		s.exec.audit.For(ctx).Log(s.ID, refusalEvent(stage, err)))
	if aerr != nil {
		return errors.Join(err, fmt.Errorf("the audit log could not record the refusal: %w", aerr))
	}
	return err
}

func init() {
	// The test-only seam (internal/testhook): integration tests prove the
	// kernel boundary holds where the policy has a hole.
	testhook.SetExecWithoutPolicy(func(ctx context.Context, s any, argv []string, stdout, stderr io.Writer) (any, error) {
		return s.(*Session).execWithoutPolicy(ctx, argv, stdout, stderr)
	})
}

// execWithoutPolicy runs argv with no allowlist check: the call path
// after the policy (repository check, container, result). Only Exec and
// the test seam call it.
func (s *Session) execWithoutPolicy(ctx context.Context, argv []string, stdout, stderr io.Writer) (*Result, error) {
	return s.call(ctx, initctl.Request{Mode: initctl.Exec, Argv: argv}, stdout, stderr)
}

// call runs req in a fresh container of the session: the one created
// ahead when there is one, else one made now. The used container is
// deleted, and the pool refilled, after the result is returned (Close
// waits for that).
func (s *Session) call(ctx context.Context, req initctl.Request, stdout, stderr io.Writer) (*Result, error) {
	// Held until the container has exited: Changes waits for it.
	s.calls.RLock()
	defer s.calls.RUnlock()
	if err := s.Err(); err != nil {
		return nil, &beforeCallError{err}
	}
	if err := s.ready(); err != nil {
		return nil, &beforeCallError{err}
	}
	if err := s.checkRepo(); err != nil {
		return nil, &beforeCallError{err}
	}
	s.store.touch()
	c := s.pool.take()
	if c == nil {
		var err error
		if c, err = s.runner.create(ctx); err != nil {
			return nil, err
		}
	}
	res, err := s.runner.start(ctx, c, req, stdout, stderr)
	if errors.Is(err, errNotStarted) && ctx.Err() == nil {
		// The container made ahead died while it waited: nothing ran,
		// so the call runs once on a new one. Lost its status stream: so
		// did the rest of the pool, destroyed with it.
		lost := errors.Is(err, errStatusLost)
		s.bg.Add(1)
		go func(c *container) {
			defer s.bg.Done()
			s.runner.destroy(c)
			if lost {
				s.pool.drain()
			}
		}(c)
		if c, err = s.runner.create(ctx); err != nil {
			return nil, err
		}
		res, err = s.runner.start(ctx, c, req, stdout, stderr)
	}
	var lost []*container
	if err != nil && errdefs.IsUnavailable(err) {
		// containerd went away, or a shim stopped answering: what was
		// created ahead may be gone or as silent. Taken out now, so no
		// call takes one; destroyed in the background, so this call
		// does not wait on their shims (each destroy may take
		// destroyWait).
		lost = s.pool.takeAll()
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.runner.destroy(c)
		for _, l := range lost {
			s.runner.destroy(l)
		}
		s.pool.refill()
	}()
	return res, err
}

// Changes collects the session's change set from its write area. Paths
// hidden by the session's rules are violations too (a new file matching an
// ignore rule). It waits until no call of the session is running, and
// holds new ones back while it reads. It needs no containerd.
func (s *Session) Changes() (*changeset.Set, error) {
	return s.ChangesContext(context.Background())
}

// ChangesContext is Changes whose audit records name the peer ctx carries
// (audit.ContextWithPeer).
func (s *Session) ChangesContext(ctx context.Context) (*changeset.Set, error) {
	s.calls.Lock()
	defer s.calls.Unlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	s.readyMu.Lock()
	l := s.layout
	s.readyMu.Unlock()
	if l == nil {
		// An ephemeral session no call ran in has written nothing.
		return &changeset.Set{}, nil
	}
	cs, err := collect(s.Policy, l)
	if err != nil {
		return nil, err
	}
	digest, err := audit.DigestJSON(cs)
	if err != nil {
		return nil, err
	}
	if err := s.auditOutcome(ctx, "collected the change set", &audit.ChangeSet{SHA256: digest, Changes: len(cs.Changes), Violations: len(cs.Violations)}); err != nil {
		return nil, err
	}
	if err := cs.Err(); err != nil {
		if aerr := s.auditOutcome(ctx, "refused the change set", refusalEvent("changeset", err)); aerr != nil {
			return nil, aerr
		}
	}
	return cs, nil
}

// collect reads the change set of the session with policy p from its
// layout l: the write area (or the page copy) against its base. Paths the
// view hides are violations too.
func collect(p *Policy, l *mounts.Layout) (*changeset.Set, error) {
	if p.plan.ReadOnly {
		return &changeset.Set{}, nil
	}
	lim := changeset.DefaultLimits()
	var cs *changeset.Set
	var err error
	if p.plan.Page != "" {
		// The original from the repository itself: the view holds an empty
		// mount point where the page does not exist yet.
		cs, err = changeset.CollectPage(l.PageCopy, l.Repo, p.plan.Page, lim)
	} else {
		cs, err = changeset.Collect(l.Upper, l.Base, p.plan.WriteDir, lim)
	}
	if err != nil {
		return nil, err
	}
	for _, c := range cs.Changes {
		if rule, h := p.view.Hidden(c.Path); h {
			cs.Violations = append(cs.Violations, changeset.Problem{Path: c.Path, Reason: rule})
		}
	}
	return cs, nil
}

// Touch records a use of the session now: its idle TTL (the record's
// IdleTTL) counts from its latest use, which Exec and opening record
// themselves. A long-lived owner calls it for the other calls it serves
// (the file tools, diff, apply).
func (s *Session) Touch() { s.store.touch() }

// Record returns the session's record.
func (s *Session) Record() *SessionRecord {
	r := s.record
	return &r
}

// Idle waits until the session's background work — deleting used
// containers and refilling the pool — is done. An agent's think time
// between calls normally covers it; benchmarks call Idle between samples.
func (s *Session) Idle() {
	s.bg.Wait()
	s.pool.wg.Wait()
}

// Close lets go of the session in this process: the watch stops, the
// containers created ahead are destroyed, and what running calls leave
// behind is cleaned up. An ephemeral session (NewSession) is then removed
// (its mounts and state); a persistent one keeps both (RemoveSession
// removes them). It is safe to call more than once.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.pool.stop()
	// No call can start now; wait for the running ones and their
	// clean-up (calls before readyMu: the lock order).
	s.calls.Lock()
	defer s.calls.Unlock()
	s.bg.Wait()
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	if s.watch != nil {
		s.watch.close()
	}
	s.pool.close() // waits for a refill in progress
	if s.store == nil {
		return nil // ephemeral, no call ran: nothing was made
	}
	if !s.record.Ephemeral {
		s.store.release()
		return nil
	}
	err := s.layout.Close()
	// Released only now: until the layout is gone, gc must see the
	// session in use.
	s.store.release()
	return errors.Join(err, removeSessionDir(s.store.dir))
}
