package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Event is a typed audit event: the payload of one Envelope. Each type is
// a struct in this file; EventType names it in the envelope.
type Event interface {
	EventType() string
}

// The event types, as written in Envelope.Type.
const (
	TypeSessionCreated = "session_created"
	TypeInvocation     = "invocation"
	TypeRefusal        = "refusal"
	TypeChangeSet      = "changeset"
	TypeApproval       = "approval"
	TypeApplyStarted   = "apply_started"
	TypeApply          = "apply"
	TypeApplyRecovered = "apply_recovered"
	TypeSessionLost    = "session_lost"
	TypeSessionEnded   = "session_ended"
	TypePatchRemoved   = "patch_removed"
	TypePatchBudget    = "patch_budget"
)

// Decisions of an invocation.
const (
	Allowed = "allowed"
	Refused = "refused"
)

// Capability is a session's write capability as the launcher fixed it.
type Capability struct {
	// Mode is "read-only", "dir" or "page".
	Mode string `json:"mode"`
	Dir  string `json:"dir,omitempty"`
	Page string `json:"page,omitempty"`
	// Agent is the agent id of a per-agent write area, if any.
	Agent string `json:"agent,omitempty"`
}

// SessionCreated: a session and its capability, before its host mounts
// and record are made.
type SessionCreated struct {
	Repo       string     `json:"repo"`
	Profile    string     `json:"profile"`
	Capability Capability `json:"capability"`
}

// Invocation: one command, the policy's decision (Allowed or Refused) and
// the rule that refused it; for one that ran, its exit code, duration and
// the limits it hit. Error is set for an allowed one whose call failed
// (its caller went away, containerd or the container's shim stopped
// answering, its container could not be made): the call's error on one
// line (Failed); with an exit code too when the tool's exit was seen all
// the same (Ran, then Failed's Error).
type Invocation struct {
	Argv       []string `json:"argv"`
	Decision   string   `json:"decision"`
	Rule       string   `json:"rule,omitempty"`
	ExitCode   *int     `json:"exit_code,omitempty"`
	DurationMS *float64 `json:"duration_ms,omitempty"`
	LimitsHit  []string `json:"limits_hit,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// maxFailedError bounds Failed's Error, in bytes, "…" included.
const maxFailedError = 1024

// Failed returns an allowed Invocation whose call failed with err: Error
// is err's message folded onto one line (every run of white space, line
// breaks included, one space), cut at maxFailedError bytes on a UTF-8
// boundary with "…"; "(no message)" when that leaves nothing.
func Failed(argv []string, err error) *Invocation {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if len(msg) > maxFailedError {
		cut := maxFailedError - len("…")
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	if msg == "" {
		msg = "(no message)"
	}
	return &Invocation{Argv: argv, Decision: Allowed, Error: msg}
}

// Ran returns an allowed Invocation that ran: exit code, duration and
// limits hit.
func Ran(argv []string, exitCode int, d time.Duration, limitsHit []string) *Invocation {
	ms := float64(d.Microseconds()) / 1000
	return &Invocation{Argv: argv, Decision: Allowed, ExitCode: &exitCode, DurationMS: &ms, LimitsHit: limitsHit}
}

// Refusal: a decision against a request at a stage ("invocation",
// "changeset", "patch", "review", "approval", "apply", "read" …). Rule is
// the rule that refused it when the caller knows one.
type Refusal struct {
	Stage string `json:"stage"`
	Rule  string `json:"rule,omitempty"`
	Error string `json:"error"`
}

// ChangeSet: a collected change set by the sha256 of its canonical JSON
// (see DigestJSON), with its counts.
type ChangeSet struct {
	SHA256     string `json:"sha256"`
	Changes    int    `json:"changes"`
	Violations int    `json:"violations"`
}

// Approval: one change a reviewer approved, bound to its content.
type Approval struct {
	Path         string `json:"path"`
	Kind         string `json:"kind"`
	Token        string `json:"token"`
	Risk         string `json:"risk"`
	BeforeSHA256 string `json:"before_sha256,omitempty"`
	AfterSHA256  string `json:"after_sha256,omitempty"`
}

// ApplyStarted: an apply about to write Files to Repo as transaction TxID
// (its journal is written).
type ApplyStarted struct {
	Repo  string   `json:"repo"`
	TxID  string   `json:"tx_id"`
	Files []string `json:"files"`
}

// Apply: an apply to Repo; a dry run, or the files written by TxID.
type Apply struct {
	Repo   string   `json:"repo"`
	TxID   string   `json:"tx_id,omitempty"`
	DryRun bool     `json:"dry_run"`
	Files  []string `json:"files"`
}

// ApplyRecovered: an interrupted apply found in the journal and finished
// ("committed") or rolled back ("rolled-back"); Left lists what could not
// be restored.
type ApplyRecovered struct {
	Repo    string   `json:"repo"`
	TxID    string   `json:"tx_id"`
	Outcome string   `json:"outcome"`
	Left    []string `json:"left,omitempty"`
}

// SessionLost: a writable session found, when the daemon re-adopted it,
// without its write area (a tmpfs: the machine rebooted), so what it wrote
// is gone. The session is kept and reported lost, never recreated empty.
type SessionLost struct {
	Repo   string `json:"repo"`
	Reason string `json:"reason"`
}

// SessionEnded: a session ended by the daemon, not by a client: Reason
// says why (its owner Pod was deleted: Pod), Patch is the file its change
// set was kept in ("" for none) and Files the paths it changes.
type SessionEnded struct {
	Reason string   `json:"reason"`
	Pod    string   `json:"pod,omitempty"`
	Patch  string   `json:"patch,omitempty"`
	Files  []string `json:"files,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// PatchRemoved: the daemon removed a kept patch (Patch, of the session
// the record is of, owned by Pod): Reason says why (past the daemon's
// --kept-patch-retention, or removed by its owner or an admin).
type PatchRemoved struct {
	Reason string   `json:"reason"`
	Pod    string   `json:"pod,omitempty"`
	Patch  string   `json:"patch,omitempty"`
	Files  []string `json:"files,omitempty"`
}

// PatchBudget: a session end that no one could be asked about (an idle
// expiry, a deleted Pod) kept a patch that put its Owner over the
// daemon's --max-kept-patch-bytes: Kept bytes kept against Budget. The
// patch is kept; the owner may create no session until it is under.
type PatchBudget struct {
	Owner  string `json:"owner"`
	Kept   int64  `json:"kept"`
	Budget int64  `json:"budget"`
	Patch  string `json:"patch,omitempty"`
}

func (*PatchRemoved) EventType() string   { return TypePatchRemoved }
func (*PatchBudget) EventType() string    { return TypePatchBudget }
func (*SessionCreated) EventType() string { return TypeSessionCreated }
func (*SessionLost) EventType() string    { return TypeSessionLost }
func (*SessionEnded) EventType() string   { return TypeSessionEnded }
func (*Invocation) EventType() string     { return TypeInvocation }
func (*Refusal) EventType() string        { return TypeRefusal }
func (*ChangeSet) EventType() string      { return TypeChangeSet }
func (*Approval) EventType() string       { return TypeApproval }
func (*ApplyStarted) EventType() string   { return TypeApplyStarted }
func (*Apply) EventType() string          { return TypeApply }
func (*ApplyRecovered) EventType() string { return TypeApplyRecovered }

// newEvent returns an empty event of type t, for decoding.
func newEvent(t string) (Event, error) {
	switch t {
	case TypeSessionCreated:
		return &SessionCreated{}, nil
	case TypeInvocation:
		return &Invocation{}, nil
	case TypeRefusal:
		return &Refusal{}, nil
	case TypeChangeSet:
		return &ChangeSet{}, nil
	case TypeApproval:
		return &Approval{}, nil
	case TypeApplyStarted:
		return &ApplyStarted{}, nil
	case TypeApply:
		return &Apply{}, nil
	case TypeApplyRecovered:
		return &ApplyRecovered{}, nil
	case TypeSessionLost:
		return &SessionLost{}, nil
	case TypeSessionEnded:
		return &SessionEnded{}, nil
	case TypePatchRemoved:
		return &PatchRemoved{}, nil
	case TypePatchBudget:
		return &PatchBudget{}, nil
	}
	return nil, fmt.Errorf("unknown audit event type %q", t)
}

// DigestJSON returns the hex sha256 of v's encoding/json form: for a
// change set, its paths, kinds, content digests, sizes, modes and
// violations (the content itself is bound through its digests).
func DigestJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encoding for the audit digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
