package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"

	"github.com/corral-sandbox/corral/sandbox/api"
)

// owners records, for each session the daemon created, who owns it, in
// STATE_DIR/daemon/sessions/<id>.json (0600, in a 0700 directory). The
// record outlives the daemon, so a restarted one knows whose each session
// is. It is written, pending, before its session is made (ownerRecord.
// Pending), so a session the daemon made always has one; a session
// without a record (made by the CLI) belongs to root.
//
// How long a session may idle is not the daemon's: it is the session's
// own record (sandbox.SessionRecord.IdleTTL, its latest use the record's
// inuse time), one rule whichever process owns the session (see
// docs/daemon.md, "Idle sessions"). Records written by an older daemon
// carry idle_ttl_ns and last_used; they are ignored.
type owners struct {
	dir string

	mu      sync.Mutex
	records map[string]*ownerRecord
}

// ownerRecord is one session's daemon-side record.
type ownerRecord struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Pod is the owner Pod's UID (Pod mode): the session is "pod:Pod"'s,
	// whatever uid the Pod's process ran as. Volume is the Pod volume the
	// repository came from.
	Pod    string      `json:"pod,omitempty"`
	Volume *api.Volume `json:"volume,omitempty"`
	// WriteArea is the session's write area in bytes (its profile's
	// write_area; 0 for a read-only session), counted against the
	// write-area caps (writearea.go).
	WriteArea int64 `json:"write_area,omitempty"`
	// Pending marks a creation not finished: the record is written
	// before the session is made and committed (Pending dropped) after.
	// A record a stopped daemon left pending is undone at the next start
	// (Server.undoPendingCreates): the session removed, if made, then the
	// record.
	Pending bool `json:"pending,omitempty"`
}

var idPattern = regexp.MustCompile(`^[0-9a-f]{12}$`)

func openOwners(stateDir string) (*owners, error) {
	o := &owners{dir: filepath.Join(stateDir, "daemon", "sessions"), records: map[string]*ownerRecord{}}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", o.dir, err)
	}
	entries, err := os.ReadDir(o.dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		id, ok := cutSuffix(e.Name(), ".json")
		if !ok || !idPattern.MatchString(id) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(o.dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var r ownerRecord
		if err := json.Unmarshal(data, &r); err != nil {
			// An unreadable record: the session falls back to root's.
			continue
		}
		o.records[id] = &r
	}
	return o, nil
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) < len(suffix) || s[len(s)-len(suffix):] != suffix {
		return s, false
	}
	return s[:len(s)-len(suffix)], true
}

// get returns a copy of id's record; a session without one is root's.
func (o *owners) get(id string) ownerRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r, ok := o.records[id]; ok {
		return *r
	}
	return ownerRecord{UID: 0, GID: 0}
}

// owner names the session's owner as the API's owned_by does: "pod:UID"
// in Pod mode (whatever uid the Pod's process ran as), else "uid:N".
func (r ownerRecord) owner() string {
	if r.Pod != "" {
		return "pod:" + r.Pod
	}
	return fmt.Sprintf("uid:%d", r.UID)
}

// warmOwner is the key under which the session's containers created
// ahead share the daemon's --max-warm (sandbox.SessionConfig.WarmOwner):
// its owner, as owner names it; "" for root's sessions outside Pod mode,
// which no per-owner cap bounds (as ownerCapped).
func (r ownerRecord) warmOwner() string {
	if r.Pod == "" && r.UID == 0 {
		return ""
	}
	return r.owner()
}

// ownerKey is the owner a session p creates gets (ownerRecord.owner).
func ownerKey(p Peer) string {
	return ownerRecord{UID: p.UID, Pod: p.Pod}.owner()
}

// count returns how many recorded sessions match.
func (o *owners) count(match func(ownerRecord) bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, r := range o.records {
		if match(*r) {
			n++
		}
	}
	return n
}

// add records a new session's owner, durably, before the session is
// handed out.
func (o *owners) add(id string, r ownerRecord) error {
	o.mu.Lock()
	o.records[id] = &r
	o.mu.Unlock()
	return o.write(id, r)
}

func (o *owners) write(id string, r ownerRecord) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	p := filepath.Join(o.dir, id+".json")
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("recording the session's owner: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("recording the session's owner: %w", err)
	}
	return nil
}

// commit marks id's creation finished (Pending dropped), durably.
func (o *owners) commit(id string) error {
	o.mu.Lock()
	r, ok := o.records[id]
	if !ok {
		o.mu.Unlock()
		return fmt.Errorf("recording the session's owner: session %s has no pending record", id)
	}
	r.Pending = false
	rec := *r
	o.mu.Unlock()
	return o.write(id, rec)
}

// pending returns the ids whose creation is not finished.
func (o *owners) pending() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []string
	for id, r := range o.records {
		if r.Pending {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// committed returns the ids whose creation is finished.
func (o *owners) committed() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []string
	for id, r := range o.records {
		if !r.Pending {
			ids = append(ids, id)
		}
	}
	return ids
}

// all returns a copy of every record, by session id.
func (o *owners) all() map[string]ownerRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]ownerRecord, len(o.records))
	for id, r := range o.records {
		out[id] = *r
	}
	return out
}

// ofPod returns the ids of the sessions Pod uid owns.
func (o *owners) ofPod(uid string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []string
	for id, r := range o.records {
		if r.Pod == uid {
			ids = append(ids, id)
		}
	}
	return ids
}

// pods returns every Pod that owns a session.
func (o *owners) pods() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, r := range o.records {
		if r.Pod != "" && !seen[r.Pod] {
			seen[r.Pod] = true
			out = append(out, r.Pod)
		}
	}
	return out
}

// remove forgets id.
func (o *owners) remove(id string) error {
	o.mu.Lock()
	delete(o.records, id)
	o.mu.Unlock()
	err := os.Remove(filepath.Join(o.dir, id+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// keepOnly forgets the records of sessions that no longer exist (removed
// by the CLI while no daemon ran).
func (o *owners) keepOnly(exists func(id string) bool) {
	o.mu.Lock()
	var gone []string
	for id := range o.records {
		if !exists(id) {
			gone = append(gone, id)
		}
	}
	o.mu.Unlock()
	for _, id := range gone {
		_ = o.remove(id)
	}
}
