package daemon

import (
	"context"
	"io"
	"time"

	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/internal/fscred"
	"github.com/corral-sandbox/corral/sandbox/api"
)

// Backend is what the handlers need of corral's sessions, in the API's own
// types. backend.go implements it over package sandbox and package review
// (the only file of the daemon that calls them); tests use a fake. Every
// method that acts for a client gets the request's context, which carries
// the peer (peerOf) for the audit log. Errors carry errdefs categories,
// *allowlist.Refusal, review's and changeset's error types, or
// *FileFailure; errors.go maps them to API errors.
//
// Authorization is not the backend's: the handlers check that the peer
// may see a session before they name it to the backend.
type Backend interface {
	// Containerd probes containerd.
	Containerd(ctx context.Context) api.ContainerdState
	// Warm reports the containers created ahead of calls; nil when none
	// are (a cold executor).
	Warm() *api.WarmState
	// Sessions lists the persistent sessions of the state directory, each
	// with its idle TTL and latest use from its own record (without
	// Owner, which the daemon adds).
	Sessions(ctx context.Context) ([]api.Session, error)
	// Create makes a persistent session with the capability c.
	Create(ctx context.Context, c CreateConfig) (api.Session, error)
	// Remove removes the session, keeping a non-empty change set as a
	// patch file unless discard.
	Remove(ctx context.Context, id string, discard bool) (api.Removed, error)
	// Profile returns the profile the session recorded at creation, as
	// YAML (profiles.Parse reads it back).
	Profile(ctx context.Context, id string) ([]byte, error)
	// CallMemory returns the session's profile name and the memory limit,
	// in bytes, that each of its containers gets (the profile's
	// resources.memory: the container cgroup's memory.max), which a call
	// reserves against the daemon's --max-memory.
	CallMemory(ctx context.Context, id string) (profile string, memory int64, err error)
	// Check decides argv in the session; runs nothing.
	Check(ctx context.Context, id string, argv []string) (api.Decision, error)
	// Exec runs argv in a fresh container of the session, stdout and
	// stderr (either may be nil) receiving the output as it arrives, and
	// collects the change set after it (with the violations this call
	// introduced).
	Exec(ctx context.Context, id string, argv []string, stdout, stderr io.Writer) (*api.ExecResult, error)
	Read(ctx context.Context, id string, r api.Read) (*api.ReadResult, error)
	List(ctx context.Context, id string, r api.List) (*api.ListResult, error)
	Glob(ctx context.Context, id string, r api.Glob) (*api.GlobResult, error)
	Search(ctx context.Context, id string, r api.Search) (*api.SearchResult, error)
	Write(ctx context.Context, id string, r api.Write, content []byte) (*api.WriteResult, error)
	Edit(ctx context.Context, id string, r api.Edit) (*api.WriteResult, error)
	// Diff collects the session's change set (each change with its
	// bytes when contents); Patch renders it as a unified patch into w,
	// one file at a time, never holding the whole patch (a
	// *changeset.RejectedError when it has violations, before anything
	// is written to w).
	Diff(ctx context.Context, id string, contents bool) (*api.ChangeSet, error)
	Patch(ctx context.Context, id string, w io.Writer) error
	// KeptPatchSize is the size in bytes of the patch Remove without
	// discard would keep now: the change set without its rejected
	// changes (0 when nothing would be kept), counted as it is rendered,
	// never held whole.
	KeptPatchSize(ctx context.Context, id string) (int64, error)
	// Apply reviews the session's change set, and writes the approved
	// changes unless r says dry run; with r.Diffs each item carries its
	// change as a patch. canWrite is called, before anything is
	// written, with each repository directory the apply would write into
	// (repo-relative, the deepest one that exists) and the change's file
	// (repo-relative), which the apply creates, replaces or removes; an
	// error refuses the apply.
	Apply(ctx context.Context, id string, r api.Apply, canWrite func(repo, dir, file string) error) (*api.Report, error)
	// Recover sweeps what a crash left: interrupted applies, containers,
	// leases and mounts of dead owners.
	Recover(ctx context.Context) error
	// Sweep is the periodic sweep: sessions no process holds that are past
	// their idle TTL (their change sets kept as patches), and containers
	// whose owner died or passed its deadline. It says what it removed.
	Sweep(ctx context.Context) ([]string, error)
	// Adopt opens every persistent session of the state directory: host
	// mounts re-attached, ready to serve. Adopting is not a use: a
	// session's idle TTL keeps counting from its latest call. warmOwner
	// names each session's owner key, under which its containers created
	// ahead share the executor's cap (sandbox.SessionConfig.WarmOwner),
	// for the sessions adopted and for those opened later on first use.
	Adopt(ctx context.Context, warmOwner func(id string) string) error
	// Audit writes ev to the audit log for session id, naming the peer
	// ctx carries (the daemon's own events: a session ended with its
	// Pod).
	Audit(ctx context.Context, id string, ev audit.Event) error
	// Close lets go of every open session without removing any, then of
	// containerd.
	Close() error
}

// CreateConfig is a checked session creation: Repo is the directory the
// peer could read, with symbolic links resolved, and RepoDev/RepoIno its
// identity when the peer opened it; the backend refuses the session when
// the directory it mounted is another one (the path was swapped).
//
// ProfileData, when set, is the profile file Profile names, as the peer
// read it: the backend parses these bytes and never opens the file.
//
// IdleTTL is the request's idle TTL (0: it named none; the profile's
// idle_ttl bounds it); a session whose request named none gets the
// profile's idle_ttl, shortened to DefaultIdleTTL when that is shorter
// (the daemon's --idle-ttl).
//
// MaxMemory, when above 0, is the daemon's --max-memory: a profile whose
// memory limit per call is above it is refused (*ErrCallMemory) before
// anything is made.
type CreateConfig struct {
	api.CreateSession
	// ID is the new session's id (sandbox.NewSessionID), chosen by the
	// server so that its owner record is written before the session is
	// made.
	ID string
	// CopyAs, when set, are the caller's credentials: what the session
	// copies out of the repository (its write directory, or its page) is
	// read with them (sandbox.SessionConfig.CopyAs).
	CopyAs *fscred.Creds
	// WarmOwner is the session's owner key for its share of the
	// containers created ahead (sandbox.SessionConfig.WarmOwner; "" for
	// none: root's).
	WarmOwner        string
	RepoDev, RepoIno uint64
	ProfileData      []byte
	IdleTTL          time.Duration
	DefaultIdleTTL   time.Duration
	MaxMemory        int64
	// ReserveWriteArea, when set, is called once with the write area
	// (bytes) of a writable session after its profile is read and
	// before anything is made; its error refuses the creation.
	ReserveWriteArea func(bytes int64) error
}

// FileFailure is a file tool that ran and failed inside the container;
// Category is its errdefs category.
type FileFailure struct {
	api.FileError
	Message  string
	Category error
}

func (e *FileFailure) Error() string { return e.Message }

// Unwrap returns the errdefs category.
func (e *FileFailure) Unwrap() error { return e.Category }
