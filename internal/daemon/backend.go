package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/internal/testhook"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/review"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/fsop"
	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"
	"time"
)

// This file is the daemon's one adapter to package sandbox and package
// review: everything else speaks the API's types through Backend.

// sandboxBackend serves the sessions of one executor's state directory.
// Sessions are opened once (at Adopt, at creation, or at their first
// call) and held until removed or the daemon stops.
type sandboxBackend struct {
	exec *sandbox.Executor
	log  io.Writer

	mu   sync.Mutex
	open map[string]*sandbox.Session
	// lost holds, by id, why a writable session could not be re-adopted
	// because its write area is gone (errdefs.ErrDataLoss): it is kept
	// and reported lost until removed.
	lost map[string]string
	// removed ends, per session with calls in flight, when the session
	// is removed: every call of it in flight is canceled then
	// (callContext). An entry lives while its session has calls in
	// flight, never longer: a session removed by anyone else (the
	// sandbox's sweep, the CLI) leaves nothing behind here.
	removed map[string]*sessionEnd
	// warmOwner names a session's owner key for its share of the
	// containers created ahead (Adopt); nil until then: no key.
	warmOwner func(id string) string
}

// sessionEnd is a context that ends when its session is removed, and
// the count of its calls in flight (b.mu).
type sessionEnd struct {
	ctx    context.Context
	cancel context.CancelFunc
	calls  int
}

// errRemoved is the cause of a call canceled by its session's removal.
var errRemoved = errors.New("the session was removed while the call ran")

// callContext returns ctx, canceled also when session id is removed
// (Remove), and the function that releases it. A call whose session is
// removed under it has its container killed and reaped, as when its
// client goes away, instead of holding the removal for the rest of its
// timeout.
func (b *sandboxBackend) callContext(ctx context.Context, id string) (context.Context, func()) {
	b.mu.Lock()
	end, ok := b.removed[id]
	if !ok {
		c, cancel := context.WithCancel(context.Background())
		end = &sessionEnd{ctx: c, cancel: cancel}
		b.removed[id] = end
	}
	end.calls++
	b.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(end.ctx, func() { cancel(errRemoved) })
	return ctx, sync.OnceFunc(func() {
		stop()
		cancel(nil)
		b.mu.Lock()
		defer b.mu.Unlock()
		// The last call of the session drops the entry (unless a
		// removal already did, and a new entry is another's).
		if end.calls--; end.calls == 0 && b.removed[id] == end {
			delete(b.removed, id)
			end.cancel()
		}
	})
}

// callErr is err of a call made with ctx from callContext: a call its
// session's removal canceled answers as for a session that does not
// exist.
func callErr(ctx context.Context, id string, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errRemoved) {
		return fmt.Errorf("session %s: %w: %w", id, errdefs.ErrNotFound, errRemoved)
	}
	return err
}

// NewBackend connects to containerd with cfg (a long-lived owner: the
// executor keeps containers created ahead unless cfg.Cold).
func NewBackend(ctx context.Context, cfg sandbox.Config) (Backend, error) {
	e, err := sandbox.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	return &sandboxBackend{exec: e, log: log, open: map[string]*sandbox.Session{}, lost: map[string]string{}, removed: map[string]*sessionEnd{}}, nil
}

func (b *sandboxBackend) stateDir() string { return b.exec.Config().StateDir }

// auditLog is the audit log naming the request's peer.
func (b *sandboxBackend) auditLog(ctx context.Context) *audit.Logger { return b.exec.Audit().For(ctx) }

// session returns the open session id, opening it on first use.
func (b *sandboxBackend) session(ctx context.Context, id string) (*sandbox.Session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.open[id]; ok {
		s.Touch()
		return s, nil
	}
	s, err := b.exec.OpenSession(ctx, id, b.withWarmOwner(id))
	if err != nil {
		if errdefs.IsDataLoss(err) {
			b.markLost(ctx, id, err)
		}
		return nil, err
	}
	b.open[id] = s
	b.warm(s)
	return s, nil
}

// adopt opens the session id as session does, without counting it as a
// use (sandbox.NotAUse).
func (b *sandboxBackend) adopt(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.open[id]; ok {
		return nil
	}
	s, err := b.exec.OpenSession(ctx, id, sandbox.NotAUse(), b.withWarmOwner(id))
	if err != nil {
		if errdefs.IsDataLoss(err) {
			b.markLost(ctx, id, err)
		}
		return err
	}
	b.open[id] = s
	b.warm(s)
	return nil
}

// withWarmOwner opens session id with its owner key (b.mu held).
func (b *sandboxBackend) withWarmOwner(id string) sandbox.OpenOption {
	if b.warmOwner == nil {
		return sandbox.WithWarmOwner("")
	}
	return sandbox.WithWarmOwner(b.warmOwner(id))
}

// warm starts filling s's pool of containers created ahead (its
// profile's pool_depth, under the executor's --max-warm), so that its
// calls, the first included, take a ready container.
func (b *sandboxBackend) warm(s *sandbox.Session) {
	if b.exec.Config().Cold {
		return
	}
	if err := s.Warm(); err != nil {
		fmt.Fprintf(b.log, "corral daemon: session %s: creating containers ahead: %v\n", s.ID, err)
	}
}

func (b *sandboxBackend) Warm() *api.WarmState {
	if b.exec.Config().Cold {
		return nil
	}
	w := b.exec.Warm()
	return &api.WarmState{Ready: w.Ready, Wanted: w.Wanted, Filling: w.Filling, Held: w.Held, Cap: w.Cap, Hits: w.Hits, Misses: w.Misses}
}

func (b *sandboxBackend) Containerd(ctx context.Context) api.ContainerdState {
	st := api.ContainerdState{Address: b.exec.Config().Address}
	v, err := b.exec.Client().Version(ctx)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	st.OK, st.Version = true, v.Version
	return st
}

func (b *sandboxBackend) Sessions(ctx context.Context) ([]api.Session, error) {
	list, err := b.exec.Sessions()
	if err != nil {
		return nil, err
	}
	out := make([]api.Session, 0, len(list))
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, info := range list {
		s := sessionOf(info.SessionRecord, info.LastUsed, info.Mounted, info.Err)
		if reason, ok := b.lost[info.ID]; ok {
			s.State, s.StateReason = api.StateLost, reason
		}
		out = append(out, s)
	}
	return out, nil
}

// markLost records (b.mu held) that session id lost its write area,
// once, with an audit record: the session stays, reported lost.
func (b *sandboxBackend) markLost(ctx context.Context, id string, err error) {
	if _, ok := b.lost[id]; ok {
		return
	}
	reason := lostReason
	b.lost[id] = reason
	var repo string
	if info, ierr := b.exec.Sessions(); ierr == nil {
		for _, x := range info {
			if x.ID == id {
				repo = x.Repo
			}
		}
	}
	if aerr := b.exec.Audit().For(ctx).Log(id, &audit.SessionLost{Repo: repo, Reason: reason}); aerr != nil {
		fmt.Fprintf(b.log, "corral daemon: session %s: auditing its loss: %v\n", id, aerr)
	}
	fmt.Fprintf(b.log, "corral daemon: session %s is lost: %v\n", id, err)
}

// lostReason is a lost session's StateReason.
const lostReason = "its write area (a tmpfs) is gone: the node rebooted, or its mounts were removed; what it wrote is lost (remove the session to clear it)"

// sessionOf is a session's record in the API's form; its idle TTL is
// the record's, its latest use lastUsed.
func sessionOf(rec sandbox.SessionRecord, lastUsed time.Time, mounted bool, errText string) api.Session {
	out := api.Session{
		ID: rec.ID, Repo: rec.Repo, Profile: rec.Profile, ProfileName: rec.ProfileName, Scope: rec.Scope,
		WriteDir: rec.WriteDir, Page: rec.Page, AgentID: rec.AgentID, ReadOnly: rec.ReadOnly, Created: rec.Created, Mounted: mounted,
		Version: rec.Version, Error: errText, LastUsed: lastUsed,
	}
	if d, err := time.ParseDuration(rec.IdleTTL); err == nil && d > 0 {
		out.IdleTTLNS = int64(d)
	} else {
		out.IdleTTLNS = int64(profiles.DefaultIdleTTL) // a record older than idle_ttl
	}
	return out
}

func (b *sandboxBackend) Create(ctx context.Context, c CreateConfig) (_ api.Session, retErr error) {
	var prof *profiles.Profile
	var err error
	source := c.Profile
	if c.ProfileData != nil {
		if prof, err = profiles.Parse(c.ProfileData); err != nil {
			return api.Session{}, fmt.Errorf("profile %q: %w", c.Profile, err)
		}
	} else if prof, err = profiles.Load(c.Profile); err != nil {
		return api.Session{}, err
	}
	if source == "" {
		source = profiles.DefaultName
	}
	if mem := prof.Limits().MemoryBytes; c.MaxMemory > 0 && mem > c.MaxMemory {
		return api.Session{}, &ErrCallMemory{Profile: prof.Name, Limit: mem, MemoryCap: c.MaxMemory}
	}
	if c.Page != "" && c.ReadOnly {
		return api.Session{}, fmt.Errorf("page and read_only exclude each other: %w", errdefs.ErrInvalidArgument)
	}
	if c.ReserveWriteArea != nil && !c.ReadOnly {
		if err := c.ReserveWriteArea(prof.Limits().WriteAreaBytes); err != nil {
			return api.Session{}, err
		}
	}
	cfg := sandbox.SessionConfig{Repo: c.Repo, Profile: prof, Page: c.Page, WriteDir: c.Scope, AgentID: c.AgentID, ReadOnly: c.ReadOnly,
		IdleTTL: c.IdleTTL, ID: c.ID, CopyAs: c.CopyAs, WarmOwner: c.WarmOwner}
	if cfg.IdleTTL == 0 && c.DefaultIdleTTL > 0 && c.DefaultIdleTTL < prof.IdleTTL() {
		cfg.IdleTTL = c.DefaultIdleTTL
	}
	s, err := b.exec.CreateSession(ctx, cfg, source)
	if err != nil {
		return api.Session{}, err
	}
	// An error or a panic from here on removes the session: its creator
	// gets no session (the server undoes the creation too: undoCreate).
	made := false
	defer func() {
		if !made {
			b.mu.Lock()
			if b.open[s.ID] == s {
				delete(b.open, s.ID)
			}
			b.mu.Unlock()
			s.Close()
			_ = b.exec.RemoveSession(context.WithoutCancel(ctx), s.ID)
		}
	}()
	if err := testhook.Point(HookBackendCreateMade); err != nil {
		return api.Session{}, err
	}
	// The session's read-only bind of the repository (mounts.Layout.Repo)
	// must hold the directory the caller could read: a path swapped
	// between the check and the mount is refused.
	var st unix.Stat_t
	pinned := filepath.Join(b.stateDir(), "sessions", s.ID, "layout", "repo")
	if err := unix.Stat(pinned, &st); err != nil {
		return api.Session{}, fmt.Errorf("checking the session's repository: %w", err)
	}
	if uint64(st.Dev) != c.RepoDev || st.Ino != c.RepoIno {
		return api.Session{}, fmt.Errorf("repository %q: %w: it changed while the session was made (not the directory the caller could read)", c.Repo, errdefs.ErrPermissionDenied)
	}
	b.mu.Lock()
	b.open[s.ID] = s
	b.mu.Unlock()
	b.warm(s)
	out := sessionOf(*s.Record(), time.Now().UTC().Truncate(time.Second), true, "")
	made = true
	return out, nil
}

// HookBackendCreateMade is the test point (package testhook) inside the
// backend's Create right after the sandbox made the session: a test
// makes it fail or panic there, as a fault in what follows would.
const HookBackendCreateMade = "daemon: backend: create: session made"

func (b *sandboxBackend) Remove(ctx context.Context, id string, discard bool) (api.Removed, error) {
	out := api.Removed{Removed: id}
	b.mu.Lock()
	s, open := b.open[id]
	if end, ok := b.removed[id]; ok {
		end.cancel() // the calls in flight: their containers are killed
		delete(b.removed, id)
	}
	b.mu.Unlock()
	if open {
		// The session is ended by the executor, which needs nobody to
		// hold it open.
		b.forget(id, s)
	}
	b.mu.Lock()
	delete(b.lost, id)
	b.mu.Unlock()
	if discard {
		return out, b.exec.RemoveSession(ctx, id)
	}
	// The change set is kept as STATE_DIR/patches/ID.patch (rejected
	// changes listed, not kept), as a standalone session's end keeps it.
	ended, err := b.exec.EndSession(ctx, id)
	if err != nil {
		return out, err
	}
	out.Patch, out.Repo, out.Changes, out.Violations, out.Lost = ended.Patch, ended.Repo, ended.Changes, problems(ended.Violations), ended.Lost
	if len(ended.Violations) > 0 {
		out.PatchError = (&changeset.Set{Violations: ended.Violations}).Err().Error()
	}
	return out, nil
}

// forgetGone drops everything the backend keeps for session id, which
// another remover (the sandbox's sweep) removed: its open handle, its
// lost mark, its calls' end (canceled).
func (b *sandboxBackend) forgetGone(id string) {
	b.mu.Lock()
	s, open := b.open[id]
	delete(b.lost, id)
	if end, ok := b.removed[id]; ok {
		end.cancel()
		delete(b.removed, id)
	}
	b.mu.Unlock()
	if open {
		b.forget(id, s)
	}
}

// forget closes the open session s and drops it.
func (b *sandboxBackend) forget(id string, s *sandbox.Session) {
	b.mu.Lock()
	delete(b.open, id)
	b.mu.Unlock()
	if err := s.Close(); err != nil {
		fmt.Fprintf(b.log, "corral daemon: closing session %s: %v\n", id, err)
	}
}

// Profile returns the session's recorded profile (the bytes it was
// created with, snapshot in its state directory).
func (b *sandboxBackend) Profile(ctx context.Context, id string) ([]byte, error) {
	s, err := b.session(ctx, id)
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(s.Profile)
}

func (b *sandboxBackend) CallMemory(ctx context.Context, id string) (string, int64, error) {
	s, err := b.session(ctx, id)
	if err != nil {
		return "", 0, err
	}
	return s.Profile.Name, s.Profile.Limits().MemoryBytes, nil
}

func (b *sandboxBackend) Check(ctx context.Context, id string, argv []string) (api.Decision, error) {
	s, err := b.session(ctx, id)
	if err != nil {
		return api.Decision{}, err
	}
	d, err := s.Check(argv)
	if err != nil {
		return api.Decision{}, err
	}
	return api.Decision{Allowed: true, Argv: d.Argv, Reads: nonNil(d.Reads), Writes: nonNil(d.Writes)}, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (b *sandboxBackend) Exec(ctx context.Context, id string, argv []string, stdout, stderr io.Writer) (*api.ExecResult, error) {
	s, err := b.session(ctx, id)
	if err != nil {
		return nil, err
	}
	ctx, done := b.callContext(ctx, id)
	defer done()
	res, err := s.Exec(ctx, argv, stdout, stderr)
	if err != nil {
		return nil, callErr(ctx, id, err)
	}
	cs, introduced, err := s.CallChangesContext(ctx)
	if err != nil {
		return nil, callErr(ctx, id, fmt.Errorf("collecting the change set: %w", err))
	}
	return &api.ExecResult{
		Argv: res.Argv, ExitCode: res.ExitCode, DurationNS: int64(res.Duration), LimitsHit: nonNil(res.LimitsHit),
		Stdout: res.Stdout, Stderr: res.Stderr, StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
		Changes: changes(cs.Changes, false), Violations: problems(cs.Violations), NewViolations: problems(introduced), Stat: cs.Stat(),
	}, nil
}

// changes converts cs, with each change's bytes when contents.
func changes(cs []changeset.Change, contents bool) []api.Change {
	out := make([]api.Change, len(cs))
	for i, c := range cs {
		out[i] = api.Change{Path: c.Path, Kind: string(c.Kind), BeforeSHA256: c.BeforeSHA256, AfterSHA256: c.AfterSHA256, Size: c.Size, Mode: uint32(c.Mode)}
		if contents {
			out[i].Before, out[i].After = c.Before, c.After
		}
	}
	return out
}

// fileErr converts a file tool's failure inside the container.
func fileErr(err error) error {
	var fe *sandbox.FileError
	if errors.As(err, &fe) {
		return &FileFailure{FileError: api.FileError{Op: fe.Op, Path: fe.Path, Code: fe.Code}, Message: err.Error(), Category: fe.Unwrap()}
	}
	return err
}

func entries(es []fsop.Entry) []api.Entry {
	out := make([]api.Entry, len(es))
	for i, e := range es {
		out[i] = api.Entry{Path: e.Path, Type: e.Type, Size: e.Size}
	}
	return out
}

// onSession runs one file tool on session id: the session the caller may
// use, its call cancelled when the session is removed meanwhile, and the
// tool's failure as the API reports it.
func onSession[T any](b *sandboxBackend, ctx context.Context, id string, op func(context.Context, *sandbox.Session) (T, error)) (T, error) {
	var zero T
	s, err := b.session(ctx, id)
	if err != nil {
		return zero, err
	}
	ctx, done := b.callContext(ctx, id)
	defer done()
	res, err := op(ctx, s)
	if err != nil {
		return zero, callErr(ctx, id, fileErr(err))
	}
	return res, nil
}

// orRoot is a file tool's path, "" meaning the repository's root.
func orRoot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func (b *sandboxBackend) Read(ctx context.Context, id string, r api.Read) (*api.ReadResult, error) {
	res, err := onSession(b, ctx, id, func(ctx context.Context, s *sandbox.Session) (*fsop.ReadResult, error) {
		return s.Read(ctx, r.Path, sandbox.ReadOptions{Offset: r.Offset, Limit: r.Limit, Bytes: r.Unit == "bytes"})
	})
	if err != nil {
		return nil, err
	}
	out := api.ReadResult(*res)
	return &out, nil
}

func (b *sandboxBackend) List(ctx context.Context, id string, r api.List) (*api.ListResult, error) {
	res, err := onSession(b, ctx, id, func(ctx context.Context, s *sandbox.Session) (*fsop.ListResult, error) {
		return s.List(ctx, orRoot(r.Path))
	})
	if err != nil {
		return nil, err
	}
	return &api.ListResult{Path: res.Path, Entries: entries(res.Entries), Truncated: res.Truncated}, nil
}

func (b *sandboxBackend) Glob(ctx context.Context, id string, r api.Glob) (*api.GlobResult, error) {
	res, err := onSession(b, ctx, id, func(ctx context.Context, s *sandbox.Session) (*fsop.GlobResult, error) {
		return s.Glob(ctx, r.Pattern, r.Max)
	})
	if err != nil {
		return nil, err
	}
	return &api.GlobResult{Pattern: res.Pattern, Matches: entries(res.Matches), Truncated: res.Truncated}, nil
}

func (b *sandboxBackend) Search(ctx context.Context, id string, r api.Search) (*api.SearchResult, error) {
	res, err := onSession(b, ctx, id, func(ctx context.Context, s *sandbox.Session) (*fsop.SearchResult, error) {
		return s.Search(ctx, r.Regexp, orRoot(r.Path), sandbox.SearchOptions{Include: r.Include, IgnoreCase: r.IgnoreCase, MaxResults: r.Max})
	})
	if err != nil {
		return nil, err
	}
	out := &api.SearchResult{Pattern: res.Pattern, Path: res.Path, Matches: make([]api.Match, len(res.Matches)), Truncated: res.Truncated,
		FilesSearched: res.FilesSearched, SkippedBinary: res.SkippedBinary, SkippedLarge: res.SkippedLarge}
	for i, m := range res.Matches {
		out.Matches[i] = api.Match(m)
	}
	return out, nil
}

func (b *sandboxBackend) Write(ctx context.Context, id string, r api.Write, content []byte) (*api.WriteResult, error) {
	res, err := onSession(b, ctx, id, func(ctx context.Context, s *sandbox.Session) (*fsop.WriteResult, error) {
		return s.Write(ctx, r.Path, content, r.ExpectedSHA256)
	})
	if err != nil {
		return nil, err
	}
	out := api.WriteResult(*res)
	return &out, nil
}

func (b *sandboxBackend) Edit(ctx context.Context, id string, r api.Edit) (*api.WriteResult, error) {
	res, err := onSession(b, ctx, id, func(ctx context.Context, s *sandbox.Session) (*fsop.WriteResult, error) {
		return s.Edit(ctx, r.Path, r.Old, r.New, r.ExpectedSHA256, r.All)
	})
	if err != nil {
		return nil, err
	}
	out := api.WriteResult(*res)
	return &out, nil
}

func (b *sandboxBackend) Diff(ctx context.Context, id string, contents bool) (*api.ChangeSet, error) {
	s, err := b.session(ctx, id)
	if err != nil {
		return nil, err
	}
	cs, err := s.ChangesContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("collecting the change set: %w", err)
	}
	return &api.ChangeSet{Changes: changes(cs.Changes, contents), Violations: problems(cs.Violations), Stat: cs.Stat()}, nil
}

func (b *sandboxBackend) Patch(ctx context.Context, id string, w io.Writer) error {
	s, err := b.session(ctx, id)
	if err != nil {
		return err
	}
	cs, err := s.ChangesContext(ctx)
	if err != nil {
		return fmt.Errorf("collecting the change set: %w", err)
	}
	if err := cs.Err(); err != nil {
		return err
	}
	_, err = changeset.WritePatch(w, cs)
	return err
}

// KeptPatchSize renders the patch the session's end would keep (its
// changes but the rejected ones, as sandbox.Executor.EndSession keeps
// them) into a counting writer and returns its size.
func (b *sandboxBackend) KeptPatchSize(ctx context.Context, id string) (int64, error) {
	s, err := b.session(ctx, id)
	if err != nil {
		return 0, err
	}
	cs, err := s.ChangesContext(ctx)
	if err != nil {
		return 0, fmt.Errorf("collecting the change set: %w", err)
	}
	keep := &changeset.Set{}
	for _, c := range cs.Changes {
		if !slices.ContainsFunc(cs.Violations, func(v changeset.Problem) bool { return v.Path == c.Path }) {
			keep.Changes = append(keep.Changes, c)
		}
	}
	if len(keep.Changes) == 0 {
		return 0, nil
	}
	// Counted as it is rendered, one file at a time: never held whole.
	return changeset.WritePatch(io.Discard, keep)
}

// Apply is `corral session apply` without a terminal: a review (no
// tokens), or the approved changes written (or checked, with DryRun).
func (b *sandboxBackend) Apply(ctx context.Context, id string, r api.Apply, canWrite func(repo, dir, file string) error) (*api.Report, error) {
	s, err := b.session(ctx, id)
	if err != nil {
		return nil, err
	}
	log := b.auditLog(ctx)
	// Apply and its review read and write the directory the session was
	// made on, never what its path names now.
	rec := s.Record()
	opts := review.Options{View: s.View(), Audit: log, Session: id, JournalDir: review.JournalDir(b.stateDir()),
		RepoDev: rec.RepoDev, RepoIno: rec.RepoIno}
	for _, l := range r.DryRunOnly {
		lv, err := review.ParseLevel(l)
		if err != nil {
			return nil, fmt.Errorf("dry_run_only: %w: %v", errdefs.ErrInvalidArgument, err)
		}
		opts.DryRunOnly = append(opts.DryRunOnly, lv)
	}
	cs, err := s.ChangesContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("collecting the change set: %w", err)
	}
	if len(cs.Changes) == 0 && len(cs.Violations) == 0 {
		return &api.Report{DryRun: true, Items: []api.Item{}, Written: []string{}}, nil
	}
	diffs := func(rep *api.Report) *api.Report {
		if r.Diffs {
			withDiffs(rep, cs)
		}
		return rep
	}
	if len(r.Approve) == 0 {
		rep, err := review.Preview(s.Repo, cs, s.Scope, opts)
		return diffs(report(rep)), err
	}
	approvals, err := review.ApprovalsFor(cs, s.Scope, r.Approve, opts)
	if err != nil {
		if aerr := log.Log(id, &audit.Refusal{Stage: "approval", Error: err.Error()}); aerr != nil {
			return nil, errors.Join(err, aerr)
		}
		return nil, err
	}
	if !r.DryRun {
		for _, a := range approvals {
			dir := deepestDir(s.Repo, path.Dir(a.Path))
			if err := canWrite(s.Repo, dir, a.Path); err != nil {
				return nil, err
			}
		}
	}
	opts.Write = !r.DryRun
	rep, err := review.Apply(s.Repo, cs, s.Scope, approvals, opts)
	return diffs(report(rep)), err
}

// withDiffs sets each item's Diff (or DiffError) from its change in cs.
func withDiffs(rep *api.Report, cs *changeset.Set) {
	if rep == nil {
		return
	}
	byPath := map[string]changeset.Change{}
	for _, c := range cs.Changes {
		byPath[c.Path] = c
	}
	for i := range rep.Items {
		c, ok := byPath[rep.Items[i].Path]
		if !ok {
			continue
		}
		p, err := changeset.Patch(&changeset.Set{Changes: []changeset.Change{c}})
		if err != nil {
			rep.Items[i].DiffError = err.Error()
			continue
		}
		rep.Items[i].Diff = string(p)
	}
}

// deepestDir returns dir (repo-relative) or its deepest ancestor that
// exists in repo: where an apply's write lands.
func deepestDir(repo, dir string) string {
	for dir != "." && dir != "/" && dir != "" {
		if st, err := os.Lstat(filepath.Join(repo, dir)); err == nil && st.IsDir() {
			return dir
		}
		dir = path.Dir(dir)
	}
	return "."
}

func report(r *review.Report) *api.Report {
	if r == nil {
		return nil
	}
	out := &api.Report{Items: make([]api.Item, len(r.Items)), DryRun: r.DryRun, Written: nonNil(r.Written)}
	for i, it := range r.Items {
		out.Items[i] = api.Item{Path: it.Path, Kind: string(it.Kind), BeforeSHA256: it.BeforeSHA256, AfterSHA256: it.AfterSHA256,
			Size: it.Size, Risk: api.Risk{Level: it.Risk.Level.String(), Reasons: nonNil(it.Risk.Reasons)}, Token: it.Token,
			Status: string(it.Status), Detail: it.Detail}
	}
	return out
}

// Recover finishes or rolls back interrupted applies (review.Recover),
// then removes the containers, leases and mounts whose owner died
// (sandbox's GC; persistent sessions are kept).
func (b *sandboxBackend) Recover(ctx context.Context) error {
	log := b.exec.Audit()
	recs, err := review.Recover(review.JournalDir(b.stateDir()))
	for _, r := range recs {
		var left []string
		for _, p := range r.Left {
			left = append(left, p.Path+": "+p.Reason)
		}
		err = errors.Join(err, log.Log("", &audit.ApplyRecovered{Repo: r.Repo, TxID: r.TxID, Outcome: r.Outcome, Left: left}))
		fmt.Fprintf(b.log, "corral daemon: interrupted apply %s to %s: %s\n", r.TxID, r.Repo, r.Outcome)
	}
	rep, gerr := b.exec.GC(ctx, false)
	if rep != nil && len(rep.Containers)+len(rep.Leases)+len(rep.Mounts)+len(rep.Sessions)+len(rep.Cgroups)+len(rep.RuntimeStates) > 0 {
		fmt.Fprintf(b.log, "corral daemon: removed what a crash left: %d containers, %d leases, %d mounts, %d session directories, %d stray cgroups, %d stray runtime states\n",
			len(rep.Containers), len(rep.Leases), len(rep.Mounts), len(rep.Sessions), len(rep.Cgroups), len(rep.RuntimeStates))
	}
	return errors.Join(err, gerr)
}

func (b *sandboxBackend) Sweep(ctx context.Context) ([]string, error) {
	var out []string
	pruned, err := b.exec.Prune(ctx)
	for _, p := range pruned {
		out = append(out, fmt.Sprintf("session %s expired and was removed (patch: %s)", p.ID, orNone(p.Patch)))
		b.forgetGone(p.ID)
	}
	rep, serr := b.exec.SweepContainers(ctx)
	if rep != nil && len(rep.Containers)+len(rep.Leases) > 0 {
		out = append(out, fmt.Sprintf("removed %d containers and %d leases whose owner died or passed its deadline", len(rep.Containers), len(rep.Leases)))
	}
	if rep != nil && len(rep.Cgroups) > 0 {
		out = append(out, fmt.Sprintf("removed the cgroups of %d containers no record names: %s", len(rep.Cgroups), strings.Join(rep.Cgroups, " ")))
	}
	if rep != nil && len(rep.RuntimeStates) > 0 {
		out = append(out, fmt.Sprintf("removed the runtime's state of %d containers nothing else was left of: %s", len(rep.RuntimeStates), strings.Join(rep.RuntimeStates, " ")))
	}
	return out, errors.Join(err, serr)
}

// Adopt opens every persistent session: mounts re-attached, ready for
// the next call. A session that cannot be opened is reported and left
// for its owner to remove.
func (b *sandboxBackend) Adopt(ctx context.Context, warmOwner func(id string) string) error {
	b.mu.Lock()
	b.warmOwner = warmOwner
	b.mu.Unlock()
	list, err := b.exec.Sessions()
	if err != nil {
		return err
	}
	n := 0
	for _, info := range list {
		if info.Err != "" {
			fmt.Fprintf(b.log, "corral daemon: session %s: %s\n", info.ID, info.Err)
			continue
		}
		if err := b.adopt(ctx, info.ID); err != nil {
			if !errdefs.IsDataLoss(err) {
				fmt.Fprintf(b.log, "corral daemon: session %s not adopted: %v\n", info.ID, err)
			}
			continue
		}
		n++
	}
	if n > 0 {
		fmt.Fprintf(b.log, "corral daemon: adopted %d session(s)\n", n)
	}
	return nil
}

func (b *sandboxBackend) Audit(ctx context.Context, id string, ev audit.Event) error {
	return b.auditLog(ctx).Log(id, ev)
}

func (b *sandboxBackend) Close() error {
	b.mu.Lock()
	open := b.open
	b.open = map[string]*sandbox.Session{}
	b.mu.Unlock()
	var errs []error
	for id, s := range open {
		if err := s.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing session %s: %w", id, err))
		}
	}
	return errors.Join(append(errs, b.exec.Close())...)
}
