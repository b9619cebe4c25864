package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/fscred"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/mounts/hidden"
	"github.com/corral-sandbox/corral/profiles"
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
	// IdleTTL, when set, is how long a persistent session may go unused
	// before it expires (Executor.Prune); it may only shorten the
	// profile's idle_ttl (profiles.Profile.IdleTTL). Zero means the
	// profile's.
	IdleTTL time.Duration
	// ID, when set, is the new session's id, chosen by the launcher
	// (NewSessionID) so that it can record the session before it exists
	// (the daemon's owner record comes first: a crash between the two
	// leaves a record naming the session, never a session nobody owns).
	// "" makes a new one. An id not of NewSessionID's form is
	// errdefs.ErrInvalidArgument; one in use, errdefs.ErrAlreadyExists.
	ID string
	// CopyAs, when set, are the credentials with which a persistent
	// session's creation reads what it copies out of the repository (its
	// write directory, or its page): the caller of a daemon, which runs
	// as root, so that the copy takes only what the caller may read, at
	// the moment it reads it (mounts.Plan.CopyAs). A file it may not read
	// fails the creation with errdefs.ErrPermissionDenied.
	CopyAs *fscred.Creds
	// WarmOwner, when set, is an opaque key naming who the session is
	// for (the daemon gives its owner: a uid, or a Pod). The containers
	// created ahead for every session of one key hold, beyond their
	// floors (pool_depth), at most half of Config.MaxWarm, floors
	// included, so that one owner's many sessions never take the other
	// owners' bursts. "" bounds each session alone (half of MaxWarm).
	WarmOwner string
}

// idleTTL returns the session's idle TTL: the profile's, or IdleTTL when
// it is set and no longer than the profile's. Errors wrap
// errdefs.ErrInvalidArgument.
func (cfg SessionConfig) idleTTL() (time.Duration, error) {
	ttl := cfg.Profile.IdleTTL()
	switch {
	case cfg.IdleTTL == 0:
		return ttl, nil
	case cfg.IdleTTL < profiles.MinIdleTTL:
		return 0, fmt.Errorf("idle TTL %s: %w: want at least %s", cfg.IdleTTL, errdefs.ErrInvalidArgument, profiles.MinIdleTTL)
	case cfg.IdleTTL > ttl:
		return 0, fmt.Errorf("idle TTL %s: %w: the profile %q allows at most %s (idle_ttl)", cfg.IdleTTL, errdefs.ErrInvalidArgument, cfg.Profile.Name, ttl)
	}
	return cfg.IdleTTL, nil
}

// Policy is the permission side of a session: the trusted capability,
// the hidden set computed from the base repository and the view built on
// it. It is immutable once made (safe for concurrent use) and needs no
// containerd; `corral check` and `corral apply` use it alone.
type Policy struct {
	Repo    string
	Scope   allowlist.Scope
	Profile *profiles.Profile

	limits profiles.Limits
	hidden *hidden.Set
	view   *hidden.View
	plan   mounts.Plan
}

// NewPolicy validates the launcher's choices and computes the hidden set
// from the base repository. It mounts nothing and starts nothing. Errors
// wrap errdefs.ErrInvalidArgument (bad page, bad repo) or
// errdefs.ErrFailedPrecondition (a layout corral will not start on, e.g.
// openwiki/ is a symlink), or are a *allowlist.Refusal (a hidden page).
func NewPolicy(cfg SessionConfig) (*Policy, error) {
	return newPolicy(cfg, nil, "")
}

// newPolicy is NewPolicy with the hidden set computed when the session
// was created (nil: compute it now from the base repository) and, when
// layout is set, the session's view reading the write directory from the
// write area of the layout Prepare builds there.
func newPolicy(cfg SessionConfig, hs *hidden.Set, layout string) (*Policy, error) {
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
	if err := checkRepo(repo, cfg.Repo); err != nil {
		return nil, err
	}
	p, err := policyOf(cfg, repo, hs, layout)
	if err != nil {
		return nil, err
	}
	if err := mounts.CheckStart(p.plan); err != nil {
		return nil, err
	}
	if p.hidden == nil {
		p.hidden, err = hidden.Compute(repo, hidden.Options{
			IgnoreFileName: ".openwikiignore", WriteDir: DefaultWriteDir, Lists: cfg.Profile.HideLists(),
		})
		if err != nil {
			return nil, fmt.Errorf("computing the hidden set: %w", err)
		}
		p.view = newView(p.Repo, p.hidden, p.plan, layout)
	}
	for _, q := range []string{p.Scope.Page, p.Scope.Dir} {
		if q == "" || cfg.ReadOnly {
			continue
		}
		if rule, h := p.view.Hidden(q); h {
			return nil, &allowlist.Refusal{Kind: allowlist.KindPath, Index: -1, Token: q, Rule: rule}
		}
	}
	return p, nil
}

// policyOf builds the policy of cfg for the absolute repository path
// repo without reading the repository: hs nil leaves the hidden set and
// the view to the caller. A session opened only for its change set
// (ForChanges) uses it alone, so its writes stay reachable after the
// repository moved or vanished.
func policyOf(cfg SessionConfig, repo string, hs *hidden.Set, layout string) (*Policy, error) {
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
	p := &Policy{Repo: repo, Scope: scope, Profile: cfg.Profile, limits: limits, hidden: hs, plan: plan}
	if hs != nil {
		p.view = newView(repo, hs, plan, layout)
	}
	return p, nil
}

// newView is the session's view: the write directory is read from the
// write area of the layout under dir (mounts.LayoutAt), fixed now, never
// patched in after mounting. Without a layout (a policy alone) or with no
// write area (read-only, page mode) it is the repository minus hs.
func newView(repo string, hs *hidden.Set, plan mounts.Plan, dir string) *hidden.View {
	if dir == "" || plan.ReadOnly || plan.Page != "" {
		return hidden.NewView(repo, hs)
	}
	return hidden.NewView(repo, hs, hidden.Overlay{Dir: plan.WriteDir, HostDir: mounts.LayoutAt(dir, plan).Write})
}

// checkRepo says, in one line, why the repository at repo (as the
// launcher spelled it: spelled) cannot be used: it is gone (moved or
// removed: errdefs.ErrNotFound) or not a directory
// (errdefs.ErrInvalidArgument).
func checkRepo(repo, spelled string) error {
	st, err := os.Stat(repo)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("repository %s: %w: it was moved or removed", spelled, errdefs.ErrNotFound)
	case err != nil:
		return fmt.Errorf("repository %s: %w", spelled, err)
	case !st.IsDir():
		return fmt.Errorf("repository %s: %w: not a directory", spelled, errdefs.ErrInvalidArgument)
	}
	return nil
}

// View returns the view policy checks consult.
func (p *Policy) View() allowlist.View { return p.view }

// Check decides argv against the profile, view and scope, and returns the
// normalized argv that would run, or a *allowlist.Refusal. It runs nothing.
func (p *Policy) Check(argv []string) (allowlist.Decision, error) {
	return allowlist.Check(p.Profile.Grammars, p.view, p.Scope, argv)
}
