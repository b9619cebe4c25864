// Package profiles holds corral's named profiles: which commands an agent
// may run (by grammar, see package allowlist), which paths the view hides
// beyond the repository's own ignore files, the seccomp profile, the fixed
// environment and the resource limits of each container.
//
// Profiles come only from the trusted launcher: the embedded built-ins, or
// a file the launcher names. No file inside the repository is ever read as
// corral configuration. Unknown fields fail closed.
package profiles
