package allowlist

// View is the session's read-only picture of the repository, as the
// container will see it. mounts implements it from the hidden set computed
// when the session starts.
//
// Paths given to and returned by a View are canonical repository-relative
// paths as produced by CleanPath: slash-separated, no ".", "..", empty or
// trailing components; "." denotes the repository root.
type View interface {
	// Resolve follows symlinks inside the repository, component by
	// component, and returns the canonical path the kernel would reach.
	// Components that do not exist are kept lexically. It returns a
	// *Refusal (KindPath) when resolution leaves the repository (an
	// absolute link target, or ".." above the root) or loops.
	Resolve(p string) (string, error)
	// Hidden reports whether p, or any of its ancestors, is hidden from
	// the view, and the rule that hides it, e.g.
	// ".openwikiignore:3 hides secrets/". It answers for paths that do
	// not exist too, from the same rules.
	Hidden(p string) (rule string, hidden bool)
}
