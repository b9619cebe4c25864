package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/audit"
)

// capability converts a write scope for the audit log.
func capability(scope allowlist.Scope) audit.Capability {
	switch {
	case !scope.Writable():
		return audit.Capability{Mode: "read-only"}
	case scope.Page != "":
		return audit.Capability{Mode: "page", Page: scope.Page}
	}
	c := audit.Capability{Mode: "dir", Dir: scope.Dir}
	if id, ok := strings.CutPrefix(scope.Dir, allowlist.AgentsDir+"/"); ok && !strings.Contains(id, "/") {
		c.Agent = id
	}
	return c
}

// refusalEvent converts a refusal for the audit log; a *allowlist.Refusal
// gives its rule.
func refusalEvent(stage string, err error) *audit.Refusal {
	e := &audit.Refusal{Stage: stage, Error: err.Error()}
	var r *allowlist.Refusal
	if errors.As(err, &r) {
		e.Rule = r.Rule
	}
	return e
}

// auditSessionCreated records a new session before anything of it is made
// (audit's failure policy: an event preceding an effect fails closed).
func (e *Executor) auditSessionCreated(ctx context.Context, id string, p *Policy) error {
	err := e.audit.For(ctx).Log(id, &audit.SessionCreated{Repo: p.Repo, Profile: p.Profile.Name, Capability: capability(p.Scope)})
	if err != nil {
		return fmt.Errorf("recording the session in the audit log (nothing created): %w", err)
	}
	return nil
}

// auditOutcome records an event reporting something already done; an
// error says what was done and that the record may be missing (audit's
// failure policy).
func (s *Session) auditOutcome(ctx context.Context, done string, ev audit.Event) error {
	if err := s.exec.audit.For(ctx).Log(s.ID, ev); err != nil {
		return fmt.Errorf("%s, but the audit log could not record it: %w", done, err)
	}
	return nil
}
