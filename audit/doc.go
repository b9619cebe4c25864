// Package audit records what corral decided and did as JSON lines: one
// record per line, appended (O_APPEND, one write per record) and fsynced,
// to audit.log in the state directory (mode 0600) and optionally to a
// second file the launcher names.
//
// A record is an Envelope — time, type, session, the corral process that
// wrote it (Actor), the process on whose behalf it acted (Peer: for the
// CLI itself; a daemon sets its client's uid, gid and pid) — around one
// typed event: SessionCreated (the trusted capability), Invocation (argv,
// decision and rule, exit code, duration, limits hit), Refusal (a policy
// or review decision against a request), ChangeSet (the digest of a
// collected change set), Approval (each change a reviewer approved, bound
// to its content), ApplyStarted (an apply about to write, with its
// journal's transaction id), Apply (what was written) and ApplyRecovered
// (an interrupted apply finished or rolled back). Read gives the events
// back in their types, in the style of containerd's typed events.
//
// The package knows no other corral package: callers convert their own
// types (a write scope into a Capability, a refusal into its rule, a change
// set into its digest with DigestJSON).
//
// # Failure policy
//
// One policy, applied by every caller:
//
//   - An event that precedes an effect on the repository or the host —
//     SessionCreated (before the session's record and mounts), Approval
//     and ApplyStarted (before the first repository write) — is written
//     first. If it cannot be written the operation fails closed: nothing
//     of the effect happens and the caller returns the audit error.
//   - An event that reports an outcome — Invocation (the tool has run; its
//     writes are confined to the session's write area, which review still
//     guards), Refusal, ChangeSet, Apply, ApplyRecovered — is written
//     after the fact. If it cannot be written the operation still returns
//     an error, wrapping the audit error and saying what was done, so that
//     no caller reports success for an unrecorded act.
//
// A nil *Logger is valid and records nothing, so that library callers may
// leave auditing to the launcher.
package audit
