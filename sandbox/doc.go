// Package sandbox runs one agent invocation in its own short-lived OCI
// container through containerd: an Executor holds the connection and the
// long-lived configuration, a Session holds what the trusted launcher fixed
// (repository, profile, write scope) and its host-side mounts, and each
// Exec checks the argv against the profile's allowlist before it creates a
// fresh container, runs it under the profile's limits and collects the
// result. Changes reads the session's change set from the write area.
//
// The spec is composed in one place, specOpts, in the order STYLE.md gives:
// default spec (a private network namespace with only lo), read-only
// rootfs, args, cwd, env, user, no_new_privs, capabilities, then seccomp,
// then mounts, then resource limits.
package sandbox
