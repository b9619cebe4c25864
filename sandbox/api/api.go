// Package api holds the wire types of corral's daemon API: HTTP/1.1 and
// JSON over a unix socket, every path under /v1 (see docs/api/openapi.yaml,
// served by the daemon at GET /v1/openapi.json). It has no behaviour and
// imports nothing of corral, so any Go program can speak the API with it;
// package sandbox/client is the Go client built on it.
//
// Conventions: field names are snake_case; byte strings (a tool's stdout
// and stderr, content_b64) are base64 (standard alphabet, padded) as
// encoding/json writes []byte; durations are integer nanoseconds in fields
// ending in _ns, or Go duration strings ("90m", "24h") in request fields
// that say so; times are RFC 3339 in UTC. Lists are never null in answers.
// Within v1 changes are additive: new optional request fields, new answer
// fields, new error kinds; a client ignores what it does not know.
package api

import "time"

// Version is the API's path prefix.
const Version = "v1"

// Media types the API speaks.
const (
	// MediaJSON is every request body and every answer but the ones below.
	MediaJSON = "application/json"
	// MediaNDJSON is a streamed exec's answer: one ExecEvent per line.
	MediaNDJSON = "application/x-ndjson"
	// MediaPatch is GET .../diff?format=patch: a git-style unified patch.
	MediaPatch = "text/x-diff"
	// MediaText is GET .../diff?format=stat.
	MediaText = "text/plain; charset=utf-8"
	// MediaYAML is GET /v1/sessions/{id}/profile: the profile the session
	// recorded at creation.
	MediaYAML = "application/yaml"
)

// DefaultSocket is where the daemon listens unless told otherwise.
const DefaultSocket = "/run/corral/corral.sock"

// VersionInfo is GET /v1/version.
type VersionInfo struct {
	// Version is corral's build version (module version and VCS revision).
	Version string `json:"version"`
	// API is the API version, "v1".
	API string `json:"api"`
	// Go is the Go release the daemon was built with.
	Go string `json:"go"`
}

// Health is GET /v1/health. OK is false when containerd does not answer;
// the daemon still answers then (and says so), calls that need a
// container fail with kind unavailable.
type Health struct {
	OK         bool            `json:"ok"`
	Containerd ContainerdState `json:"containerd"`
	// Sessions is how many sessions the daemon holds open.
	Sessions int `json:"sessions"`
	// Calls is the host-wide cap on running calls and its use now.
	Calls CallsState `json:"calls"`
}

// ContainerdState is the daemon's containerd as last probed.
type ContainerdState struct {
	Address string `json:"address"`
	OK      bool   `json:"ok"`
	// Version is containerd's own version when it answered.
	Version string `json:"version,omitempty"`
	// Error says why it did not answer.
	Error string `json:"error,omitempty"`
}

// CallsState is the host-wide caps on calls that run a container (exec,
// the file tools, session creation): Running of at most Cap run now,
// Waiting wait for a slot (at most the daemon's queue wait, then kind
// busy). With the daemon's --max-memory, MemoryCap is it in bytes and
// Memory what the running calls reserve (their profiles' memory limits).
type CallsState struct {
	Running   int   `json:"running"`
	Waiting   int   `json:"waiting"`
	Cap       int   `json:"cap"`
	Memory    int64 `json:"memory,omitempty"`
	MemoryCap int64 `json:"memory_cap,omitempty"`
}

// CreateSession is POST /v1/sessions: the capability of a new persistent
// session, fixed for its whole life. Repo must be a directory the calling
// uid can read (checked as that uid). At most one of Scope, Page and
// AgentID; none of them with ReadOnly.
//
// A daemon in Pod mode (--kubelet-root) takes the repository from Volume
// instead: Repo must then be empty and Volume is required; a daemon not in
// Pod mode refuses Volume.
type CreateSession struct {
	// Repo is the repository root, an absolute host path.
	Repo string `json:"repo,omitempty"`
	// Volume is the repository as a directory of one of the calling Pod's
	// own volumes (Pod mode only).
	Volume *Volume `json:"volume,omitempty"`
	// Profile is a built-in profile name, or an absolute path to a YAML
	// profile the caller can read; "" means the default profile ("docs").
	Profile string `json:"profile,omitempty"`
	// Scope is the writable directory: "openwiki/" (the default) or a
	// directory below it.
	Scope string `json:"scope,omitempty"`
	// Page puts the session in page mode: the only writable file
	// (repo-relative, under openwiki/).
	Page string `json:"page,omitempty"`
	// AgentID makes openwiki/agents/<AgentID>/ the writable directory.
	AgentID string `json:"agent_id,omitempty"`
	// ReadOnly sessions may write nothing.
	ReadOnly bool `json:"read_only,omitempty"`
	// IdleTTL is how long the session may stay unused before prune
	// removes it: a Go duration string ("24h"), at least 1s and at most
	// the profile's idle_ttl (default 24h); "" means the profile's,
	// shortened to the daemon's --idle-ttl. It is kept in the session's
	// own record, so it holds whether or not a daemon runs. Its change
	// set is kept as a patch file when it is removed.
	IdleTTL string `json:"idle_ttl,omitempty"`
}

// Volume names a directory of one of the calling Pod's own volumes: Name
// is the volume's name in the Pod's spec (spec.volumes[].name), SubPath an
// optional relative path beneath the volume's root ("" for the root
// itself; no "..", no symbolic link on the way). The daemon finds the
// volume under the kubelet's pods directory of the Pod that called; a
// request can never name another Pod's volume nor a node path.
type Volume struct {
	Name    string `json:"name"`
	SubPath string `json:"subPath,omitempty"`
}

// Session states (Session.State).
const (
	// StateLost is a writable session whose write area (a tmpfs) did not
	// survive a reboot of the node: its writes are gone. It answers get
	// and list with StateReason, and nothing else; remove it to clear it.
	StateLost = "lost"
)

// Session is a persistent session as the API shows it.
type Session struct {
	// ID is the session's opaque id (12 lower-case hex digits).
	ID string `json:"id"`
	// Repo is the repository root (absolute, symbolic links resolved).
	Repo string `json:"repo"`
	// Profile is how the profile was named at creation; ProfileName is
	// the profile's own name.
	Profile     string `json:"profile"`
	ProfileName string `json:"profile_name"`
	// Scope is the write scope: a directory ending in "/" or a page; ""
	// when read-only.
	Scope string `json:"scope"`
	// WriteDir is the writable directory as given at creation (Scope's
	// source; "" for the default).
	WriteDir string `json:"write_dir,omitempty"`
	Page     string `json:"page,omitempty"`
	AgentID  string `json:"agent_id,omitempty"`
	ReadOnly bool   `json:"read_only"`
	// Owner is the uid that created the session (its SO_PEERCRED uid);
	// only it, root and the daemon's admin group see the session.
	Owner int `json:"owner"`
	// OwnedBy names the owner as the daemon decides visibility:
	// "uid:<uid>", or in Pod mode "pod:<pod uid>" (the calling Pod, from
	// its process's cgroup); only that Pod and the daemon's admins see
	// such a session.
	OwnedBy string `json:"owned_by"`
	// Volume is the Pod volume the repository came from (Pod mode).
	Volume *Volume `json:"volume,omitempty"`
	// State is "" for a usable session, StateLost for one whose writes
	// are gone; StateReason says why.
	State       string `json:"state,omitempty"`
	StateReason string `json:"state_reason,omitempty"`
	// Created is when the session was made; LastUsed when a call last
	// touched it through this daemon.
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used"`
	// IdleTTLNS is the idle time, in nanoseconds, after which prune
	// removes the session.
	IdleTTLNS int64 `json:"idle_ttl_ns"`
	// Mounted says the session's host mounts are present.
	Mounted bool `json:"mounted"`
	// Version is the corral that created the session.
	Version string `json:"corral_version"`
	// Error is set when the session's record could not be read (admins
	// only see such sessions).
	Error string `json:"error,omitempty"`
}

// Removed is DELETE /v1/sessions/{id}. Patch, when set, is the host path
// of the patch file the session's change set was kept in (no file when
// the set was empty or rejected, or with ?discard=true; see PatchError).
type Removed struct {
	Removed string `json:"removed"`
	// Repo is the session's repository.
	Repo  string `json:"repo,omitempty"`
	Patch string `json:"patch,omitempty"`
	// Changes counts the changes kept in Patch; Violations are the
	// changes the set was rejected for (listed, not kept); Lost says why
	// nothing could be kept (the write area was gone).
	Changes    int       `json:"changes,omitempty"`
	Violations []Problem `json:"violations,omitempty"`
	Lost       string    `json:"lost,omitempty"`
	// PatchError says why a non-empty change set could not be kept as a
	// patch (it was rejected); its violations are listed.
	PatchError string `json:"patch_error,omitempty"`
}

// Prune is POST /v1/sessions/prune: remove the caller's sessions (all,
// for admins) unused for IdleFor (a Go duration string), or past their
// own idle TTL when IdleFor is "".
type Prune struct {
	IdleFor string `json:"idle_for,omitempty"`
}

// Pruned is prune's answer.
type Pruned struct {
	Pruned []Removed `json:"pruned"`
}

// Check is POST /v1/sessions/{id}/check: decide an argv, run nothing.
type Check struct {
	Argv []string `json:"argv"`
}

// Decision is a permitted argv. A refused one is an Error of kind
// refused (HTTP 403) with its Refusal.
type Decision struct {
	Allowed bool `json:"allowed"`
	// Argv is what would run: normalized (options spelled in full).
	Argv []string `json:"argv"`
	// Reads and Writes are the canonical repository paths the argv names.
	Reads  []string `json:"reads"`
	Writes []string `json:"writes"`
}

// Exec is POST /v1/sessions/{id}/exec. With Stream (or the request header
// Accept: application/x-ndjson) the answer is NDJSON: ExecEvent lines with
// output as it arrives, then one with the result (or an error).
type Exec struct {
	Argv   []string `json:"argv"`
	Stream bool     `json:"stream,omitempty"`
}

// Limits hit, as in ExecResult.LimitsHit.
const (
	LimitTimeout   = "timeout"    // the wall-clock timeout killed the tool
	LimitMemory    = "memory"     // the OOM killer killed a process
	LimitPids      = "pids"       // a fork or clone failed at pids.max
	LimitOutput    = "output"     // stdout or stderr passed its cap; the tool was killed
	LimitWriteArea = "write_area" // the write area is full (ENOSPC)
)

// ExecResult is one command's outcome. A non-zero exit is a result, not
// an error.
type ExecResult struct {
	// Argv is what ran (normalized).
	Argv []string `json:"argv"`
	// ExitCode is the tool's status; 128+N when a signal N ended it.
	ExitCode int `json:"exit_code"`
	// DurationNS is the wall time from start to exit, in nanoseconds.
	DurationNS int64 `json:"duration_ns"`
	// LimitsHit names each limit reached (Limit* constants).
	LimitsHit []string `json:"limits_hit"`
	// Stdout and Stderr hold at most the profile's output cap each
	// (base64). A streamed exec leaves them out: the output came in the
	// stream.
	Stdout          []byte `json:"stdout,omitempty"`
	Stderr          []byte `json:"stderr,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	// Changes is the session's whole change set after the call, and
	// Violations its violations: any one rejects the set.
	Changes    []Change  `json:"changes"`
	Violations []Problem `json:"violations"`
	// NewViolations are the violations this call introduced (the CLI
	// exits 123 exactly when there are any).
	NewViolations []Problem `json:"new_violations"`
	// Stat is the change set's one-line-per-change summary (ChangeSet.Stat).
	Stat string `json:"stat"`
}

// ExecEvent is one line of a streamed exec: exactly one field is set.
type ExecEvent struct {
	Stdout []byte      `json:"stdout,omitempty"`
	Stderr []byte      `json:"stderr,omitempty"`
	Result *ExecResult `json:"result,omitempty"`
	Error  *Error      `json:"error,omitempty"`
}

// Read is POST /v1/sessions/{id}/files:read: a window of a file. Offset
// and Limit count lines, or bytes with Unit "bytes"; 0 means the start
// and the default (2000 lines; never more than 256 KiB).
type Read struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset,omitempty"`
	Limit  int64  `json:"limit,omitempty"`
	// Unit is "lines" (the default) or "bytes".
	Unit string `json:"unit,omitempty"`
}

// ReadResult is a window of a file. Unit is "lines" or "bytes"; Offset is
// where Content starts, Count how many units it holds, NextOffset where
// the next window starts; EOF says Content reaches the end; Truncated
// says a limit cut it short. SHA256 is the whole file's digest (the
// revision edit expects; "" above 8 MiB). Binary files have Binary set and
// no Content. Size is in bytes.
type ReadResult struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
	Unit       string `json:"unit"`
	Offset     int64  `json:"offset"`
	Count      int64  `json:"count"`
	NextOffset int64  `json:"next_offset"`
	EOF        bool   `json:"eof"`
	Truncated  bool   `json:"truncated"`
	Binary     bool   `json:"binary"`
	Content    string `json:"content"`
}

// List is POST /v1/sessions/{id}/files:list; Path "" means the root.
type List struct {
	Path string `json:"path,omitempty"`
}

// Entry is a directory entry or glob match: Type is "file", "dir",
// "symlink" or "other"; Size (bytes) is set for files by list.
type Entry struct {
	Path string `json:"path"`
	Type string `json:"type"`
	Size int64  `json:"size,omitempty"`
}

// ListResult is a directory's visible entries, sorted by name.
type ListResult struct {
	Path      string  `json:"path"`
	Entries   []Entry `json:"entries"`
	Truncated bool    `json:"truncated"`
}

// Glob is POST /v1/sessions/{id}/files:glob. Max bounds the matches (0:
// 200, at most 2000).
type Glob struct {
	Pattern string `json:"pattern"`
	Max     int    `json:"max,omitempty"`
}

// GlobResult is a glob's visible matches, sorted by path.
type GlobResult struct {
	Pattern   string  `json:"pattern"`
	Matches   []Entry `json:"matches"`
	Truncated bool    `json:"truncated"`
}

// Search is POST /v1/sessions/{id}/files:search: Regexp (Go RE2 syntax,
// at most 4096 bytes) matched against each line of the file or the files
// below the directory Path ("" for the root). Include is a base-name glob
// ("*.go"); Max bounds the matches (0: 200, at most 2000).
type Search struct {
	Regexp     string `json:"regexp"`
	Path       string `json:"path,omitempty"`
	Include    string `json:"include,omitempty"`
	IgnoreCase bool   `json:"ignore_case,omitempty"`
	Max        int    `json:"max,omitempty"`
}

// Match is one matching line; Line counts from 1.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// SearchResult is a search's matches in path and line order, with the
// files skipped as binary or larger than 4 MiB counted.
type SearchResult struct {
	Pattern       string  `json:"pattern"`
	Path          string  `json:"path"`
	Matches       []Match `json:"matches"`
	Truncated     bool    `json:"truncated"`
	FilesSearched int     `json:"files_searched"`
	SkippedBinary int     `json:"skipped_binary"`
	SkippedLarge  int     `json:"skipped_large"`
}

// Write is POST /v1/sessions/{id}/files:write: the file's whole new
// content, as a UTF-8 string (Content) or base64 (ContentB64), exactly one
// of them; UTF-8 text of at most 8 MiB either way. With ExpectedSHA256
// the file must exist with that revision (else kind conflict).
type Write struct {
	Path           string `json:"path"`
	Content        string `json:"content,omitempty"`
	ContentB64     []byte `json:"content_b64,omitempty"`
	ExpectedSHA256 string `json:"expected_sha256,omitempty"`
}

// Edit is POST /v1/sessions/{id}/files:edit: replace Old by New in the
// file whose current sha256 is ExpectedSHA256. Old must occur exactly
// once, or at least once with All.
type Edit struct {
	Path           string `json:"path"`
	Old            string `json:"old"`
	New            string `json:"new"`
	All            bool   `json:"all,omitempty"`
	ExpectedSHA256 string `json:"expected_sha256"`
}

// WriteResult is a file after a write or an edit. PreviousSHA256 is ""
// when the write created it; Size is in bytes.
type WriteResult struct {
	Path           string `json:"path"`
	Created        bool   `json:"created"`
	Size           int64  `json:"size"`
	SHA256         string `json:"sha256"`
	PreviousSHA256 string `json:"previous_sha256"`
	Replacements   int    `json:"replacements,omitempty"`
}

// Change is one regular file the session created, modified or deleted.
// Kind is "create", "modify" or "delete"; the digests are lower-case hex
// sha256, "" for the absent side; Size is the new size in bytes and Mode
// the new permission bits (both 0 for a delete).
type Change struct {
	Path         string `json:"path"`
	Kind         string `json:"kind"`
	BeforeSHA256 string `json:"before_sha256"`
	AfterSHA256  string `json:"after_sha256"`
	Size         int64  `json:"size"`
	Mode         uint32 `json:"mode"`
	// Before and After are the file's bytes on each side (base64), only
	// in GET .../diff?format=json&contents=true; absent for the absent
	// side.
	Before []byte `json:"before,omitempty"`
	After  []byte `json:"after,omitempty"`
}

// Problem is a path and why it stops a change set, an apply or a patch.
// A path unsafe to print is given Go-quoted (it then starts with '"').
type Problem struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// ChangeSet is GET /v1/sessions/{id}/diff?format=json (the default):
// the session's change set so far; with contents=true each change carries
// its bytes. Any violation rejects it (the patch
// form is then refused with kind rejected).
type ChangeSet struct {
	Changes    []Change  `json:"changes"`
	Violations []Problem `json:"violations"`
	// Stat is the one-line-per-change summary corral prints.
	Stat string `json:"stat"`
}

// Apply is POST /v1/sessions/{id}/apply. With no Approve it is a review:
// every change with its risk and token, nothing written. With Approve
// (tokens from a review) the approved changes are written, all or none,
// unless DryRun. DryRunOnly lists risk classes ("low", "medium", "high")
// never written even when approved.
//
// With Diffs each item of the report carries its change as a unified
// patch (Item.Diff), for a reviewer who has not fetched the change set.
type Apply struct {
	Approve    []string `json:"approve,omitempty"`
	DryRun     bool     `json:"dry_run,omitempty"`
	DryRunOnly []string `json:"dry_run_only,omitempty"`
	Diffs      bool     `json:"diffs,omitempty"`
}

// Risk is a change's risk class ("low", "medium", "high") recomputed from
// its bytes, and why.
type Risk struct {
	Level   string   `json:"level"`
	Reasons []string `json:"reasons"`
}

// Item is one change as a reviewer sees it. Status is "pending",
// "would-apply", "applied", "not-approved", "dry-run-only", "conflict" or
// "refused"; Detail says why for the last three. Token approves exactly
// this change (its path, kind, content and risk).
type Item struct {
	Path         string `json:"path"`
	Kind         string `json:"kind"`
	BeforeSHA256 string `json:"before_sha256,omitempty"`
	AfterSHA256  string `json:"after_sha256,omitempty"`
	Size         int64  `json:"size"`
	Risk         Risk   `json:"risk"`
	Token        string `json:"token"`
	Status       string `json:"status,omitempty"`
	Detail       string `json:"detail,omitempty"`
	// Diff is the change as a git-style unified patch (Apply.Diffs), and
	// DiffError why it could not be made; both "" for an item that is no
	// change of the set.
	Diff      string `json:"diff,omitempty"`
	DiffError string `json:"diff_error,omitempty"`
}

// Report is apply's answer: every change, highest risk first; DryRun is
// true when nothing was written; Written lists the paths written.
type Report struct {
	Items   []Item   `json:"items"`
	DryRun  bool     `json:"dry_run"`
	Written []string `json:"written"`
}

// PodPatch is one entry of GET /v1/patches (admins only): the change set of
// a session that ended because its owner Pod was deleted, kept as a patch
// on the node (STATE_DIR/patches/<pod uid>/<session id>.patch). GET
// /v1/patches/{id} answers the patch itself (MediaPatch).
type PodPatch struct {
	// ID is the session's id, and the patch's.
	ID string `json:"id"`
	// PodUID is the Pod that owned the session (Pod mode); "" outside
	// Pod mode.
	PodUID string `json:"pod_uid"`
	// OwnedBy is the owner of the kept patch, as a session's owned_by
	// ("pod:UID", "uid:N"); absent for a patch of root's (a session of
	// root's, or one kept before owners had directories), which only the
	// admins see.
	OwnedBy string `json:"owned_by,omitempty"`
	// Volume is the Pod volume the session's repository came from.
	Volume *Volume `json:"volume,omitempty"`
	// Ended is when the session was ended.
	Ended time.Time `json:"ended"`
	// Files are the repository-relative paths the patch changes (never
	// null).
	Files []string `json:"files"`
	// Path is the patch file's path on the node; "" when the change set
	// was empty (no file).
	Path string `json:"path,omitempty"`
	// Error says what went wrong keeping the change set (rejected
	// changes, a failed write); the patch then holds what could be kept.
	Error string `json:"error,omitempty"`
}
