package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"golang.org/x/sys/unix"
)

// FileName is the audit log's name in the state directory.
const FileName = "audit.log"

// The event types.
const (
	EventSessionCreated = "session_created"
	EventInvocation     = "invocation"
	EventRefusal        = "refusal"
	EventChangeSet      = "changeset"
	EventApproval       = "approval"
	EventApply          = "apply"
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

// CapabilityOf describes scope.
func CapabilityOf(scope allowlist.Scope) Capability {
	switch {
	case scope.ReadOnly || (scope.Dir == "" && scope.Page == ""):
		return Capability{Mode: "read-only"}
	case scope.Page != "":
		return Capability{Mode: "page", Page: scope.Page}
	}
	return Capability{Mode: "dir", Dir: scope.Dir}
}

// Event is one line of the log. Fields that do not apply to an event type
// are omitted.
type Event struct {
	Time    time.Time `json:"time"`
	Event   string    `json:"event"`
	Session string    `json:"session,omitempty"`
	// User, UID and PID identify the supervisor process that wrote the
	// event; SudoUser is $SUDO_USER when it ran under sudo.
	User     string `json:"user"`
	UID      int    `json:"uid"`
	SudoUser string `json:"sudo_user,omitempty"`
	PID      int    `json:"pid"`

	// session_created
	Repo       string      `json:"repo,omitempty"`
	Profile    string      `json:"profile,omitempty"`
	Capability *Capability `json:"capability,omitempty"`

	// invocation and refusal
	Argv       []string `json:"argv,omitempty"`
	Decision   string   `json:"decision,omitempty"`
	Rule       string   `json:"rule,omitempty"`
	ExitCode   *int     `json:"exit_code,omitempty"`
	DurationMS *float64 `json:"duration_ms,omitempty"`
	LimitsHit  []string `json:"limits_hit,omitempty"`
	// Stage names what refused: "invocation", "changeset", "review",
	// "apply", …
	Stage string `json:"stage,omitempty"`
	Error string `json:"error,omitempty"`

	// changeset
	ChangeSetSHA256 string `json:"changeset_sha256,omitempty"`
	Changes         *int   `json:"changes,omitempty"`
	Violations      *int   `json:"violations,omitempty"`

	// approval
	Path         string `json:"path,omitempty"`
	Kind         string `json:"kind,omitempty"`
	Token        string `json:"token,omitempty"`
	Risk         string `json:"risk,omitempty"`
	BeforeSHA256 string `json:"before_sha256,omitempty"`
	AfterSHA256  string `json:"after_sha256,omitempty"`

	// apply
	DryRun *bool    `json:"dry_run,omitempty"`
	Files  []string `json:"files,omitempty"`
}

// Logger appends events to its files. It is safe for concurrent use; the
// caller must call Close.
type Logger struct {
	mu       sync.Mutex
	files    []*os.File
	user     string
	uid      int
	sudoUser string
	pid      int
	now      func() time.Time
}

// Open opens (creating them 0600) stateDir/audit.log and, when extra is not
// "", the file extra, both for appending. stateDir is made 0700 when
// missing; the log in it is opened without following a symbolic link.
func Open(stateDir, extra string) (*Logger, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	l := &Logger{uid: os.Getuid(), pid: os.Getpid(), now: time.Now, sudoUser: os.Getenv("SUDO_USER")}
	l.user = strconv.Itoa(l.uid)
	if u, err := user.Current(); err == nil {
		l.user = u.Username
	}
	paths := []string{filepath.Join(stateDir, FileName)}
	if extra != "" {
		paths = append(paths, extra)
	}
	for i, p := range paths {
		flags := os.O_WRONLY | os.O_APPEND | os.O_CREATE | unix.O_CLOEXEC
		if i == 0 {
			flags |= unix.O_NOFOLLOW
		}
		f, err := os.OpenFile(p, flags, 0o600)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("opening the audit log: %w", err)
		}
		l.files = append(l.files, f)
	}
	return l, nil
}

// Close closes the files. It is safe on a nil Logger and more than once.
func (l *Logger) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, f := range l.files {
		errs = append(errs, f.Close())
	}
	l.files = nil
	return errors.Join(errs...)
}

// Log fills in e's time and identity and appends it to every file as one
// line, written with a single write and fsynced. A nil Logger logs nothing.
func (l *Logger) Log(e Event) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.files == nil {
		return errors.New("audit log is closed")
	}
	e.Time = l.now().UTC()
	e.User, e.UID, e.SudoUser, e.PID = l.user, l.uid, l.sudoUser, l.pid
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encoding audit event: %w", err)
	}
	line = append(line, '\n')
	var errs []error
	for _, f := range l.files {
		if _, err := f.Write(line); err != nil {
			errs = append(errs, fmt.Errorf("writing audit log %s: %w", f.Name(), err))
			continue
		}
		// A character device or pipe (e.g. --audit /dev/stderr) cannot
		// be synced; that is not a failure.
		if err := f.Sync(); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EROFS) {
			errs = append(errs, fmt.Errorf("syncing audit log %s: %w", f.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// SessionCreated records a new session and its capability.
func (l *Logger) SessionCreated(session, repo, profile string, scope allowlist.Scope) error {
	c := CapabilityOf(scope)
	return l.Log(Event{Event: EventSessionCreated, Session: session, Repo: repo, Profile: profile, Capability: &c})
}

// Invocation records one invocation: its argv, the decision (Allowed or
// Refused) and the rule that refused it, and for one that ran its exit
// code, duration and limits hit (exitCode < 0 when it did not run).
func (l *Logger) Invocation(session string, argv []string, decision, rule string, exitCode int, d time.Duration, limitsHit []string) error {
	e := Event{Event: EventInvocation, Session: session, Argv: argv, Decision: decision, Rule: rule, LimitsHit: limitsHit}
	if exitCode >= 0 {
		ms := float64(d.Microseconds()) / 1000
		e.ExitCode, e.DurationMS = &exitCode, &ms
	}
	return l.Log(e)
}

// Refusal records a decision against a request at stage ("invocation",
// "changeset", "review", "apply", …); a *allowlist.Refusal gives its rule.
func (l *Logger) Refusal(session, stage string, err error) error {
	if err == nil {
		return nil
	}
	e := Event{Event: EventRefusal, Session: session, Stage: stage, Error: err.Error()}
	var r *allowlist.Refusal
	if errors.As(err, &r) {
		e.Rule = r.Rule
	}
	return l.Log(e)
}

// ChangeSet records a collected change set by its digest (see Digest).
func (l *Logger) ChangeSet(session string, cs *changeset.Set) error {
	if l == nil {
		return nil
	}
	digest, err := Digest(cs)
	if err != nil {
		return err
	}
	n, v := 0, 0
	if cs != nil {
		n, v = len(cs.Changes), len(cs.Violations)
	}
	return l.Log(Event{Event: EventChangeSet, Session: session, ChangeSetSHA256: digest, Changes: &n, Violations: &v})
}

// Approval records one approved change, bound to its content hashes.
func (l *Logger) Approval(session, path, kind, token, risk, beforeSHA256, afterSHA256 string) error {
	return l.Log(Event{Event: EventApproval, Session: session, Path: path, Kind: kind, Token: token, Risk: risk, BeforeSHA256: beforeSHA256, AfterSHA256: afterSHA256})
}

// Apply records an apply to repo: a dry run, or the files written.
func (l *Logger) Apply(session, repo string, dryRun bool, files []string) error {
	return l.Log(Event{Event: EventApply, Session: session, Repo: repo, DryRun: &dryRun, Files: files})
}

// Digest returns the hex sha256 of cs's canonical JSON: the encoding/json
// form of the set (paths, kinds, content digests, sizes, modes, violations;
// the content itself is bound through its digests).
func Digest(cs *changeset.Set) (string, error) {
	if cs == nil {
		cs = &changeset.Set{}
	}
	b, err := json.Marshal(cs)
	if err != nil {
		return "", fmt.Errorf("encoding change set: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Read parses the audit log at path; a line that is not an event is an
// error naming its number.
func Read(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Decode(f)
}

// Decode parses audit events, one JSON object a line.
func Decode(r io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e Event
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return out, fmt.Errorf("audit log line %d: %w", n, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
