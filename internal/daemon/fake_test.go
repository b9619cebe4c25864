package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/review"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/docker/go-units"
)

// fakeBackend is an in-memory Backend: sessions hold files; exec knows a
// few commands (echo, sh is refused, sleep waits for its context, flood
// writes a lot); Create panics for the profile "panic", and makes the
// session then panics for "panic-after-made" (fails for
// "fail-after-made").
type fakeBackend struct {
	mu       sync.Mutex
	sessions map[string]*fakeSession
	seq      int

	// execReturned receives the time each Exec returned.
	execReturned chan time.Time
	// canceled receives the argv of each Exec its context ended.
	canceled chan []string
	// patchDir, when set, is where Remove writes a real patch of the
	// session's files (as the executor keeps it in STATE_DIR/patches).
	patchDir string
	// audited are the events the server wrote through Audit.
	audited []audit.Event
	// patchGate, when set, holds Patch after the first file's patch is
	// written until it is closed.
	patchGate chan struct{}
}

type fakeSession struct {
	api.Session
	files map[string]string
	// memory is the memory limit of its calls: its profile's
	// ("mem-256MiB" names a profile of that limit; else 512MiB).
	memory int64
	// warmOwner is the owner key its creation named
	// (CreateConfig.WarmOwner).
	warmOwner string
}

func newFake() *fakeBackend {
	return &fakeBackend{sessions: map[string]*fakeSession{}, execReturned: make(chan time.Time, 16), canceled: make(chan []string, 16)}
}

func (f *fakeBackend) get(id string) (*fakeSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[id]
	if !ok {
		return nil, fmt.Errorf("session %s: %w", id, errdefs.ErrNotFound)
	}
	s.LastUsed = time.Now().UTC() // a call is a use, as the sandbox's touch
	return s, nil
}

func (f *fakeBackend) Warm() *api.WarmState { return nil }

func (f *fakeBackend) Containerd(context.Context) api.ContainerdState {
	return api.ContainerdState{Address: "/fake.sock", OK: true, Version: "fake"}
}

func (f *fakeBackend) Sessions(context.Context) ([]api.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []api.Session{}
	for _, s := range f.sessions {
		out = append(out, s.Session)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (f *fakeBackend) Create(_ context.Context, c CreateConfig) (api.Session, error) {
	if c.Profile == "panic" {
		panic("the backend panicked")
	}
	if c.Profile == "missing" {
		return api.Session{}, fmt.Errorf("profile %q: %w", c.Profile, errdefs.ErrNotFound)
	}
	memory := int64(512 << 20)
	if v, ok := strings.CutPrefix(c.Profile, "mem-"); ok {
		n, err := units.RAMInBytes(v)
		if err != nil {
			return api.Session{}, fmt.Errorf("profile %q: %w", c.Profile, errdefs.ErrInvalidArgument)
		}
		memory = n
	}
	if c.MaxMemory > 0 && memory > c.MaxMemory {
		return api.Session{}, &ErrCallMemory{Profile: c.Profile, Limit: memory, MemoryCap: c.MaxMemory}
	}
	// "wa-SIZE" names a profile whose write_area is SIZE (default 64MiB,
	// the built-in's).
	area := int64(64 << 20)
	if v, ok := strings.CutPrefix(c.Profile, "wa-"); ok {
		n, err := units.RAMInBytes(v)
		if err != nil {
			return api.Session{}, fmt.Errorf("profile %q: %w", c.Profile, errdefs.ErrInvalidArgument)
		}
		area = n
	}
	if c.ReserveWriteArea != nil && !c.ReadOnly {
		if err := c.ReserveWriteArea(area); err != nil {
			return api.Session{}, err
		}
	}
	if c.Profile == "fail-after-reserve" {
		return api.Session{}, fmt.Errorf("profile %q: %w: the mounts failed", c.Profile, errdefs.ErrUnavailable)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	id := fmt.Sprintf("%012x", 0xa00000+f.seq)
	if c.ID != "" {
		id = c.ID
	}
	// The idle TTL as the sandbox records it: the request's, else the
	// profile's (24h) shortened to the daemon's default.
	ttl := c.IdleTTL
	if ttl == 0 {
		ttl = 24 * time.Hour
		if c.DefaultIdleTTL > 0 && c.DefaultIdleTTL < ttl {
			ttl = c.DefaultIdleTTL
		}
	}
	now := time.Now().UTC().Truncate(time.Second)
	s := &fakeSession{Session: api.Session{ID: id, Repo: c.Repo, Profile: "docs", ProfileName: "docs", Scope: "openwiki/",
		Created: now, LastUsed: now, IdleTTLNS: int64(ttl), Mounted: true, Version: "test"}, files: map[string]string{}, memory: memory, warmOwner: c.WarmOwner}
	f.sessions[id] = s
	switch c.Profile {
	case "panic-after-made":
		panic("the backend panicked after making the session")
	case "fail-after-made":
		return api.Session{}, fmt.Errorf("profile %q: %w: failed after making the session", c.Profile, errdefs.ErrUnavailable)
	}
	return s.Session, nil
}

func (f *fakeBackend) CallMemory(_ context.Context, id string) (string, int64, error) {
	s, err := f.get(id)
	if err != nil {
		return "", 0, err
	}
	return s.Profile, s.memory, nil
}

func (f *fakeBackend) Audit(_ context.Context, id string, ev audit.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.audited = append(f.audited, ev)
	return nil
}

func (f *fakeBackend) Remove(_ context.Context, id string, discard bool) (api.Removed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[id]
	if !ok {
		return api.Removed{}, fmt.Errorf("session %s: %w", id, errdefs.ErrNotFound)
	}
	delete(f.sessions, id)
	out := api.Removed{Removed: id}
	if len(s.files) > 0 && !discard {
		out.Patch = "/state/patches/" + id + ".patch"
		if f.patchDir != "" {
			var b strings.Builder
			b.WriteString(keptPatch(s))
			out.Patch = filepath.Join(f.patchDir, id+".patch")
			if err := os.MkdirAll(f.patchDir, 0o700); err != nil {
				return out, err
			}
			if err := os.WriteFile(out.Patch, []byte(b.String()), 0o600); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// keptPatch is the patch the fake's Remove keeps of s: every file, in
// order.
func keptPatch(s *fakeSession) string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(s.files)) {
		fmt.Fprintf(&b, "diff --git a/%s b/%s\nnew file mode 100644\n--- /dev/null\n+++ b/%s\n@@ -0,0 +1 @@\n+%s\n", n, n, n, strings.TrimSuffix(s.files[n], "\n"))
	}
	return b.String()
}

func (f *fakeBackend) KeptPatchSize(_ context.Context, id string) (int64, error) {
	s, err := f.get(id)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := s.files["openwiki/unsizable.md"]; ok {
		return 0, fmt.Errorf("session %s: %w: its repository was replaced", id, errdefs.ErrFailedPrecondition)
	}
	return int64(len(keptPatch(s))), nil
}

func (f *fakeBackend) Profile(_ context.Context, id string) ([]byte, error) {
	if _, err := f.get(id); err != nil {
		return nil, err
	}
	return []byte("name: docs\ncommands: [ls, cat]\n"), nil
}

func refuse(argv []string) error {
	if argv[0] == "sh" {
		return &allowlist.Refusal{Kind: allowlist.KindCmd, Index: 0, Token: "sh", Rule: "sh is never allowed: it runs any program"}
	}
	return nil
}

func (f *fakeBackend) Check(_ context.Context, id string, argv []string) (api.Decision, error) {
	if _, err := f.get(id); err != nil {
		return api.Decision{}, err
	}
	if err := refuse(argv); err != nil {
		return api.Decision{}, err
	}
	return api.Decision{Allowed: true, Argv: argv, Reads: []string{}, Writes: []string{}}, nil
}

func (f *fakeBackend) Exec(ctx context.Context, id string, argv []string, stdout, stderr io.Writer) (*api.ExecResult, error) {
	defer func() { f.execReturned <- time.Now() }()
	if _, err := f.get(id); err != nil {
		return nil, err
	}
	if err := refuse(argv); err != nil {
		return nil, err
	}
	res := &api.ExecResult{Argv: argv, LimitsHit: []string{}, Changes: []api.Change{}, Violations: []api.Problem{}, NewViolations: []api.Problem{}}
	out := func(w io.Writer, p string) {
		if w != nil {
			_, _ = io.WriteString(w, p)
		} else if w == stdout {
			res.Stdout = append(res.Stdout, p...)
		}
	}
	switch argv[0] {
	case "echo":
		out(stdout, strings.Join(argv[1:], " ")+"\n")
		if stderr != nil {
			_, _ = io.WriteString(stderr, "note\n")
		} else {
			res.Stderr = []byte("note\n")
		}
	case "sleep":
		<-ctx.Done()
		f.canceled <- argv
		return nil, fmt.Errorf("invocation: %w", ctx.Err())
	case "flood":
		chunk := strings.Repeat("x", 64<<10)
		for range 64 {
			out(stdout, chunk)
		}
	case "false":
		res.ExitCode = 1
	}
	return res, nil
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func (f *fakeBackend) Read(_ context.Context, id string, r api.Read) (*api.ReadResult, error) {
	s, err := f.get(id)
	if err != nil {
		return nil, err
	}
	if r.Path == ".env" {
		return nil, &allowlist.Refusal{Kind: allowlist.KindPath, Index: -1, Token: ".env", Rule: "hidden by the built-in secrets list (.env)"}
	}
	f.mu.Lock()
	c, ok := s.files[r.Path]
	f.mu.Unlock()
	if !ok {
		return nil, &FileFailure{FileError: api.FileError{Op: "read", Path: r.Path, Code: "not_found"}, Message: "read: " + r.Path + ": no such file", Category: errdefs.ErrNotFound}
	}
	return &api.ReadResult{Path: r.Path, Size: int64(len(c)), SHA256: sum(c), Unit: "lines", Count: 1, NextOffset: 1, EOF: true, Content: c}, nil
}

func (f *fakeBackend) List(_ context.Context, id string, r api.List) (*api.ListResult, error) {
	if _, err := f.get(id); err != nil {
		return nil, err
	}
	return &api.ListResult{Path: ".", Entries: []api.Entry{{Path: "README.md", Type: "file", Size: 3}}}, nil
}

func (f *fakeBackend) Glob(_ context.Context, id string, r api.Glob) (*api.GlobResult, error) {
	if _, err := f.get(id); err != nil {
		return nil, err
	}
	return &api.GlobResult{Pattern: r.Pattern, Matches: []api.Entry{{Path: "README.md", Type: "file"}}}, nil
}

func (f *fakeBackend) Search(_ context.Context, id string, r api.Search) (*api.SearchResult, error) {
	if _, err := f.get(id); err != nil {
		return nil, err
	}
	return &api.SearchResult{Pattern: r.Regexp, Path: ".", Matches: []api.Match{{Path: "README.md", Line: 1, Text: "hi"}}, FilesSearched: 1}, nil
}

func (f *fakeBackend) Write(_ context.Context, id string, r api.Write, content []byte) (*api.WriteResult, error) {
	s, err := f.get(id)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(r.Path, "openwiki/") {
		return nil, &allowlist.Refusal{Kind: allowlist.KindPath, Index: -1, Token: r.Path, Rule: "outside the write scope openwiki/"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	prev, existed := s.files[r.Path]
	if r.ExpectedSHA256 != "" && (!existed || sum(prev) != r.ExpectedSHA256) {
		return nil, &FileFailure{FileError: api.FileError{Op: "write", Path: r.Path, Code: "conflict"}, Message: "write: stale revision", Category: errdefs.ErrConflict}
	}
	s.files[r.Path] = string(content)
	out := &api.WriteResult{Path: r.Path, Created: !existed, Size: int64(len(content)), SHA256: sum(string(content))}
	if existed {
		out.PreviousSHA256 = sum(prev)
	}
	return out, nil
}

func (f *fakeBackend) Edit(ctx context.Context, id string, r api.Edit) (*api.WriteResult, error) {
	s, err := f.get(id)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	c := s.files[r.Path]
	f.mu.Unlock()
	if sum(c) != r.ExpectedSHA256 {
		return nil, &FileFailure{FileError: api.FileError{Op: "edit", Path: r.Path, Code: "conflict"}, Message: "edit: stale revision", Category: errdefs.ErrConflict}
	}
	res, err := f.Write(ctx, id, api.Write{Path: r.Path}, []byte(strings.Replace(c, r.Old, r.New, 1)))
	if err == nil {
		res.Replacements = 1
	}
	return res, err
}

func (f *fakeBackend) changes(s *fakeSession) []api.Change {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []api.Change{}
	for p, c := range s.files {
		out = append(out, api.Change{Path: p, Kind: "create", AfterSHA256: sum(c), Size: int64(len(c)), Mode: 0o644})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func (f *fakeBackend) Diff(_ context.Context, id string, _ bool) (*api.ChangeSet, error) {
	s, err := f.get(id)
	if err != nil {
		return nil, err
	}
	cs := f.changes(s)
	return &api.ChangeSet{Changes: cs, Violations: []api.Problem{}, Stat: fmt.Sprintf("%d file(s) changed\n", len(cs))}, nil
}

func (f *fakeBackend) Patch(_ context.Context, id string, w io.Writer) error {
	s, err := f.get(id)
	if err != nil {
		return err
	}
	f.mu.Lock()
	if _, bad := s.files["openwiki/.openwikiignore"]; bad {
		f.mu.Unlock()
		return &changeset.RejectedError{Violations: []changeset.Problem{{Path: "openwiki/.openwikiignore", Reason: "ignore files are never written"}}}
	}
	files := maps.Clone(s.files)
	gate := f.patchGate
	f.mu.Unlock()
	for i, p := range slices.Sorted(maps.Keys(files)) {
		if _, err := fmt.Fprintf(w, "diff --git a/%s b/%s\nnew file mode 100644\n--- /dev/null\n+++ b/%s\n@@ -0,0 +1 @@\n+%s\n", p, p, p, strings.TrimSuffix(files[p], "\n")); err != nil {
			return err
		}
		if i == 0 && gate != nil {
			<-gate // the test reads the first file's patch first
		}
	}
	return nil
}

// fakePatch is f's Patch of session id, whole.
func fakePatch(ctx context.Context, f *fakeBackend, id string) ([]byte, error) {
	var b bytes.Buffer
	err := f.Patch(ctx, id, &b)
	return b.Bytes(), err
}

// fakeToken approves every change of the fake.
const fakeToken = "0123456789abcdef"

func (f *fakeBackend) Apply(_ context.Context, id string, r api.Apply, canWrite func(repo, dir, file string) error) (*api.Report, error) {
	s, err := f.get(id)
	if err != nil {
		return nil, err
	}
	rep := &api.Report{DryRun: true, Items: []api.Item{}, Written: []string{}}
	for _, c := range f.changes(s) {
		rep.Items = append(rep.Items, api.Item{Path: c.Path, Kind: c.Kind, AfterSHA256: c.AfterSHA256, Size: c.Size,
			Risk: api.Risk{Level: "low", Reasons: []string{}}, Token: fakeToken, Status: "pending"})
	}
	if len(r.Approve) == 0 {
		return rep, nil
	}
	for _, t := range r.Approve {
		if t != fakeToken {
			return nil, &review.RefusedError{Problems: []changeset.Problem{{Path: t, Reason: "approval token matches no change of this change set"}}}
		}
	}
	if _, ok := s.files["openwiki/conflict.md"]; ok {
		for i := range rep.Items {
			rep.Items[i].Status = "conflict"
		}
		return rep, &review.ConflictError{Problems: []changeset.Problem{{Path: "openwiki/conflict.md", Reason: "exists in the repository"}}}
	}
	if !r.DryRun {
		if err := canWrite(s.Repo, ".", ""); err != nil {
			return nil, err
		}
		rep.DryRun = false
	}
	for i := range rep.Items {
		rep.Items[i].Status = "would-apply"
		if !r.DryRun {
			rep.Items[i].Status = "applied"
			rep.Written = append(rep.Written, rep.Items[i].Path)
		}
	}
	return rep, nil
}

func (f *fakeBackend) Recover(context.Context) error { return nil }

func (f *fakeBackend) Sweep(context.Context) ([]string, error)          { return nil, nil }
func (f *fakeBackend) Adopt(context.Context, func(string) string) error { return nil }
func (f *fakeBackend) Close() error                                     { return nil }

// running is how many calls hold a slot of l.
func (l *limiter) running() int {
	n, _, _ := l.state()
	return n
}
