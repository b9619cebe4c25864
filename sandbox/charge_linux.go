package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/mounts/changeset"
)

// chargedFile, in a persistent session's directory, holds the violations
// of its change set that a call was already charged with (a JSON array of
// changeset.Problem), so that every corral process sharing the session
// agrees on which call made which violation.
const chargedFile = "violations.json"

// CallChanges collects the session's change set after a call (see
// Changes) and returns with it the violations that call introduced: the
// violations of the set that no earlier call was charged with. The set's
// violations are then the charged ones, so a later call that leaves them
// alone introduces none, and one fixed and made again is charged again.
//
// A violation still rejects the whole set (cs.Err) until it is fixed; only
// the blame is per call. Calls of one session that run at the same time
// share the blame for what appeared while they ran: the first to collect
// is charged. A persistent session keeps the charged set in its state
// directory under the session lock; an ephemeral session in memory.
func (s *Session) CallChanges() (cs *changeset.Set, introduced []changeset.Problem, err error) {
	return s.CallChangesContext(context.Background())
}

// CallChangesContext is CallChanges whose audit records name the peer ctx
// carries (audit.ContextWithPeer).
func (s *Session) CallChangesContext(ctx context.Context) (cs *changeset.Set, introduced []changeset.Problem, err error) {
	cs, err = s.ChangesContext(ctx)
	if err != nil {
		return nil, nil, err
	}
	introduced, err = s.charge(cs.Violations)
	if err != nil {
		return nil, nil, fmt.Errorf("recording the change set's violations: %w", err)
	}
	return cs, introduced, nil
}

// charge records now as the charged violations and returns those of now
// that were not charged before.
func (s *Session) charge(now []changeset.Problem) ([]changeset.Problem, error) {
	if s.record.Ephemeral {
		s.mu.Lock()
		defer s.mu.Unlock()
		introduced := newViolations(s.charged, now)
		s.charged = slices.Clone(now)
		return introduced, nil
	}
	unlock, err := s.store.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	p := filepath.Join(s.store.dir, chargedFile)
	var before []changeset.Problem
	data, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(data, &before); err != nil {
			return nil, fmt.Errorf("%s: %w: %v", p, errdefs.ErrDataLoss, err)
		}
	}
	introduced := newViolations(before, now)
	if slices.Equal(before, now) {
		return introduced, nil
	}
	if now == nil {
		now = []changeset.Problem{}
	}
	data, err = json.Marshal(now)
	if err != nil {
		return nil, err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return nil, err
	}
	return introduced, nil
}

// newViolations returns the violations of now that are not in before.
func newViolations(before, now []changeset.Problem) []changeset.Problem {
	var out []changeset.Problem
	for _, v := range now {
		if !slices.Contains(before, v) {
			out = append(out, v)
		}
	}
	return out
}
