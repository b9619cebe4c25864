// Package audit records what corral decided and did as JSON lines: one
// event per line, appended (O_APPEND) and fsynced, to audit.log in the
// state directory (mode 0600) and optionally to a second file the launcher
// names.
//
// Events: session_created (the trusted capability), invocation (argv,
// decision and rule, exit code, duration, limits hit), refusal (a policy
// or review decision against a request), changeset (the sha256 of the
// change set's canonical JSON), approval (each change a reviewer
// approved, with its content hash), and apply (what was written). Every
// event carries the time, the OS user and the process id of the
// supervisor that wrote it.
//
// A nil *Logger is valid and records nothing, so that library callers may
// leave auditing to the launcher.
package audit
