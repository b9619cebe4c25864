package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/internal/initctl"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/mounts/hidden"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/seccomp"
)

// DefaultWriteDir is the write scope's directory.
const DefaultWriteDir = allowlist.DefaultWriteDir

// SessionConfig is what the trusted launcher fixes for a session; nothing
// an agent sends can change it.
type SessionConfig struct {
	// Repo is the repository root on the host.
	Repo string
	// Profile is the loaded, validated profile.
	Profile *profiles.Profile
	// Page, when set, puts the session in page mode: only this file
	// (repo-relative, under openwiki/) is writable.
	Page string
	// WriteDir, when set, is the writable directory: openwiki/ (the
	// default) or a directory below it, e.g. "openwiki/guides/".
	WriteDir string
	// AgentID, when set, makes the write scope the agent's own subtree
	// openwiki/agents/<AgentID>/ (see allowlist.ValidAgentID). Other agents'
	// subtrees stay readable and are refused for writes.
	AgentID string
	// ReadOnly sessions may write nothing.
	ReadOnly bool
}

// Policy is the permission side of a session: the trusted capability,
// the hidden set computed from the base repository and the view built on
// it. It needs no containerd; `corral check` uses it alone.
type Policy struct {
	Repo    string
	Scope   allowlist.Scope
	Profile *profiles.Profile

	limits profiles.Limits
	hidden *hidden.Set
	view   *hidden.View
	plan   mounts.Plan
}

// Session is a Policy plus what makes it enforceable: its seccomp profile
// and (once the first invocation runs) its host mounts. Each Exec is still
// a fresh container. The caller must call Close.
type Session struct {
	*Policy
	ID string

	exec    *Executor
	seccomp *seccomp.Profile

	// running is held shared by every invocation until its container
	// has exited, and exclusively by Changes: the write area is never
	// read while a container of the session can still change it.
	running sync.RWMutex

	mu     sync.Mutex
	layout *mounts.Layout
	closed bool
	seq    atomic.Int64
	// image (its snapshot is every container's root) and init (the
	// corral-init bound into every container) are resolved once, by the
	// first prepare; any image works.
	image containerd.Image
	init  string

	// store is set for a persistent session (CreateSession,
	// OpenSession): its mounts outlive the process.
	store *sessionStore
	// fileMu serializes the session's file-tool writes in this process
	// (store.lock does across processes).
	fileMu sync.Mutex
	// charged are the violations a call was charged with (CallChanges)
	// in a one-call session; a persistent one keeps them in its store.
	charged []changeset.Problem

	// watch notices files created in the repository after the start
	// (long-lived processes); nil in one-call processes.
	watch   *hidden.Watcher
	readyMu sync.Mutex
	ready   *container
	closing bool
	bg      sync.WaitGroup
}

// NewPolicy validates the launcher's choices and computes the hidden set
// from the base repository. It mounts nothing and starts nothing. Errors
// wrap errdefs.ErrInvalidArgument (bad page, bad repo) or
// errdefs.ErrFailedPrecondition (a layout corral will not start on, e.g.
// openwiki/ is a symlink), or are a *allowlist.Refusal (a hidden page).
func NewPolicy(cfg SessionConfig) (*Policy, error) {
	return newPolicy(cfg, nil)
}

// newPolicy is NewPolicy with the hidden set computed when the session
// was created (nil: compute it now from the base repository).
func newPolicy(cfg SessionConfig, hs *hidden.Set) (*Policy, error) {
	if cfg.Profile == nil {
		return nil, fmt.Errorf("session: %w: no profile", errdefs.ErrInvalidArgument)
	}
	// Before anything reads the repository: "/" (or "") would be walked
	// whole.
	if err := mounts.CheckPaths(cfg.Repo, ""); err != nil {
		return nil, err
	}
	repo, err := filepath.Abs(cfg.Repo)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(repo); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("repository %s: %w: not a directory", cfg.Repo, errdefs.ErrInvalidArgument)
	}
	scope, err := allowlist.NewScope(allowlist.ScopeConfig{Dir: cfg.WriteDir, Page: cfg.Page, AgentID: cfg.AgentID, ReadOnly: cfg.ReadOnly})
	if err != nil {
		return nil, err
	}
	writeDir := scope.Dir
	if scope.Page != "" {
		writeDir = DefaultWriteDir
	}
	limits := cfg.Profile.Limits()
	plan := mounts.Plan{
		Repo: repo, WriteDir: writeDir, Page: scope.Page, ReadOnly: cfg.ReadOnly,
		AreaBytes: limits.WriteAreaBytes, AreaInodes: limits.WriteInodes,
		UID: ContainerUID, GID: ContainerGID,
	}
	if cfg.ReadOnly {
		plan.WriteDir, plan.Page = "", ""
	}
	if err := mounts.CheckStart(plan); err != nil {
		return nil, err
	}
	if hs == nil {
		hs, err = hidden.Compute(repo, hidden.Options{
			IgnoreFileName: ".openwikiignore", WriteDir: DefaultWriteDir, Lists: cfg.Profile.HideLists(),
		})
		if err != nil {
			return nil, fmt.Errorf("computing the hidden set: %w", err)
		}
	}
	view := hidden.NewView(repo, hs)
	for _, p := range []string{scope.Page, scope.Dir} {
		if p == "" || cfg.ReadOnly {
			continue
		}
		if rule, h := view.Hidden(p); h {
			return nil, &allowlist.Refusal{Kind: allowlist.KindPath, Index: -1, Token: p, Rule: rule}
		}
	}
	return &Policy{Repo: repo, Scope: scope, Profile: cfg.Profile, limits: limits, hidden: hs, view: view, plan: plan}, nil
}

// NewSession builds the session's Policy (see NewPolicy for its errors;
// a repository that holds the state directory, or that the state
// directory holds, is errdefs.ErrInvalidArgument: mounts.CheckPaths).
// Host mounts are made when the first invocation runs, so a refused
// invocation leaves no trace.
func (e *Executor) NewSession(ctx context.Context, cfg SessionConfig) (*Session, error) {
	if err := mounts.CheckPaths(cfg.Repo, e.cfg.StateDir); err != nil {
		return nil, err
	}
	p, err := NewPolicy(cfg)
	if err != nil {
		return nil, err
	}
	sc, err := seccomp.LoadDefault()
	if err != nil {
		return nil, err
	}
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	s := &Session{Policy: p, ID: hex.EncodeToString(id[:]), exec: e, seccomp: sc}
	if err := e.auditSessionCreated(ctx, s.ID, p); err != nil {
		return nil, err
	}
	return s, nil
}

// View returns the view policy checks consult.
func (p *Policy) View() allowlist.View { return p.view }

// Check decides argv against the profile, view and scope, and returns the
// normalized argv that would run, or a *allowlist.Refusal. It runs nothing.
func (p *Policy) Check(argv []string) (allowlist.Decision, error) {
	return allowlist.Check(p.Profile.Grammars, p.view, p.Scope, argv)
}

// Exec checks argv and, when permitted, runs it in a fresh container;
// stdout and stderr (may be nil) receive the output as it arrives. A
// refusal is returned as a *allowlist.Refusal with nothing started.
func (s *Session) Exec(ctx context.Context, argv []string, stdout, stderr io.Writer) (*Result, error) {
	d, err := s.Check(argv)
	if err != nil {
		return nil, s.auditRefusal(ctx, "invocation", argv, err)
	}
	res, err := s.ExecWithoutPolicy(ctx, d.Argv, stdout, stderr)
	if err == nil {
		err = s.auditOutcome(ctx, "the command ran", audit.Ran(d.Argv, res.ExitCode, res.Duration, res.LimitsHit))
	}
	return res, err
}

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

// ExecWithoutPolicy runs argv with no allowlist check. It exists so that
// integration tests can prove the kernel boundary (mounts, seccomp,
// namespaces, limits) holds where the policy has a hole — the hostile
// cases' in_box steps. Neither the CLI nor the server calls it.
func (s *Session) ExecWithoutPolicy(ctx context.Context, argv []string, stdout, stderr io.Writer) (*Result, error) {
	// Held until the container has exited: Changes waits for it.
	s.running.RLock()
	defer s.running.RUnlock()
	if err := s.prepare(); err != nil {
		return nil, err
	}
	if err := s.checkRepo(); err != nil {
		return nil, err
	}
	return s.run(ctx, initctl.Request{Mode: initctl.Exec, Argv: argv}, stdout, stderr)
}

// checkRepo refuses to run once a file appeared in the repository that
// the rules hide but the session's whiteouts do not cover.
func (s *Session) checkRepo() error {
	if s.watch == nil {
		return nil
	}
	return s.watch.Check()
}

// startWatch watches the repository for the session's lifetime in a
// long-lived process. Where inotify is not available every call rescans.
func (s *Session) startWatch() error {
	if s.exec.cfg.Cold || s.watch != nil {
		return nil
	}
	w, err := hidden.NewWatcher(s.Repo, s.hidden)
	if err != nil {
		return fmt.Errorf("watching the repository: %w", err)
	}
	s.watch = w
	return nil
}

func (s *Session) prepare() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if s.layout != nil && s.image != nil {
		return nil
	}
	if s.image == nil {
		img, err := s.exec.image(s.exec.Context(context.Background()))
		if err != nil {
			return err
		}
		init, err := s.exec.initBinary()
		if err != nil {
			return err
		}
		s.image, s.init = img, init
	}
	if s.layout != nil {
		return nil
	}
	if s.store != nil {
		// Another process may have run this session before: whatever
		// appeared in the repository since its start must be covered.
		if err := hidden.Rescan(s.Repo, s.hidden); err != nil {
			return err
		}
		if err := s.attachLocked(); err != nil {
			return err
		}
		return s.startWatch()
	}
	l, err := mounts.Prepare(filepath.Join(s.exec.cfg.StateDir, "sessions", s.ID), s.plan, s.hidden)
	if err != nil {
		return fmt.Errorf("preparing session mounts: %w", err)
	}
	s.setLayout(l)
	if err := s.startWatch(); err != nil {
		return err
	}
	// gc leaves alone the sessions of a live supervisor.
	return os.WriteFile(filepath.Join(l.Dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600)
}

// Changes collects the session's change set from its write area. Paths
// hidden by the session's rules are violations too (a new file matching an
// ignore rule). It waits until no invocation of the session is running,
// and holds new ones back while it reads.
func (s *Session) Changes() (*changeset.Set, error) {
	return s.ChangesContext(context.Background())
}

// ChangesContext is Changes whose audit records name the peer ctx
// carries (audit.ContextWithPeer).
func (s *Session) ChangesContext(ctx context.Context) (*changeset.Set, error) {
	s.running.Lock()
	defer s.running.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.layout == nil || s.plan.ReadOnly {
		return &changeset.Set{}, nil
	}
	lim := changeset.DefaultLimits()
	var cs *changeset.Set
	var err error
	if s.plan.Page != "" {
		// The original from the repository itself: the view holds an empty
		// mount point where the page does not exist yet.
		cs, err = changeset.CollectPage(s.layout.PageCopy, s.layout.Repo, s.plan.Page, lim)
	} else {
		cs, err = changeset.Collect(s.layout.Upper, s.layout.Base, s.plan.WriteDir, lim)
	}
	if err != nil {
		return nil, err
	}
	for _, c := range cs.Changes {
		if rule, h := s.view.Hidden(c.Path); h {
			cs.Violations = append(cs.Violations, changeset.Problem{Path: c.Path, Reason: rule})
		}
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

// Idle waits until the session's background work — deleting used
// containers and preparing the next — is done. An agent's think time
// between calls normally covers it; benchmarks call Idle between samples.
func (s *Session) Idle() { s.bg.Wait() }

// Close unmounts the session's host mounts and removes its state. It is
// safe to call more than once. A persistent session (CreateSession,
// OpenSession) keeps both: Close only lets go of what this process holds,
// and RemoveSession removes the rest.
func (s *Session) Close() error {
	s.readyMu.Lock()
	s.closing = true
	s.readyMu.Unlock()
	s.bg.Wait()
	if c := s.takeReady(); c != nil {
		s.destroy(c)
	}
	if s.watch != nil {
		s.watch.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.layout == nil {
		return nil
	}
	if s.store != nil {
		s.layout = nil
		return nil
	}
	err := s.layout.Close()
	s.layout = nil
	return err
}

// setLayout records the session's host mounts and points the view's
// symlink resolution at the merged write area, where the agent can make
// links the repository does not have.
func (s *Session) setLayout(l *mounts.Layout) {
	s.layout = l
	if !s.plan.ReadOnly && s.plan.Page == "" && l.Write != "" {
		s.view.Overlay(s.plan.WriteDir, l.Write)
	}
}
