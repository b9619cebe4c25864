// Package mounts builds what the kernel enforces about the repository on
// the host: a session's host layout (the repository bind, the whiteout
// layer that hides the hidden set, the read-only view, the size-limited
// write area), the checks a repository must pass before a session starts on
// it, and the sweep that finds what a crash left mounted.
//
// Hiding is by location, never by name: a hidden path does not exist in
// the container's /workspace, so listing, globbing, searching and
// symlinks cannot reach it, and a direct reference to it is refused
// before anything runs with the rule that hides it. What is hidden is
// package mounts/hidden's decision (with the gitignore port in
// mounts/ignore); what the session changed, and the patch format it
// travels in, is package mounts/changeset's.
package mounts
