// Package sandbox runs one agent invocation in its own short-lived OCI
// container through containerd: an Executor holds the connection and the
// long-lived configuration, a Session holds what the trusted launcher fixed
// (repository, profile, write scope) and its host-side mounts, and each
// Exec checks the argv against the profile's allowlist before it creates a
// fresh container, runs it under the profile's limits and collects the
// result. Changes reads the session's change set from the write area.
//
// A session from NewSession lives as long as its process. CreateSession
// makes a persistent one instead: its capability, profile snapshot and
// hidden set are recorded under the state directory and its host mounts
// stay between invocations and processes, so OpenSession (another corral
// process, after a restart) continues it with the same write area, and
// only RemoveSession removes it. The file tools (Read, List, Glob, Search,
// Write, Edit) check paths on the host like Exec, then run corral's own
// binary inside a fresh container of the session (package fsop).
//
// The spec is composed in one place, specOpts, in the order STYLE.md gives:
// default spec (a private network namespace with only lo), read-only
// rootfs, args, cwd, env, user, no_new_privs, capabilities, then seccomp,
// then mounts, then resource limits.
package sandbox
