package review

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/mounts/changeset"
)

// TokenLen is the length in hex digits of an approval token: 64 bits, so
// that content crafted to collide with an approved token costs about 2^64
// hashes.
const TokenLen = 16

// Approval is a reviewer's consent to one change, bound to its content: the
// path, the kind, the sha256 of the bytes before and after, and the risk
// class the reviewer was shown. Apply recomputes all of them from the bytes
// and the repository; an approval that differs in any field approves
// nothing.
type Approval struct {
	Path         string         `json:"path"`
	Kind         changeset.Kind `json:"kind"`
	BeforeSHA256 string         `json:"before_sha256"`
	AfterSHA256  string         `json:"after_sha256"`
	Risk         Level          `json:"risk"`
}

// Token is the short form of the approval a reviewer types
// (`--approve TOKEN`): the first TokenLen hex digits of a sha256 over every
// field.
func (a Approval) Token() string {
	return tokenOf(a.Path, a.Kind, a.BeforeSHA256, a.AfterSHA256, a.Risk)
}

func tokenOf(p string, kind changeset.Kind, before, after string, risk Level) string {
	h := sha256.New()
	// NUL cannot occur in a valid path, kind, digest or level name.
	fmt.Fprintf(h, "corral approval v1\x00%s\x00%s\x00%s\x00%s\x00%s", p, kind, before, after, risk)
	return hex.EncodeToString(h.Sum(nil))[:TokenLen]
}

// Item is one change as the reviewer sees it: what it does, its recomputed
// digests and risk, the token that approves it and, after Preview or Apply,
// what became of it.
type Item struct {
	Path         string         `json:"path"`
	Kind         changeset.Kind `json:"kind"`
	BeforeSHA256 string         `json:"before_sha256,omitempty"`
	AfterSHA256  string         `json:"after_sha256,omitempty"`
	Size         int64          `json:"size"`
	Risk         Risk           `json:"risk"`
	Token        string         `json:"token"`
	Status       Status         `json:"status,omitempty"`
	// Detail says why a change is in conflict, refused or skipped.
	Detail string `json:"detail,omitempty"`
}

// Approval returns the approval of the item as shown.
func (it Item) Approval() Approval {
	return Approval{Path: it.Path, Kind: it.Kind, BeforeSHA256: it.BeforeSHA256, AfterSHA256: it.AfterSHA256, Risk: it.Risk.Level}
}

// Status is what Preview or Apply did with an item.
type Status string

// The statuses of an Item.
const (
	// StatusPending: valid, not yet approved (Preview).
	StatusPending Status = "pending"
	// StatusWouldApply: approved; a dry run wrote nothing.
	StatusWouldApply Status = "would-apply"
	// StatusApplied: approved and written.
	StatusApplied Status = "applied"
	// StatusNotApproved: no approval; left out of the apply.
	StatusNotApproved Status = "not-approved"
	// StatusDryRunOnly: its class is never applied (Options.DryRunOnly).
	StatusDryRunOnly Status = "dry-run-only"
	// StatusConflict: its base no longer matches the repository.
	StatusConflict Status = "conflict"
	// StatusRefused: the repository refuses it (a symbolic link on the
	// way, a non-regular file).
	StatusRefused Status = "refused"
)

func (c *checked) item() Item {
	return Item{
		Path: c.ch.Path, Kind: c.ch.Kind, BeforeSHA256: c.before, AfterSHA256: c.after,
		Size: int64(len(c.ch.After)), Risk: c.risk, Token: c.token,
	}
}

// Review validates cs as Apply does, without touching a repository, and
// returns one Item per change with its risk recomputed from the bytes and
// its approval token: the highest risk first, then in path order, so that
// a reviewer sees what is dangerous first. The error is a *RefusedError
// listing every problem, or errdefs.ErrInvalidArgument for a bad scope.
func Review(cs *changeset.Set, scope allowlist.Scope, opts Options) ([]Item, error) {
	cs2, err := validate(cs, scope, opts.View, opts.Limits)
	if err != nil {
		return nil, err
	}
	items := make([]Item, len(cs2))
	for i := range cs2 {
		items[i] = cs2[i].item()
	}
	sortItems(items)
	return items, nil
}

// ApprovalsFor turns the tokens a reviewer typed into the approvals of the
// changes of cs they name. A token that names no change (mistyped, or the
// change set changed since it was shown) is refused with a *RefusedError:
// nothing is approved.
func ApprovalsFor(cs *changeset.Set, scope allowlist.Scope, tokens []string, opts Options) ([]Approval, error) {
	items, err := Review(cs, scope, opts)
	if err != nil {
		return nil, err
	}
	byToken := map[string]Item{}
	for _, it := range items {
		byToken[it.Token] = it
	}
	var out []Approval
	var problems []Problem
	seen := map[string]bool{}
	for _, t := range tokens {
		t = strings.ToLower(strings.TrimSpace(t))
		it, ok := byToken[t]
		if !ok {
			problems = append(problems, Problem{Path: changeset.Printable(t), Reason: "approval token matches no change of this change set (mistyped, or the change set changed since it was reviewed)"})
			continue
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, it.Approval())
		}
	}
	if len(problems) > 0 {
		return nil, &RefusedError{Problems: problems}
	}
	return out, nil
}

// sortItems orders items highest risk first, then by path.
func sortItems(items []Item) {
	slices.SortStableFunc(items, func(a, b Item) int {
		if a.Risk.Level != b.Risk.Level {
			return int(b.Risk.Level) - int(a.Risk.Level)
		}
		return strings.Compare(a.Path, b.Path)
	})
}
