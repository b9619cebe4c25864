package sandbox

// OpenOption adjusts OpenSession.
type OpenOption func(*openOptions)

type openOptions struct {
	changesOnly, notAUse bool
	warmOwner            string
}

// ForChanges opens a session only to read its change set (Changes,
// CallChanges, Record): the repository is not read at all, so a session
// whose repository moved or vanished keeps its writes reachable, and no
// containerd is needed. Exec and the file tools fail on such a session.
func ForChanges() OpenOption { return func(o *openOptions) { o.changesOnly = true } }

// NotAUse opens a session without counting the opening as a use: its idle
// TTL keeps counting from its latest use. A long-lived owner re-adopting
// its sessions at start opens them so, so that a restart extends no
// session's life.
func NotAUse() OpenOption { return func(o *openOptions) { o.notAUse = true } }

// WithWarmOwner opens a session whose containers created ahead count
// against owner's share of the executor's cap (SessionConfig.WarmOwner).
func WithWarmOwner(owner string) OpenOption { return func(o *openOptions) { o.warmOwner = owner } }
