// Package mounts builds what the kernel enforces about the repository:
// the ignore rules (.openwikiignore files, gitignore syntax, the same
// answers as git), the hidden set computed from them and from the
// operator's forced hides when a session starts, the View that judges
// paths against it, the mount plan, the host-side layers (a whiteout
// layer over the repository, the session's write area), and the diff of
// the write area's upperdir.
//
// Hiding is by location, never by name: a hidden path does not exist in
// the container's /workspace, so listing, globbing, searching and
// symlinks cannot reach it, and a direct reference to it is refused
// before anything runs with the rule that hides it.
package mounts
