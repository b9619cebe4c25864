// Package seccomp holds corral's seccomp profiles as data and turns them
// into the runtime-spec form runc compiles (config-linux.md#seccomp).
//
// A Profile is an allowlist: its default action denies (EPERM unless it says
// otherwise) and its rules name the syscalls that may run, some narrowed by
// argument conditions. The built-in profile lives in default.yaml, embedded
// in the binary; Default and LoadDefault return it, Load reads another one.
//
// Every profile is validated before use, failing closed: each syscall name
// must be one libseccomp knows (seccomp(2) via libseccomp-golang), each
// action, operator and architecture one this package supports, and the YAML
// may hold no field the Profile type lacks. Name checks need libseccomp, so
// on other platforms and in builds without cgo Validate and Spec fail with
// errdefs.ErrNotImplemented.
//
// Spec converts a profile to *specs.LinuxSeccomp and WithProfile sets it on
// an OCI spec; WithProfile must follow the capability options. Names,
// Syscalls and the Known* functions list what a profile allows and what the
// package understands, for introspection.
package seccomp
