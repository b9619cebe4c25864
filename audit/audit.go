package audit

import (
	"bufio"
	"bytes"
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

	"golang.org/x/sys/unix"
)

// FileName is the audit log's name in the state directory.
const FileName = "audit.log"

// Actor is the corral process that wrote a record.
type Actor struct {
	// User and UID are the process's user; SudoUser is $SUDO_USER when it
	// ran under sudo.
	User     string `json:"user"`
	UID      int    `json:"uid"`
	SudoUser string `json:"sudo_user,omitempty"`
	PID      int    `json:"pid"`
}

// Peer is the process on whose behalf corral acted: for the CLI the
// corral process itself; for a daemon, the client of the request
// (SO_PEERCRED), set with Logger.WithPeer.
type Peer struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
	PID int `json:"pid"`
	// Pod is the calling Kubernetes Pod's UID (the daemon in Pod mode).
	Pod string `json:"pod,omitempty"`
}

// Envelope is one line of the log: when, what type, which session, who
// wrote it and for whom, and the typed event itself.
type Envelope struct {
	Time    time.Time       `json:"time"`
	Type    string          `json:"type"`
	Session string          `json:"session,omitempty"`
	Actor   Actor           `json:"actor"`
	Peer    Peer            `json:"peer"`
	Event   json.RawMessage `json:"event"`
}

// Record is an Envelope read back, with its event decoded into its type
// (*SessionCreated, *Invocation, …).
type Record struct {
	Time    time.Time
	Type    string
	Session string
	Actor   Actor
	Peer    Peer
	Event   Event
}

// sink is the files a Logger and the loggers derived from it append to.
type sink struct {
	mu    sync.Mutex
	files []*os.File
}

// Logger appends records to its files. It is safe for concurrent use. The
// caller must call Close on the Logger Open returned; loggers derived with
// WithPeer share its files. A nil *Logger is valid and records nothing.
type Logger struct {
	sink  *sink
	actor Actor
	peer  Peer
	now   func() time.Time
}

// Open opens (creating them 0600) stateDir/audit.log and, when extra is not
// "", the file extra, both for appending. stateDir is made 0700 when
// missing; the log in it is opened without following a symbolic link.
// The Logger's peer is the calling process.
func Open(stateDir, extra string) (*Logger, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	a := Actor{UID: os.Getuid(), PID: os.Getpid(), SudoUser: os.Getenv("SUDO_USER")}
	a.User = strconv.Itoa(a.UID)
	if u, err := user.Current(); err == nil {
		a.User = u.Username
	}
	l := &Logger{sink: &sink{}, actor: a, peer: Peer{UID: os.Getuid(), GID: os.Getgid(), PID: os.Getpid()}, now: time.Now}
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
		l.sink.files = append(l.sink.files, f)
	}
	return l, nil
}

// WithPeer returns a Logger writing to the same files whose records name
// p as the peer. A nil Logger stays nil.
func (l *Logger) WithPeer(p Peer) *Logger {
	if l == nil {
		return nil
	}
	c := *l
	c.peer = p
	return &c
}

// Close closes the files. It is safe on a nil Logger and more than once.
func (l *Logger) Close() error {
	if l == nil {
		return nil
	}
	l.sink.mu.Lock()
	defer l.sink.mu.Unlock()
	var errs []error
	for _, f := range l.sink.files {
		errs = append(errs, f.Close())
	}
	l.sink.files = nil
	return errors.Join(errs...)
}

// Log appends ev for session ("" for none) to every file as one line,
// written with a single write and fsynced before it returns. The error
// says the record may be missing; see the package comment for what the
// caller does then. A nil Logger logs nothing.
func (l *Logger) Log(session string, ev Event) error {
	if l == nil {
		return nil
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encoding audit event %s: %w", ev.EventType(), err)
	}
	line, err := json.Marshal(Envelope{Time: l.now().UTC(), Type: ev.EventType(), Session: session, Actor: l.actor, Peer: l.peer, Event: payload})
	if err != nil {
		return fmt.Errorf("encoding audit event %s: %w", ev.EventType(), err)
	}
	line = append(line, '\n')
	l.sink.mu.Lock()
	defer l.sink.mu.Unlock()
	if l.sink.files == nil {
		return errors.New("audit log is closed")
	}
	var errs []error
	for _, f := range l.sink.files {
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

// Read parses the audit log at path; a line that is not a record of a
// known type is an error naming its number.
func Read(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Decode(f)
}

// Decode parses audit records, one JSON envelope a line, strictly: unknown
// fields and unknown event types are errors.
func Decode(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		rec, err := decodeLine(line)
		if err != nil {
			return out, fmt.Errorf("audit log line %d: %w", n, err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

func decodeLine(line []byte) (Record, error) {
	var env Envelope
	if err := strict(line, &env); err != nil {
		return Record{}, err
	}
	ev, err := newEvent(env.Type)
	if err != nil {
		return Record{}, err
	}
	if err := strict(env.Event, ev); err != nil {
		return Record{}, fmt.Errorf("%s event: %w", env.Type, err)
	}
	return Record{Time: env.Time, Type: env.Type, Session: env.Session, Actor: env.Actor, Peer: env.Peer, Event: ev}, nil
}

func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
