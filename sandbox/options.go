package sandbox

// OpenOption adjusts OpenSession.
type OpenOption func(*openOptions)

type openOptions struct{ changesOnly bool }

// ForChanges opens a session only to read its change set (Changes,
// CallChanges, Record): the repository is not read at all, so a session
// whose repository moved or vanished keeps its writes reachable, and no
// containerd is needed. Exec and the file tools fail on such a session.
func ForChanges() OpenOption { return func(o *openOptions) { o.changesOnly = true } }
