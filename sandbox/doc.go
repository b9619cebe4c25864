// Package sandbox runs one agent invocation in its own short-lived OCI
// container through containerd: an Executor holds the connection and the
// long-lived configuration, a Session holds what the trusted launcher fixed
// (repository, profile, write scope) and its host-side mounts, and each
// Exec checks the argv against the profile's allowlist before it runs it in
// a fresh container under the profile's limits and collects the result.
// Changes reads the session's change set from the write area.
//
// A session from NewSession lives as long as its process. CreateSession
// makes a persistent one instead: its capability, profile snapshot and
// hidden set are recorded under the state directory and its host mounts
// stay between invocations and processes, so OpenSession (another corral
// process, after a restart) continues it with the same write area, and
// only RemoveSession removes it. The file tools (Read, List, Glob, Search,
// Write, Edit) check paths on the host like Exec, then run inside a fresh
// container of the session too (corral-init's fs mode, package fsop).
//
// One container, one plan, one spec: a session resolves its image (for the
// snapshot) and corral-init (a content-addressed copy under the state
// directory, bound read-only into every container at initctl.InitPath)
// once, at its first invocation. Each container is then a containerPlan —
// its id, the limits, the seccomp profile, the layout's binds, the control
// directory and corral-init — and specOpts is the one function that turns a
// plan into the spec, in the order STYLE.md gives: default spec (a private
// network namespace with only lo), read-only rootfs, the process, cwd, env,
// user, no_new_privs, capabilities, then seccomp, then the mounts, then
// resource limits. Every container's process is corral-init reading an
// initctl.Request from the control file written just before the start, so
// a container can be created before the call arrives, with any image.
package sandbox
