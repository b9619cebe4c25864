package allowlist

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/names"
)

// DefaultWriteDir is the write scope's directory, and the directory every
// scope lies in.
const DefaultWriteDir = "openwiki"

// AgentsDir holds one subtree per agent: an agent session (AgentScope)
// may write only openwiki/agents/<id>/.
const AgentsDir = DefaultWriteDir + "/agents"

// The rules a Scope refuses with; every refusal of a write by its scope
// uses one of these.
const (
	ruleReadOnly    = "the session is read-only"
	ruleOutsideDir  = "outside the write scope %s/"
	ruleOutsidePage = "outside the write scope: only the assigned page %s is writable"
	ruleResolves    = "resolves to %s, outside the write scope %s/"
)

// Scope is a session's write capability, fixed by the trusted launcher
// and never by an agent: a directory (Dir, canonical, e.g. "openwiki"), or
// in page mode the only writable file (Page, e.g. "openwiki/pages/a.md"),
// or nothing (ReadOnly). At most one of Dir and Page is set. The zero
// value is read-only. Build one with NewScope (or DirScope, PageScope,
// AgentScope, ReadOnlyScope), which apply the launcher's rules; a Scope
// literal is checked by Validate wherever it is used.
type Scope struct {
	// Dir is the writable directory, canonical, e.g. "openwiki".
	Dir string
	// Page, in page mode, is the only writable file.
	Page string
	// ReadOnly sessions may write nothing. A read-only scope may keep the
	// Dir or Page it would otherwise have (the session's layout).
	ReadOnly bool
}

// ScopeConfig is what a launcher asks for. Dir, Page and AgentID exclude
// each other; none of them means DefaultWriteDir.
type ScopeConfig struct {
	// Dir is openwiki/ or a directory below it.
	Dir string
	// Page is a file below openwiki/.
	Page string
	// AgentID makes the scope the agent's subtree AgentsDir/<id>/.
	AgentID string
	// ReadOnly keeps the scope's directory or page but lets nothing be
	// written.
	ReadOnly bool
}

// NewScope applies the launcher's rules to c (see DirScope, PageScope and
// AgentScope). Errors wrap errdefs.ErrInvalidArgument, or are the
// *Refusal of an unacceptable page path.
func NewScope(c ScopeConfig) (Scope, error) {
	n := 0
	for _, set := range []bool{c.Page != "", c.Dir != "", c.AgentID != ""} {
		if set {
			n++
		}
	}
	var s Scope
	var err error
	switch {
	case n > 1:
		return Scope{}, fmt.Errorf("session: %w: a page, a scope directory and an agent id exclude each other", errdefs.ErrInvalidArgument)
	case c.AgentID != "":
		s, err = AgentScope(c.AgentID)
	case c.Page != "":
		s, err = PageScope(c.Page)
	case c.Dir != "":
		s, err = DirScope(c.Dir)
	default:
		s = Scope{Dir: DefaultWriteDir}
	}
	if err != nil {
		return Scope{}, err
	}
	s.ReadOnly = c.ReadOnly
	return s, nil
}

// DirScope is the scope of the directory unsafeDir: DefaultWriteDir or a
// directory below it, canonicalized by CleanPath, no component of which
// is reserved (names.Reserved: .git, .claims … in any spelling). Errors
// wrap errdefs.ErrInvalidArgument.
func DirScope(unsafeDir string) (Scope, error) {
	d, err := CleanPath(unsafeDir)
	if err != nil {
		return Scope{}, fmt.Errorf("scope %q: %w: %v", unsafeDir, errdefs.ErrInvalidArgument, err)
	}
	if !within(d, DefaultWriteDir) {
		return Scope{}, fmt.Errorf("scope %q: %w: must be %s/ or a directory below it", unsafeDir, errdefs.ErrInvalidArgument, DefaultWriteDir)
	}
	if rule := names.ReservedPath(d); rule != "" {
		return Scope{}, fmt.Errorf("scope %q: %w: %s", unsafeDir, errdefs.ErrInvalidArgument, rule)
	}
	return Scope{Dir: d}, nil
}

// PageScope is page mode for the file unsafePage: a path below
// DefaultWriteDir, canonicalized by CleanPath (whose *Refusal it returns
// for a path that is not one), none of whose components is reserved.
// Other errors wrap errdefs.ErrInvalidArgument.
func PageScope(unsafePage string) (Scope, error) {
	p, err := CleanPath(unsafePage)
	if err != nil {
		return Scope{}, fmt.Errorf("page %q: %w", unsafePage, err)
	}
	if !strings.HasPrefix(p, DefaultWriteDir+"/") {
		return Scope{}, fmt.Errorf("page %q: %w: must be a file under %s/", unsafePage, errdefs.ErrInvalidArgument, DefaultWriteDir)
	}
	if rule := names.ReservedPath(p); rule != "" {
		return Scope{}, fmt.Errorf("page %q: %w: %s", unsafePage, errdefs.ErrInvalidArgument, rule)
	}
	return Scope{Page: p}, nil
}

// agentIDPattern is the character set of a stable agent id. A display
// name never matters: only this id selects the subtree.
var agentIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidAgentID checks an agent id: 1 to 63 characters of a-z, 0-9, '_'
// and '-', starting with a letter or a digit. Errors wrap
// errdefs.ErrInvalidArgument.
func ValidAgentID(id string) error {
	if !agentIDPattern.MatchString(id) {
		return fmt.Errorf("agent id %q: %w: want 1 to 63 characters of a-z, 0-9, '_' and '-', starting with a letter or a digit", id, errdefs.ErrInvalidArgument)
	}
	return nil
}

// AgentScope is the scope of an agent's own subtree AgentsDir/<id>; other
// agents' subtrees stay readable and are refused for writes. Errors are
// ValidAgentID's.
func AgentScope(id string) (Scope, error) {
	if err := ValidAgentID(id); err != nil {
		return Scope{}, err
	}
	return Scope{Dir: AgentsDir + "/" + id}, nil
}

// ReadOnlyScope lets nothing be written.
func ReadOnlyScope() Scope { return Scope{ReadOnly: true} }

// Validate checks a Scope however it was made: Dir and Page canonical
// (CleanPath's spelling), not both set, Page not the root. Errors wrap
// errdefs.ErrInvalidArgument.
func (s Scope) Validate() error {
	for _, p := range []string{s.Dir, s.Page} {
		if p == "" {
			continue
		}
		if c, err := CleanPath(p); err != nil || c != p {
			return fmt.Errorf("write scope %q is not a canonical repository path: %w", p, errdefs.ErrInvalidArgument)
		}
	}
	if s.Dir != "" && s.Page != "" {
		return fmt.Errorf("write scope sets both a directory and a page: %w", errdefs.ErrInvalidArgument)
	}
	if s.Page == "." {
		return fmt.Errorf("write scope page cannot be the repository root: %w", errdefs.ErrInvalidArgument)
	}
	return nil
}

// Writable reports whether the scope lets anything be written.
func (s Scope) Writable() bool { return !s.ReadOnly && (s.Dir != "" || s.Page != "") }

// Base is the directory the scope's writes lie in: Dir, or the page's
// directory; "" for a read-only scope without either.
func (s Scope) Base() string {
	if s.Page != "" {
		return path.Dir(s.Page)
	}
	return s.Dir
}

// Allows reports whether a write to the canonical path p is inside the
// scope: p is Dir or below it by whole components ("openwiki-old" is not
// in "openwiki"), or p is Page. A read-only scope allows nothing.
func (s Scope) Allows(p string) bool { return s.rule(p) == "" }

// Check returns nil when Allows(p), or a *Refusal (KindPath, Index -1)
// whose Rule says why not: "the session is read-only", "outside the write
// scope openwiki/", or "outside the write scope: only the assigned page
// openwiki/pages/a.md is writable".
func (s Scope) Check(p string) error {
	if rule := s.rule(p); rule != "" {
		return &Refusal{Kind: KindPath, Index: -1, Token: clip(p), Rule: rule}
	}
	return nil
}

// CheckResolved is Check for a path p whose symbolic links inside the
// repository resolve to r: both must be in the scope, and a resolved path
// outside it is refused with "resolves to R, outside the write scope …".
func (s Scope) CheckResolved(p, r string) error {
	if err := s.Check(p); err != nil {
		return err
	}
	if s.rule(r) == "" {
		return nil
	}
	rule := s.outside()
	if s.Page == "" {
		rule = fmt.Sprintf(ruleResolves, r, s.Dir)
	}
	return &Refusal{Kind: KindPath, Index: -1, Token: clip(p), Rule: rule}
}

// rule is Check's rule for p, or "".
func (s Scope) rule(p string) string {
	switch {
	case !s.Writable():
		return ruleReadOnly
	case s.Page != "":
		if p != s.Page {
			return s.outside()
		}
	case !within(p, s.Dir):
		return s.outside()
	}
	return ""
}

// outside is the rule for a path outside a writable scope.
func (s Scope) outside() string {
	if s.Page != "" {
		return fmt.Sprintf(ruleOutsidePage, s.Page)
	}
	return fmt.Sprintf(ruleOutsideDir, s.Dir)
}

// String names the scope: "openwiki/" (a directory), "openwiki/pages/a.md"
// (a page), or "read-only", with " (read-only)" after a read-only scope's
// directory or page.
func (s Scope) String() string {
	var w string
	switch {
	case s.Page != "":
		w = s.Page
	case s.Dir != "":
		w = s.Dir + "/"
	default:
		return "read-only"
	}
	if s.ReadOnly {
		w += " (read-only)"
	}
	return w
}
