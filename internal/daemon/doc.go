// Package daemon is `corral daemon`: the long-lived owner of every session
// of one state directory, serving corral's HTTP/JSON API (package
// sandbox/api, docs/api/openapi.yaml) on a unix socket.
//
// Parts, each in its file:
//
//   - daemon.go: Run — the state directory's lock (flock on
//     STATE_DIR/daemon.lock), the socket (systemd's, or one made 0660
//     root:group), the crash sweep and re-adoption at start, the idle
//     prune timer, and the stop on SIGTERM (stop accepting, a grace for
//     calls in flight, then cancel them; sessions are closed, never
//     removed).
//   - server.go: Server — the routes (net/http ServeMux patterns), strict
//     request decoding, and who may see which session. stream.go: the
//     per-call queue between a streamed exec and its client. limiter.go:
//     the host-wide caps on calls that run a container (how many, and the
//     sum of their memory limits), one queue for both. conns.go: the cap
//     on open connections. errors.go: corral's errors as API errors.
//   - peer_linux.go: the caller's identity from SO_PEERCRED and
//     SO_PEERGROUPS on the accepted connection, and file access checked as
//     the caller (package fscred: setfsuid on a locked, discarded
//     thread, then faccessat2(AT_EACCESS)); the session's copy out of
//     the repository reads with the same credentials (CreateConfig.CopyAs).
//   - owners.go: who owns each session (STATE_DIR/daemon/sessions/ID.json):
//     a uid, or in Pod mode a Pod. The record is written pending before
//     its session is made and committed after (the creation's journal);
//     the next start undoes a creation left pending.
//   - pods.go: Pod mode's lifecycle (Options.KubeletRoot): a deleted Pod's
//     sessions end, their patches kept under STATE_DIR/patches/<pod uid>/
//     and served to admins (GET /v1/patches). The caller's Pod and its
//     volumes are package kubepod's.
//   - keptpatch.go: the patches kept for their owners (a uid but root, in
//     Pod mode a Pod) under STATE_DIR/patches/<owner>/, one owner notion
//     in both modes: the --max-kept-patch-bytes budget, the
//     --kept-patch-retention sweep, and each owner's own list, fetch and
//     removal.
//   - backend_iface.go: Backend, what the handlers need of sessions, in the
//     API's types; backend.go implements it over packages sandbox and
//     review and is the only file of the package that calls them.
//
// Identity is the kernel's: the peer's uid, gid, pid and groups are read
// once per connection (http.Server.ConnContext) and never from a request.
// A session belongs to the uid that created it; to any other uid but root
// and the admin group it answers 404 exactly as a session that does not
// exist. In Pod mode it belongs to the calling Pod instead (its process's
// cgroup names it), and only that Pod and the admins see it.
package daemon
