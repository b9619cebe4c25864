// Package sandbox runs one agent invocation in its own short-lived OCI
// container through containerd, under a session that the trusted
// launcher fixed.
//
// # Parts
//
// An Executor holds the long-lived configuration, the audit log and the
// containerd connection, made on first need (Connect): sessions, their
// change sets, listing, pruning and removing them need no containerd,
// because the writes live on a host tmpfs. A Session is assembled from
// parts with one job each, in the manner of containerd's client (Client →
// Container → Task):
//
//	Policy  immutable: repository, write scope, profile, limits, the hidden
//	        set and the view built on it. The view reads the write
//	        directory from the write area of the layout the session will
//	        have (mounts.LayoutAt), fixed at construction, never patched
//	        in after mounting. NewPolicy alone serves `corral check` and
//	        `corral apply`.
//	store   the session's directory under StateDir/sessions/<id>: record,
//	        profile snapshot, hidden set, the inuse and lock files,
//	        charged violations (store_linux.go has the layout). Every
//	        session has one; a directory is made under a staging name and
//	        renamed, so a named one always has a complete record.
//	layout  the host mounts (mounts.Layout), attached when a persistent
//	        session opens, made at an ephemeral one's first call (ready),
//	        immutable afterwards.
//	runner  creates (containerPlan → specOpts, the one spec function),
//	        starts, waits for and destroys containers; it tracks the
//	        running ones so a failed session kills them at once.
//	pool    containers made ahead of the calls: the profile's
//	        pool_depth, doubled by each call that finds none ready up to
//	        pool_max_depth, back to pool_depth after Config.PoolIdle
//	        without calls, under the executor-wide Config.MaxWarm, of
//	        which one owner's sessions (SessionConfig.WarmOwner) grow
//	        into at most half; none
//	        in a Cold (one-call) process. Started ahead where the runtime
//	        allows (RuntimeInfo.StartAhead), else created.
//	watch   in a long-lived owner, the repository watch (fsnotify) that
//	        fails the session closed when a path the rules hide appears
//	        that the whiteouts do not cover.
//
// # Lifecycle
//
// One lifecycle for every session: create (CreateSession, or NewSession
// for an ephemeral one) computes the policy, records the store and
// prepares the layout; OpenSession re-reads the store, rescans the
// repository like a new session (hidden.Rescan) and re-attaches the
// layout; each call (Exec, the file tools) checks the repository, takes
// a container from the pool or creates one, hands it the request, waits
// for its exit and destroys it in the background; Close lets go. An ephemeral session is removed by its
// Close; a persistent one stays until RemoveSession, EndSession (its
// change set kept as a patch) or Prune once idle for its TTL. A process
// holds each open session's inuse file with a shared flock: what no live
// process holds can be swept (ephemeral, half-made) or pruned (expired)
// by any corral start (New: Sweep; Connect: SweepContainers) and by GC.
//
// Every container's process is corral-init (initctl), bound read-only
// from a content-addressed copy under the state directory, which reads an
// initctl.Request from its control file, runs the tool as its child,
// reaps, and holds the deadline itself (timeout + InitGrace, counted from
// the request): a tool never outlives a dead supervisor. A container
// created on the call gets its request in a regular file written just
// before the start. One the pool started ahead (runc, crun) has a FIFO
// there, on which its corral-init waits; the call opens it
// O_WRONLY|O_NONBLOCK and writes the request, so the call costs the
// request, the tool and the exit, not the runtime's start. An open that
// fails with ENXIO (no reader, fifo(7)) means an init that died while it
// waited, as does a start the runtime refuses for a container only
// created ahead: nothing ran, and the call runs once on a new container
// (errNotStarted).
//
// A container started ahead holds isolation as one created ahead does:
// the runtime applied every confinement of the spec (namespaces with no
// network, mounts, read-only root, user, no capabilities, no_new_privs,
// the seccomp filter, cgroup limits) before it executed corral-init, and
// what runs in it until a call is corral-init alone, blocked in the open
// of its control file; it runs no tool and reads nothing from the
// repository until the request comes through that FIFO, which only the
// supervisor (root, on the host) can open for writing (root's, 0644: the
// container's uid cannot, and a read-only bind does not refuse a FIFO's
// write). Each container's control file is in a request directory of its
// own (Layout.Req/<id>), bound read-only at initctl.ReqDir into that
// container alone, so no tool can open the FIFO of another waiting
// container and take its request, even where no Landlock hides /.corral
// (the session's control directory, bound into every container, holds
// only staged file-tool content). What it costs is
// memory and pids in the container's cgroup, counted against its limits
// like the tool's: an init killed while it waits (the OOM killer, a kill)
// is the ENXIO case above. corral-init waits at most
// initctl.MaxWait, so a dead supervisor's idle containers end themselves
// (the sweep, which reaps them like any other, does not depend on it);
// the pool never hands out one older than maxTakeAge, and every
// container's deadline label counts maxWarmAge in: maxTakeAge plus the
// call's slack, so no sweep reaps a live call (maxWarmAge). runsc 20221219 does
// not start ahead: it connects a host FIFO only with --host-fifo=open,
// which would connect the repository's FIFOs too.
//
// Every container and lease is labelled with its owner's pid and start
// time and a deadline, so a sweep reaps what a dead (or overdue) owner
// left: the task through containerd before the record (a create the
// owner left in flight is waited for), then shims whose record is gone
// (orphan_linux.go). Once a task is deleted, by a call's destroy or a
// sweep, what the runtime left of its cgroups goes too (removeCgroups:
// runc 1.1 ends its delete with success when a cgroup stays busy past
// its ~150 ms of retries, as one just emptied can on a loaded host).
//
// The spec, in the order STYLE.md gives (specOpts): default spec (a
// private network namespace with only lo), read-only rootfs, the process,
// cwd, env, user, no_new_privs, capabilities, then seccomp, then the
// mounts, then resource limits.
//
// # Lock order
//
// Locks are taken in this order, never the reverse; a lock lower in the
// list is never held while one above it is taken:
//
//  1. Session.fileMu: serializes this process's file-tool writes.
//  2. store.lock (flock on the session's lock file, a new open file
//     description each time, never nested): serializes writes and the
//     charged violations across processes.
//  3. Session.calls: read-held by each call until its container exited,
//     write-held by Changes.
//  4. Session.readyMu: the parts made on the first need (an ephemeral
//     session's store and layout, the watch); ready takes no other lock
//     while holding it (it prepares a new ephemeral store's mounts
//     without the store lock: no other process can open it), and Close
//     holds it while the watch stops.
//  5. Session.mu: the closed and failed state, the charged violations of
//     an ephemeral session.
//  6. Leaves, held briefly and never while taking another: runner.mu,
//     pool.mu (under which only warmCap.mu is taken), watcher.mu and watcher.bmu, Executor.connMu (which the
//     first connect holds through the container sweep),
//     Executor.sweptMu, Executor.initOnce.
//
// The inuse flock is not in the order: it is taken once when a session
// is opened and released when it is closed, never waited for while
// another lock is held (sweeps and Prune only try it, LOCK_NB).
// So a file-tool write makes the session ready first, then takes fileMu,
// then the store lock, then calls (its container run, which finds the
// session ready under readyMu); Changes takes calls, then mu, and CallChanges' charge
// takes the store lock only after Changes released calls. (Before the
// split, Write took the store lock and then, through prepare, mu and the
// store lock again through a second open file description.)
package sandbox
