// Package hidden decides which paths of a repository a session never
// shows, and judges every path an agent names against that decision.
//
// Compute walks the repository once, when a session starts (rootfs.Walk:
// never through a link), and returns the Set of hidden paths with the rule
// that hides each: the name table's entries (package internal/names,
// compared folded: ".git" at any depth, and the built-in lists the profile
// applies, agent-config and secrets, which no repository file can
// re-include), the write directory's ".claims", the repository's ignore
// files (package mounts/ignore, git's exact semantics, nested files
// included) and, with the gitignore list, its .gitignore files as a rule
// set of their own; then the entries that would lead past those rules: a
// symlink whose target leaves the repository, and a hard link of a hidden
// file. A hidden directory hides everything below it; the Set holds the
// directory, never its contents. The Set is fixed: a
// later write to an ignore file changes nothing, and it persists as JSON
// (Set.MarshalJSON, Unmarshal) so that a reopened session judges exactly
// as it did when it started.
//
// View is the repository as the container sees it (it implements
// allowlist.View): Hidden says whether a path, existing or not, is hidden
// and by which rule; Resolve follows symbolic links one component at a time
// and refuses a link that leaves the repository, rather than clamping it as
// chroot-style resolution would.
//
// The container's view takes its lower layer live from the repository, so
// a file that appears later under a hidden name would be visible: Watcher
// (inotify on every visible directory) and Rescan find such a file, and
// Uncovered names it, so that a session refuses to run on.
package hidden
