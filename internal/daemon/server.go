package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/audit"
	apidoc "github.com/corral-sandbox/corral/docs/api"
	"github.com/corral-sandbox/corral/internal/kubepod"
	"github.com/corral-sandbox/corral/internal/testhook"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
)

// Limits of a request.
const (
	// maxBody bounds a request body: a write's 8 MiB of content in base64
	// and its envelope.
	maxBody = 12 << 20
	// answerWrite bounds the time to write an unstreamed answer.
	answerWrite = 60 * time.Second
	// maxIdleTTL bounds a session's idle TTL.
	maxIdleTTL = 30 * 24 * time.Hour
	// maxProfile bounds a profile file.
	maxProfile = 1 << 20
	// DefaultMaxSessionsPerUID is the daemon's default
	// --max-sessions-per-uid.
	DefaultMaxSessionsPerUID = 32
	// DefaultMaxWriteAreaPerUID is the daemon's default
	// --max-write-area-per-uid: 64 write areas of the built-in profile's
	// 64MiB, twice what DefaultMaxSessionsPerUID sessions of it hold.
	DefaultMaxWriteAreaPerUID = "4GiB"
)

// Options are the server's trusted configuration (the daemon's flags).
type Options struct {
	// Version is corral's build version.
	Version string
	// AdminGID is the group whose members, like root, see and touch
	// every session; -1 for none.
	AdminGID int
	// MaxRunning caps the calls running a container at once, host-wide;
	// QueueWait is how long a call over it waits for a slot.
	MaxRunning int
	QueueWait  time.Duration
	// MaxRunningPerUID caps the calls one owner runs at once (the owners
	// MaxSessionsPerUID counts: every uid but root, in Pod mode every Pod
	// but the admins), so that one owner's long calls never hold every
	// slot; 0 for no cap.
	MaxRunningPerUID int
	// DefaultIdleTTL is a new session's idle TTL when its request names
	// none.
	DefaultIdleTTL time.Duration
	// MaxSessionsPerUID caps the sessions one owner may hold at once
	// (each holds host mounts, a write area and containers created
	// ahead); 0 for no cap. The owner is the uid, root not capped; in Pod
	// mode it is the Pod ("pod:UID"), whatever uid its processes run as.
	MaxSessionsPerUID int
	// MaxSessions caps the sessions the daemon holds at once, every
	// owner's together, root's included; 0 for no cap.
	MaxSessions int
	// MaxMemory caps, in bytes, the memory limits of the calls running at
	// once (each call reserves its profile's resources.memory, the limit
	// of its container's cgroup); 0 for no cap. A call over it waits in
	// the queue of MaxRunning. A session whose profile's limit alone is
	// above it is refused at creation.
	MaxMemory int64
	// MaxWriteAreaPerUID caps, in bytes, the write areas (the tmpfs of a
	// writable session, its profile's write_area) of the sessions one
	// owner holds (the owners MaxSessionsPerUID counts), and
	// MaxWriteArea those of every session together; 0 for no cap. A
	// creation over either is refused (*ErrWriteAreas) before anything
	// is made. See writearea.go for why --max-memory does not cover them.
	MaxWriteAreaPerUID, MaxWriteArea int64
	// MaxKeptPatchBytes caps the bytes of the patches kept for one owner
	// (keepsOwn: in Pod mode a Pod, outside it a uid but root; the
	// admins' sessions keep theirs uncapped): a DELETE without discard
	// that would pass it is refused, and an owner a session end left over
	// it may create no session until it removes kept patches
	// (docs/daemon.md, "Kept patches"); 0 for no cap.
	MaxKeptPatchBytes int64
	// KeptPatchRetention is how long an owner's kept patch stays after
	// its session ended before the prune timer removes it; 0 for ever.
	KeptPatchRetention time.Duration
	// StateDir holds the daemon's owner records (STATE_DIR/daemon).
	StateDir string
	// KubeletRoot, when set, is the kubelet's root directory on the node
	// (its --root-dir) and puts the server in Pod mode: a caller is
	// identified by its Pod (package kubepod), owns its sessions as
	// "pod:UID", and names its repository as one of its own volumes
	// (api.Volume) found under KubeletRoot/pods/UID/volumes. A caller in
	// no Pod is refused unless it is root or in the daemon's own Pod.
	KubeletRoot string
	// Log receives one line per failed request and the daemon's notes.
	Log io.Writer
}

// Server is the daemon's HTTP API over a Backend. Its Handler must be
// served with ConnContext set to ConnContext (Serve does), so that each
// request carries its connection's peer.
type Server struct {
	opt    Options
	b      Backend
	owners *owners
	lim    *limiter
	mux    *http.ServeMux
	now    func() time.Time
	// ownPod is the Pod the daemon runs in (Pod mode; "" for none): a
	// caller in it (kubectl exec into the daemon's Pod) is an admin.
	ownPod string
	// patchesMu serializes the ending of Pods' sessions.
	patchesMu sync.Mutex
	// endPodHook, when set (tests), runs after each step of ending a
	// deleted Pod's session; an error stops there, as a kill would.
	endPodHook func(step string) error
	// createHook, when set (tests), runs after each step of a session's
	// creation (createPending, createMade, createCommitted); an error
	// stops it there, as a kill would.
	createHook func(step string) error

	mu sync.Mutex
	// creating counts the sessions being created, per owner (ownerKey)
	// and in all.
	creating      map[string]int
	creatingTotal int
}

// NewServer returns the API server of b. It reads the owner records of
// opt.StateDir.
func NewServer(b Backend, opt Options) (*Server, error) {
	if opt.MaxRunning <= 0 {
		return nil, fmt.Errorf("max running calls %d: %w: want at least 1", opt.MaxRunning, errdefs.ErrInvalidArgument)
	}
	if opt.DefaultIdleTTL <= 0 {
		opt.DefaultIdleTTL = 24 * time.Hour
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	o, err := openOwners(opt.StateDir)
	if err != nil {
		return nil, err
	}
	s := &Server{opt: opt, b: b, owners: o, lim: newLimiter(opt.MaxRunning, opt.MaxMemory, opt.QueueWait, opt.MaxRunningPerUID),
		mux: http.NewServeMux(), now: time.Now, creating: map[string]int{}}
	if opt.KubeletRoot != "" {
		if !filepath.IsAbs(opt.KubeletRoot) {
			return nil, fmt.Errorf("kubelet root %q: %w: want an absolute path", opt.KubeletRoot, errdefs.ErrInvalidArgument)
		}
		if s.ownPod, err = ownPod(); err != nil {
			return nil, fmt.Errorf("Pod mode: the daemon's own Pod: %w", err)
		}
	}
	for _, r := range s.routes() {
		s.mux.HandleFunc(r.pattern, r.handler)
	}
	return s, nil
}

// ConnContext is http.Server.ConnContext for a daemon not in Pod mode: it
// attaches the connection's peer credentials (SO_PEERCRED,
// SO_PEERGROUPS).
func ConnContext(ctx context.Context, c net.Conn) context.Context { return withPeer(ctx, c) }

// ConnContext is http.Server.ConnContext for s: ConnContext, and in Pod
// mode the peer's Pod (package kubepod), read once per connection (by
// the connection cap when it read it at accept: connOwner).
func (s *Server) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if cc, ok := c.(*countedConn); ok && cc.l.ownerOf != nil {
		if !cc.peerOK {
			return ctx
		}
		return context.WithValue(ctx, peerKey{}, cc.peer)
	}
	p, ok := s.identify(c)
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// identify reads c's caller: SO_PEERCRED and SO_PEERGROUPS, and in Pod
// mode its Pod; ok false when the credentials could not be read.
func (s *Server) identify(c net.Conn) (Peer, bool) {
	p, ok := peerOf(withPeer(context.Background(), c))
	if !ok || !s.podMode() {
		return p, ok
	}
	p.Pod, p.PodErr = podOf(c, p)
	return p, true
}

// connOwner is the connection cap's ownerOf (--max-connections-per-uid):
// c's caller and the owner its connections count against — "uid N", or
// in Pod mode "pod:UID" for a caller in a Pod — capped false for the
// daemon's admins (root, the admin group; in Pod mode root in no Pod and
// the daemon's own Pod), so that no caller can lock them out. A caller
// whose credentials or Pod could not be read is counted by uid: its
// requests are refused, its connections still held.
func (s *Server) connOwner(c net.Conn) (p Peer, ok bool, owner string, capped bool) {
	p, ok = s.identify(c)
	switch {
	case !ok:
		return p, false, "an unidentified caller", true
	case s.podMode() && p.PodErr == nil && p.Pod != "":
		return p, true, "pod:" + p.Pod, p.Pod != s.ownPod
	case s.podMode():
		return p, true, fmt.Sprintf("uid %d", p.UID), p.PodErr != nil || p.UID != 0
	}
	return p, true, fmt.Sprintf("uid %d", p.UID), !s.admin(p)
}

// podMode reports whether the server serves Pods (Options.KubeletRoot).
func (s *Server) podMode() bool { return s.opt.KubeletRoot != "" }

// admin reports whether p sees and touches every session: root and the
// admin group; in Pod mode a caller in no Pod (root on the node: others
// are refused) or in the daemon's own Pod, and no other Pod whatever its
// uid.
func (s *Server) admin(p Peer) bool {
	if s.podMode() {
		return p.Pod == "" || p.Pod == s.ownPod
	}
	return p.UID == 0 || (s.opt.AdminGID >= 0 && p.inGroup(s.opt.AdminGID))
}

// refusePeer says why p may not call at all, or nil: in Pod mode a caller
// whose Pod could not be told, or one in no Pod that is not root.
func (s *Server) refusePeer(p Peer) error {
	if !s.podMode() {
		return nil
	}
	switch {
	case p.PodErr != nil:
		return fmt.Errorf("%w: telling the caller's Pod (uid %d, pid %d): %v", errdefs.ErrPermissionDenied, p.UID, p.PID, p.PodErr)
	case p.Pod == "" && p.UID != 0:
		return fmt.Errorf("%w: uid %d (pid %d) is in no Kubernetes Pod, and in Pod mode only Pods and root on the node may call", errdefs.ErrPermissionDenied, p.UID, p.PID)
	}
	return nil
}

type route struct {
	pattern string
	handler http.HandlerFunc
}

// routes is every route of the API; the OpenAPI test checks that it and
// docs/api/openapi.yaml name the same ones.
func (s *Server) routes() []route {
	return []route{
		{"GET /v1/version", s.version},
		{"GET /v1/health", s.health},
		{"GET /v1/openapi.json", s.openapi},
		{"POST /v1/sessions", s.create},
		{"GET /v1/sessions", s.list},
		{"POST /v1/sessions/prune", s.prune},
		{"GET /v1/sessions/{id}", s.get},
		{"DELETE /v1/sessions/{id}", s.remove},
		{"POST /v1/sessions/{id}/check", s.check},
		{"POST /v1/sessions/{id}/exec", s.exec},
		{"POST /v1/sessions/{id}/files:read", s.read},
		{"POST /v1/sessions/{id}/files:list", s.listFiles},
		{"POST /v1/sessions/{id}/files:glob", s.glob},
		{"POST /v1/sessions/{id}/files:search", s.search},
		{"POST /v1/sessions/{id}/files:write", s.write},
		{"POST /v1/sessions/{id}/files:edit", s.edit},
		{"GET /v1/sessions/{id}/diff", s.diff},
		{"GET /v1/sessions/{id}/profile", s.profile},
		{"POST /v1/sessions/{id}/apply", s.apply},
		{"GET /v1/patches", s.listPatches},
		{"GET /v1/patches/{id}", s.getPatch},
		{"DELETE /v1/patches/{id}", s.removePatch},
	}
}

// Patterns returns the patterns of every route ("GET /v1/version", …).
func (s *Server) Patterns() []string {
	var out []string
	for _, r := range s.routes() {
		out = append(out, r.pattern)
	}
	return out
}

// ServeHTTP serves the API. A request without a peer (a connection whose
// credentials could not be read) is refused; no route, or a method the
// route does not take, is answered in the API's error form.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := canonicalPath(r.URL); err != nil {
		writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: api.Error{Kind: api.KindInvalid, Message: err.Error()}})
		return
	}
	p, ok := peerOf(r.Context())
	if !ok {
		s.fail(w, r, fmt.Errorf("%w: the caller's credentials (SO_PEERCRED) could not be read", errdefs.ErrPermissionDenied))
		return
	}
	if err := s.refusePeer(p); err != nil {
		s.fail(w, r, err)
		return
	}
	r = r.WithContext(audit.ContextWithPeer(r.Context(), audit.Peer{UID: p.UID, GID: p.GID, PID: p.PID, Pod: p.Pod}))
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r) // sets the path's values
		return
	}
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	kind, msg := api.KindNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)
	if rec.status == http.StatusMethodNotAllowed {
		kind, msg = "method_not_allowed", fmt.Sprintf("%s %s: method not allowed (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow"))
	}
	status := rec.status
	if status == 0 || status/100 == 3 {
		// The mux redirects unclean paths (refused above, canonicalPath);
		// an API client never needs a redirect.
		status = http.StatusNotFound
	}
	writeJSON(w, status, api.ErrorBody{Error: api.Error{Kind: kind, Message: msg}})
}

// canonicalPath refuses a request path that is not in its one canonical
// form, before any routing: an empty or relative path, a "." or ".."
// segment, an empty segment ("//", or a trailing "/"), or a
// percent-encoding other than the one url.URL.EscapedPath would make
// (an encoded "/" or "." — url.URL.RawPath is set exactly then). A
// router that cleaned such a path (net/http.ServeMux answers a redirect)
// would serve one spelling under the name of another; the API has one
// spelling per route, so any other is the client's mistake, said as
// such (400 invalid, naming what is wrong).
func canonicalPath(u *url.URL) error {
	p := u.Path
	bad := func(why string) error {
		return fmt.Errorf("request path %q: %w: not canonical: %s", u.EscapedPath(), errdefs.ErrInvalidArgument, why)
	}
	switch {
	case !strings.HasPrefix(p, "/"):
		return bad("want an absolute path")
	case u.RawPath != "":
		return bad("percent-encodes a character that is spelled plainly (or an encoded \"/\")")
	case p == "/":
		return nil
	case strings.HasSuffix(p, "/"):
		return bad("a trailing \"/\"")
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return bad("an empty segment (\"//\")")
		case ".":
			return bad("a \".\" segment")
		case "..":
			return bad("a \"..\" segment")
		}
	}
	return nil
}

// recorder captures the mux's own answer for a request it has no route
// for.
type recorder struct {
	header http.Header
	status int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(p []byte) (int, error) { return len(p), nil }
func (r *recorder) WriteHeader(code int)        { r.status = code }

// writeJSON writes v as the answer with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		fmt.Fprintf(&buf, `{"error":{"kind":"failed","message":%q}}`+"\n", "encoding the answer: "+err.Error())
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(answerWrite))
	w.Header().Set("Content-Type", api.MediaJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers err in the API's error form.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.failWith(w, r, err, nil)
}

func (s *Server) failWith(w http.ResponseWriter, r *http.Request, err error, rep *api.Report) {
	e := apiError(err)
	status := statusOf(e)
	if status >= 500 {
		p, _ := peerOf(r.Context())
		fmt.Fprintf(s.opt.Log, "corral daemon: %s %s (uid %d pid %d): %v\n", r.Method, r.URL.Path, p.UID, p.PID, err)
	}
	writeJSON(w, status, api.ErrorBody{Error: e, Report: rep})
}

// decode reads the request body into v strictly: JSON, at most maxBody,
// no unknown field (a field this daemon does not know might have been
// meant to restrict the call, so it is refused, not ignored).
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, api.MediaJSON) {
		return fmt.Errorf("content type %q: %w: want %s", ct, errdefs.ErrInvalidArgument, api.MediaJSON)
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return fmt.Errorf("request body: %w: larger than %d bytes", errdefs.ErrInvalidArgument, maxBody)
		}
		return fmt.Errorf("request body: %w: %v", errdefs.ErrInvalidArgument, err)
	}
	if dec.More() {
		return fmt.Errorf("request body: %w: more than one JSON value", errdefs.ErrInvalidArgument)
	}
	return nil
}

// visible reports whether p may see the session whose owner record is
// rec: an admin always; in Pod mode the owner Pod only; else the owner
// uid.
func (s *Server) visible(p Peer, rec ownerRecord) bool {
	switch {
	case s.admin(p):
		return true
	case s.podMode():
		return p.Pod != "" && rec.Pod == p.Pod
	}
	return p.UID == rec.UID
}

// errNoSession is the one answer for a session that does not exist and
// for one the caller may not see: the same text, so that an answer never
// tells one from the other.
func errNoSession(id string) error {
	return fmt.Errorf("session %s: %w", id, errdefs.ErrNotFound)
}

// session returns the id of the request's session when the peer may see
// it, else answers 404 and returns false. The backend answers the same
// 404 for a session that does not exist.
func (s *Server) session(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	p, _ := peerOf(r.Context())
	if !idPattern.MatchString(id) || !s.visible(p, s.owners.get(id)) {
		s.fail(w, r, errNoSession(id))
		return "", false
	}
	return id, true
}

// notFound rewrites the backend's not-found for id into errNoSession.
func notFound(id string, err error) error {
	if errdefs.IsNotFound(err) && !isFileFailure(err) {
		return errNoSession(id)
	}
	return err
}

func isFileFailure(err error) bool {
	var f *FileFailure
	return errors.As(err, &f)
}

func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.VersionInfo{Version: s.opt.Version, API: api.Version, Go: runtime.Version()})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	h := api.Health{Containerd: s.b.Containerd(ctx)}
	h.OK = h.Containerd.OK
	if list, err := s.b.Sessions(ctx); err == nil {
		h.Sessions = len(list)
	}
	running, waiting, memory := s.lim.state()
	h.Calls = api.CallsState{Running: running, Waiting: waiting, Cap: s.lim.maxCalls}
	h.Warm = s.b.Warm()
	if s.lim.maxMemory > 0 {
		h.Calls.Memory, h.Calls.MemoryCap = memory, s.lim.maxMemory
	}
	writeJSON(w, http.StatusOK, h)
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	doc, err := apidoc.JSON()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", api.MediaJSON)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSession
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	p, _ := peerOf(r.Context())
	var ttl time.Duration // none named: the profile's, at most opt.DefaultIdleTTL
	if req.IdleTTL != "" {
		d, err := time.ParseDuration(req.IdleTTL)
		if err != nil || d <= 0 || d > maxIdleTTL {
			s.fail(w, r, fmt.Errorf("idle_ttl %q: %w: want a duration above 0 and at most %s", req.IdleTTL, errdefs.ErrInvalidArgument, maxIdleTTL))
			return
		}
		ttl = d
	}
	rsv, err := s.reserveSession(p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rsv.release()
	cfg := CreateConfig{CreateSession: req, IdleTTL: ttl, DefaultIdleTTL: s.opt.DefaultIdleTTL, MaxMemory: s.opt.MaxMemory,
		ReserveWriteArea: rsv.reserveWriteArea}
	isFile := strings.ContainsRune(req.Profile, '/') || strings.HasSuffix(req.Profile, ".yaml")
	if err := s.checkPodCreate(p, req, isFile); err != nil {
		s.fail(w, r, err)
		return
	}
	// A profile file is read as the caller, once: the daemon reads only
	// what the caller could read itself.
	if isFile {
		if !filepath.IsAbs(req.Profile) {
			s.fail(w, r, fmt.Errorf("profile %q: %w: a profile file must be named by an absolute path", req.Profile, errdefs.ErrInvalidArgument))
			return
		}
		data, err := readFileAsPeer(p, "profile", req.Profile, maxProfile)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		cfg.ProfileData = data
	}
	if s.podMode() {
		// The repository is the calling Pod's own volume, opened by the
		// daemon beneath the kubelet's directory of that Pod: the request
		// names a volume, never a path.
		v, err := kubepod.OpenVolume(s.opt.KubeletRoot, p.Pod, req.Volume.Name, req.Volume.SubPath)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		cfg.Repo, cfg.RepoDev, cfg.RepoIno = v.Path, uint64(v.Stat.Dev), v.Stat.Ino
	} else {
		real, st, err := openDirAsPeer(p, req.Repo)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		cfg.Repo, cfg.RepoDev, cfg.RepoIno = real, uint64(st.Dev), st.Ino
		// What the session copies out of the repository (its write
		// directory, or its page) the caller must be able to read itself.
		// The copy reads it with the caller's credentials (CopyAs), so
		// what it takes is what the caller could read when it was taken;
		// checkCopiedAsPeer only says early, and precisely, what the
		// caller may not read. A scope the allowlist refuses is refused
		// by the backend, with its own message. (A Pod's volume is the
		// Pod's own, whole.)
		if p.UID != 0 {
			c := p.creds()
			cfg.CopyAs = &c
		}
		if scope, err := allowlist.NewScope(allowlist.ScopeConfig{Dir: req.Scope, Page: req.Page, AgentID: req.AgentID, ReadOnly: req.ReadOnly}); err == nil && !req.ReadOnly {
			if err := checkCopiedAsPeer(p, real, scope.Dir, scope.Page); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		if err := testhook.Point(HookCreateChecked); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	// Creating mounts and starts containers: it takes a slot of the call
	// cap as a call does, and reserves no memory (what it creates ahead
	// runs nothing).
	release, ok := s.slot(w, r, "")
	if !ok {
		return
	}
	defer release() // given back once (acquire's release): a panic too
	// Journaled: the owner record, pending, first; then the session;
	// then the record committed. A daemon killed at any point leaves a
	// pending record that names whatever it made, and the next start
	// removes both (undoPendingCreates): never a session without its
	// owner's record (root's until its idle TTL).
	cfg.ID, err = sandbox.NewSessionID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Every way out but a commit and a test's kill undoes the creation:
	// a failure or a panic, before the backend made the session or after
	// (inside Create, or between Create and the commit). The client got
	// an error, so nothing may stay: the session is removed, nothing
	// kept, then its pending record (undoCreate). The session cap's place
	// is given back with the slot.
	keep := false
	defer func() {
		if !keep {
			s.undoCreate(context.WithoutCancel(r.Context()), cfg.ID)
		}
	}()
	rec := ownerRecord{UID: p.UID, GID: p.GID, Pod: p.Pod, Volume: req.Volume, Pending: true}
	cfg.WarmOwner = rec.warmOwner()
	if err := rsv.record(cfg.ID, rec); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.createStep(createPending); err != nil {
		keep = true // a kill: nothing undone
		s.fail(w, r, err)
		return
	}
	sess, err := s.b.Create(r.Context(), cfg)
	release()
	if err != nil {
		s.fail(w, r, err) // undone on the way out
		return
	}
	if err := s.createStep(createMade); err != nil {
		keep = true
		s.fail(w, r, err)
		return
	}
	if err := s.owners.commit(cfg.ID); err != nil {
		// Without its owner record the session would be root's: undone
		// on the way out.
		s.fail(w, r, err)
		return
	}
	keep = true
	if err := s.createStep(createCommitted); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.annotate(sess))
}

// HookCreateChecked is the test point (package testhook) of a creation
// between the caller's checks of what it copies and the copy: where a
// swap of the repository's files would have to land.
const HookCreateChecked = "daemon: create: checked as the caller"

// The steps of a creation, after each of which the test hook createHook
// may stop it as a kill would.
const (
	createPending   = "pending"   // the owner record written, pending
	createMade      = "made"      // the session made
	createCommitted = "committed" // the owner record committed
)

// createStep runs createHook, then the testhook point HookCreateStep +
// step (tests), after step of a creation.
func (s *Server) createStep(step string) error {
	if s.createHook != nil {
		if err := s.createHook(step); err != nil {
			return err
		}
	}
	return testhook.Point(HookCreateStep + step)
}

// HookCreateStep, followed by a step's name (createPending "pending",
// createMade "made", createCommitted "committed"), names the testhook
// point after that step of a creation; an error there stops the
// creation as a kill would (nothing undone).
const HookCreateStep = "daemon: create: after "

// undoCreate undoes the creation of session id that failed or panicked
// in this daemon: the session, if the backend made it, is removed with
// nothing kept, then its pending owner record. A session that could not
// be removed keeps its pending record — its creator's, as the record
// says — for the next start to undo (undoPendingCreates): never a
// session that belongs to nobody.
func (s *Server) undoCreate(ctx context.Context, id string) {
	_, err := s.b.Remove(ctx, id, true)
	if err != nil && !errdefs.IsNotFound(err) {
		fmt.Fprintf(s.opt.Log, "corral daemon: session %s: undoing its failed creation: %v (its pending owner record stays; the next start removes it)\n", id, err)
		return
	}
	if err == nil {
		fmt.Fprintf(s.opt.Log, "corral daemon: session %s: its creation failed; removed\n", id)
	}
	if err := s.owners.remove(id); err != nil {
		fmt.Fprintf(s.opt.Log, "corral daemon: session %s: removing the owner record of its failed creation: %v\n", id, err)
	}
}

// undoPendingCreates undoes the creations a stopped daemon left
// unfinished (an owner record still pending): the session, if it was
// made, is removed with nothing kept (its creator never got it), then
// the record. It runs at start, before anything else reads the records.
func (s *Server) undoPendingCreates(ctx context.Context) error {
	var errs []error
	for _, id := range s.owners.pending() {
		_, err := s.b.Remove(ctx, id, true)
		if err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("session %s, its creation interrupted: %w", id, err))
			continue
		}
		if err == nil {
			fmt.Fprintf(s.opt.Log, "corral daemon: session %s: its creation was interrupted; removed\n", id)
		}
		errs = append(errs, s.owners.remove(id))
	}
	return errors.Join(errs...)
}

// checkPodCreate checks a creation against the server's mode: in Pod mode
// the repository is one of the calling Pod's volumes (volume required,
// repo and profile files refused: both would name a node path); outside
// it volume is refused.
func (s *Server) checkPodCreate(p Peer, req api.CreateSession, profileFile bool) error {
	if !s.podMode() {
		if req.Volume != nil {
			return fmt.Errorf("volume: %w: only a daemon in Pod mode (--kubelet-root) takes a Pod volume; name the repository with repo", errdefs.ErrInvalidArgument)
		}
		return nil
	}
	switch {
	case req.Repo != "":
		return fmt.Errorf("repo %q: %w: in Pod mode the repository is one of the calling Pod's volumes, named with volume {name, subPath}, never a node path", req.Repo, errdefs.ErrInvalidArgument)
	case req.Volume == nil:
		return fmt.Errorf("volume: %w: required in Pod mode (the calling Pod's volume holding the repository: {name, subPath})", errdefs.ErrInvalidArgument)
	case profileFile:
		return fmt.Errorf("profile %q: %w: in Pod mode a profile is named by its built-in name, never a node path", req.Profile, errdefs.ErrInvalidArgument)
	case p.Pod == "":
		return fmt.Errorf("volume: %w: the caller is in no Pod, so it has no volumes", errdefs.ErrPermissionDenied)
	}
	return nil
}

// ErrTooManySessions is a creation over one of the daemon's session caps:
// Flag names it (--max-sessions-per-uid, --max-sessions), Of whose
// sessions it counts ("uid 1001", "pod:UID", "this host"). It wraps
// errdefs.ErrResourceExhausted (422 limit).
type ErrTooManySessions struct {
	Of   string
	Max  int
	Flag string
}

func (e *ErrTooManySessions) Error() string {
	return fmt.Sprintf("sessions of %s: %d already, the daemon's %s; remove one first", e.Of, e.Max, e.Flag)
}

// Unwrap returns errdefs.ErrResourceExhausted.
func (e *ErrTooManySessions) Unwrap() error { return errdefs.ErrResourceExhausted }

// reservation is one creation counted against MaxSessions and
// MaxSessionsPerUID until its owner record is added (record) or it fails
// (release).
type reservation struct {
	s     *Server
	owner string // "" when the owner's own cap does not apply
	of    string // the owner as errors name it ("uid 1001", "pod:UID")
	done  bool
	// id is the session whose pending owner record ended the
	// reservation (record), where reserveWriteArea puts its bytes.
	id string
}

// sessionCap is one of the caps a creation is counted against: at most
// max sessions of those whose owner record match says are in it, its
// error naming flag and of.
type sessionCap struct {
	max      int
	flag, of string
	match    func(ownerRecord) bool
	creating int
}

// ownerCapped reports whether p's sessions count against
// MaxSessionsPerUID: every uid but root; in Pod mode every Pod (a Pod's
// processes may all run as root), but not the node's admins.
// warmOwnerOf is the key under which session id's containers created
// ahead share --max-warm (ownerRecord.warmOwner); Run gives it to
// Backend.Adopt.
func (s *Server) warmOwnerOf(id string) string { return s.owners.get(id).warmOwner() }

func (s *Server) ownerCapped(p Peer) bool {
	if s.podMode() {
		return !s.admin(p)
	}
	return p.UID != 0
}

// reserveSession counts a creation by p against MaxSessions (every
// session) and MaxSessionsPerUID (p's owner's: ownerKey) — the recorded
// sessions and those being created, so that parallel requests cannot
// overshoot — before anything is read or made. The caller must call
// release (a no-op after record).
func (s *Server) reserveSession(p Peer) (*reservation, error) {
	owner := ownerKey(p)
	rsv := &reservation{s: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	caps := []sessionCap{{max: s.opt.MaxSessions, flag: "--max-sessions", of: "this host",
		match: func(ownerRecord) bool { return true }, creating: s.creatingTotal}}
	if s.ownerCapped(p) {
		rsv.owner = owner
		of := owner
		if p.Pod == "" {
			of = fmt.Sprintf("uid %d", p.UID)
		}
		rsv.of = of
		caps = append(caps, sessionCap{max: s.opt.MaxSessionsPerUID, flag: "--max-sessions-per-uid", of: of,
			match: func(r ownerRecord) bool { return r.owner() == owner }, creating: s.creating[owner]})
	}
	for _, c := range caps {
		if c.max > 0 && s.owners.count(c.match)+c.creating >= c.max {
			return nil, &ErrTooManySessions{Of: c.of, Max: c.max, Flag: c.flag}
		}
	}
	if rsv.owner != "" {
		// An owner an idle expiry or a race left over its kept-patch
		// budget makes nothing more to keep until it is under.
		if err := s.overBudget(owner); err != nil {
			return nil, err
		}
	}
	s.creatingTotal++
	if rsv.owner != "" {
		s.creating[rsv.owner]++
	}
	return rsv, nil
}

// record adds the new session's owner record and ends the reservation
// at once (one lock: the session is never counted twice, nor not at
// all).
func (r *reservation) record(id string, rec ownerRecord) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.id = id
	r.end()
	return r.s.owners.add(id, rec)
}

// release ends a reservation that recorded nothing.
func (r *reservation) release() {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.end()
}

// end drops the reservation's counts; s.mu held.
func (r *reservation) end() {
	if r.done {
		return
	}
	r.done = true
	r.s.creatingTotal--
	if r.owner == "" {
		return
	}
	if r.s.creating[r.owner]--; r.s.creating[r.owner] == 0 {
		delete(r.s.creating, r.owner)
	}
}

// annotate adds the daemon's own fields to a backend session.
func (s *Server) annotate(sess api.Session) api.Session {
	rec := s.owners.get(sess.ID)
	sess.Owner = rec.UID
	sess.OwnedBy = rec.owner()
	sess.Volume = rec.Volume
	if sess.LastUsed.IsZero() {
		sess.LastUsed = sess.Created
	}
	return sess
}

// visibleSessions lists the sessions the peer may see.
func (s *Server) visibleSessions(ctx context.Context) ([]api.Session, error) {
	p, _ := peerOf(ctx)
	all, err := s.b.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.Session{}
	for _, sess := range all {
		sess = s.annotate(sess)
		if s.visible(p, s.owners.get(sess.ID)) {
			out = append(out, sess)
		}
	}
	return out, nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	list, err := s.visibleSessions(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id, ok := s.session(w, r)
	if !ok {
		return
	}
	list, err := s.visibleSessions(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	i := slices.IndexFunc(list, func(x api.Session) bool { return x.ID == id })
	if i < 0 {
		s.fail(w, r, errNoSession(id))
		return
	}
	writeJSON(w, http.StatusOK, list[i])
}

func (s *Server) remove(w http.ResponseWriter, r *http.Request) {
	id, ok := s.session(w, r)
	if !ok {
		return
	}
	var discard bool
	switch v := r.URL.Query().Get("discard"); v {
	case "", "false":
	case "true":
		discard = true
	default:
		s.fail(w, r, fmt.Errorf("discard %q: %w: want true or false", v, errdefs.ErrInvalidArgument))
		return
	}
	rm, err := s.removeSession(r.Context(), id, discard, endByDelete)
	if err != nil {
		s.fail(w, r, notFound(id, err))
		return
	}
	writeJSON(w, http.StatusOK, rm)
}

// removeSession removes session id, keeping its change set unless
// discard; the kept patch of an owner's session goes with its owner's
// (keepsOwn, endOwnSession), why saying who ended it (endByDelete,
// endByPrune, endByIdle).
func (s *Server) removeSession(ctx context.Context, id string, discard bool, why string) (api.Removed, error) {
	if rec := s.owners.get(id); !discard && s.keepsOwn(rec) {
		return s.endOwnSession(ctx, rec, id, why)
	}
	rm, err := s.b.Remove(ctx, id, discard)
	if err != nil {
		return rm, err
	}
	return rm, s.owners.remove(id)
}

func (s *Server) prune(w http.ResponseWriter, r *http.Request) {
	var req api.Prune
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	var idleFor time.Duration
	if req.IdleFor != "" {
		d, err := time.ParseDuration(req.IdleFor)
		if err != nil || d < 0 {
			s.fail(w, r, fmt.Errorf("idle_for %q: %w: want a duration of 0 or more", req.IdleFor, errdefs.ErrInvalidArgument))
			return
		}
		idleFor = d
	}
	list, err := s.visibleSessions(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.pruneSessions(r.Context(), list, func(api.Session) time.Duration {
		return idleFor
	}, req.IdleFor != "", endByPrune)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// pruneSessions removes the sessions of list idle for at least their
// threshold: limit's answer when useLimit, else their own TTL; why says
// who ends them (endByPrune: a caller's request, answered as a DELETE
// is; endByIdle: the daemon's timer).
func (s *Server) pruneSessions(ctx context.Context, list []api.Session, limit func(api.Session) time.Duration, useLimit bool, why string) (api.Pruned, error) {
	out := api.Pruned{Pruned: []api.Removed{}}
	now := s.now()
	var errs []error
	for _, sess := range list {
		threshold := time.Duration(sess.IdleTTLNS)
		if useLimit {
			threshold = limit(sess)
		}
		if now.Sub(sess.LastUsed) < threshold {
			continue
		}
		rm, err := s.removeSession(ctx, sess.ID, false, why)
		if err != nil {
			errs = append(errs, fmt.Errorf("session %s: %w", sess.ID, err))
			continue
		}
		out.Pruned = append(out.Pruned, rm)
	}
	return out, errors.Join(errs...)
}

// PruneExpired removes every session past its idle TTL (the daemon's
// timer).
func (s *Server) PruneExpired(ctx context.Context) (api.Pruned, error) {
	all, err := s.b.Sessions(ctx)
	if err != nil {
		return api.Pruned{}, err
	}
	for i := range all {
		all[i] = s.annotate(all[i])
	}
	return s.pruneSessions(ctx, all, nil, false, endByIdle)
}

// ForgetMissing runs at start: it undoes the creations a stopped daemon
// left unfinished (undoPendingCreates), then drops owner records of
// sessions that no longer exist.
func (s *Server) ForgetMissing(ctx context.Context) error {
	if err := s.undoPendingCreates(ctx); err != nil {
		return err
	}
	return s.forgetRemoved(ctx)
}

// forgetRemoved drops the owner records of sessions that no longer exist
// (removed by the CLI, or by the sandbox's own sweep: an expired
// session no process held). A record still pending (a creation in
// flight) is never dropped, nor one committed after the sessions were
// listed: only records committed before the listing are judged by it.
func (s *Server) forgetRemoved(ctx context.Context) error {
	judged := map[string]bool{}
	for _, id := range s.owners.committed() {
		judged[id] = true
	}
	all, err := s.b.Sessions(ctx)
	if err != nil {
		return err
	}
	ids := map[string]bool{}
	for _, x := range all {
		ids[x.ID] = true
	}
	// A deleted Pod's session that is gone was being ended by a daemon
	// that stopped: its record stays for EndGonePods, which keeps what
	// the session left (endKeptSession).
	for _, id := range s.gonePodsSessions() {
		ids[id] = true
	}
	// Likewise a live Pod's session whose end a stopped daemon left
	// pending (finishPendingEnds).
	for id := range s.pendingEnds() {
		ids[id] = true
	}
	// A gone session of an owner's whose patch the sandbox's own sweep
	// kept (STATE_DIR/patches/ID.patch: it expired while no daemon held
	// it) is its owner's, as its record says: moved to the owner's kept
	// patches, and the record dropped with it (adoptSweptPatch).
	var errs []error
	for id, rec := range s.owners.all() {
		if judged[id] && !ids[id] && s.keepsOwn(rec) {
			errs = append(errs, s.adoptSweptPatch(ctx, rec, id))
		}
	}
	s.owners.keepOnly(func(id string) bool { return ids[id] || !judged[id] })
	return errors.Join(errs...)
}

// adoptSweptPatch moves the patch the sandbox's sweep kept of gone
// session id (STATE_DIR/patches/ID.patch), if any, to the kept patches
// of its owner rec, with its record (endKeptSession, which finds the
// session ended and the patch where the executor keeps patches).
func (s *Server) adoptSweptPatch(ctx context.Context, rec ownerRecord, id string) error {
	if _, err := os.Lstat(filepath.Join(s.patchesDir(), id+".patch")); err != nil {
		return nil
	}
	dir, err := s.keptDir(rec.owner())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	s.patchesMu.Lock()
	defer s.patchesMu.Unlock()
	if _, _, err := s.endKeptSession(ctx, dir, id, "idle past its TTL (removed by the sandbox's sweep)"); err != nil {
		return fmt.Errorf("session %s: keeping its swept patch with %s's: %w", id, rec.owner(), err)
	}
	return nil
}

func (s *Server) check(w http.ResponseWriter, r *http.Request) {
	id, ok := s.session(w, r)
	if !ok {
		return
	}
	var req api.Check
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := s.b.Check(r.Context(), id, req.Argv)
	if err != nil {
		s.fail(w, r, notFound(id, err))
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// slot takes a slot of the host-wide caps for a call of session id that
// runs a container, reserving the memory limit of the session's
// containers (Backend.CallMemory); id "" is a creation, which reserves
// none. The queue is fair between the callers' owners (ownerKey). Over
// the caps for the whole queue wait it answers 429 busy.
func (s *Server) slot(w http.ResponseWriter, r *http.Request, id string) (func(), bool) {
	var profile string
	var memory int64
	if id != "" && s.opt.MaxMemory > 0 {
		var err error
		if profile, memory, err = s.b.CallMemory(r.Context(), id); err != nil {
			s.fail(w, r, notFound(id, err))
			return nil, false
		}
	}
	p, _ := peerOf(r.Context())
	release, err := s.lim.acquire(r.Context(), ownerKey(p), s.ownerCapped(p), profile, memory)
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	return release, true
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	id, ok := s.session(w, r)
	if !ok {
		return
	}
	var req api.Exec
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.Argv) == 0 {
		s.fail(w, r, fmt.Errorf("argv: %w: empty", errdefs.ErrInvalidArgument))
		return
	}
	release, ok := s.slot(w, r, id)
	if !ok {
		return
	}
	defer release()
	if !req.Stream && !strings.Contains(r.Header.Get("Accept"), api.MediaNDJSON) {
		res, err := s.b.Exec(r.Context(), id, req.Argv, nil, nil)
		// The call is done: its slot is not held while a slow client
		// reads the answer (buffered, its write bounded: writeJSON).
		release()
		if err != nil {
			s.fail(w, r, notFound(id, err))
			return
		}
		writeJSON(w, http.StatusOK, res)
		return
	}
	// The call's context ends with the request (the client went away) or
	// when the stream stalls past streamStall.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	st := newStream(w, cancel)
	res, err := s.b.Exec(ctx, id, req.Argv, st.stdout(), st.stderr())
	var ev api.ExecEvent
	if err != nil {
		e := apiError(notFound(id, err))
		ev.Error = &e
	} else {
		res.Stdout, res.Stderr = nil, nil
		ev.Result = res
	}
	if !st.finish(&ev) {
		if err != nil {
			s.fail(w, r, notFound(id, err))
			return
		}
		writeJSON(w, http.StatusOK, res)
	}
}

// fileCall runs one file tool under the call cap and answers its result.
func fileCall[Req, Res any](s *Server, w http.ResponseWriter, r *http.Request, call func(ctx context.Context, id string, req Req) (*Res, error)) {
	id, ok := s.session(w, r)
	if !ok {
		return
	}
	var req Req
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	release, ok := s.slot(w, r, id)
	if !ok {
		return
	}
	defer release()
	res, err := call(r.Context(), id, req)
	release() // as exec's: never held while the answer is written
	if err != nil {
		s.fail(w, r, notFound(id, err))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) read(w http.ResponseWriter, r *http.Request) {
	fileCall(s, w, r, func(ctx context.Context, id string, req api.Read) (*api.ReadResult, error) {
		if req.Unit != "" && req.Unit != "lines" && req.Unit != "bytes" {
			return nil, fmt.Errorf("unit %q: %w: want lines or bytes", req.Unit, errdefs.ErrInvalidArgument)
		}
		return s.b.Read(ctx, id, req)
	})
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	fileCall(s, w, r, s.b.List)
}

func (s *Server) glob(w http.ResponseWriter, r *http.Request) {
	fileCall(s, w, r, s.b.Glob)
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	fileCall(s, w, r, s.b.Search)
}

func (s *Server) write(w http.ResponseWriter, r *http.Request) {
	fileCall(s, w, r, func(ctx context.Context, id string, req api.Write) (*api.WriteResult, error) {
		content := []byte(req.Content)
		switch {
		case req.Content != "" && req.ContentB64 != nil:
			return nil, fmt.Errorf("write: %w: content and content_b64 exclude each other", errdefs.ErrInvalidArgument)
		case req.ContentB64 != nil:
			content = req.ContentB64
		}
		return s.b.Write(ctx, id, req, content)
	})
}

func (s *Server) edit(w http.ResponseWriter, r *http.Request) {
	fileCall(s, w, r, s.b.Edit)
}

func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	id, ok := s.session(w, r)
	if !ok {
		return
	}
	format := r.URL.Query().Get("format")
	var contents bool
	switch v := r.URL.Query().Get("contents"); v {
	case "", "false":
	case "true":
		contents = true
	default:
		s.fail(w, r, fmt.Errorf("contents %q: %w: want true or false", v, errdefs.ErrInvalidArgument))
		return
	}
	switch format {
	case "", "json":
		cs, err := s.b.Diff(r.Context(), id, contents)
		if err != nil {
			s.fail(w, r, notFound(id, err))
			return
		}
		writeJSON(w, http.StatusOK, cs)
	case "stat":
		cs, err := s.b.Diff(r.Context(), id, false)
		if err != nil {
			s.fail(w, r, notFound(id, err))
			return
		}
		writeText(w, api.MediaText, []byte(cs.Stat))
	case "patch":
		s.patch(w, r, id)
	default:
		s.fail(w, r, fmt.Errorf("format %q: %w: want json, patch or stat", format, errdefs.ErrInvalidArgument))
	}
}

// patch answers GET .../diff?format=patch: the session's patch streamed
// to the client one file's patch at a time (Backend.Patch), never held
// whole. Rendering holds the change set in memory (up to the session's
// write area), so it takes a slot of the call cap as the file tools do,
// held until the answer is written (within answerWrite): at most
// --max-running are held at once, whatever the number of clients. It
// reserves no memory: it runs no container.
func (s *Server) patch(w http.ResponseWriter, r *http.Request, id string) {
	release, ok := s.slot(w, r, "")
	if !ok {
		return
	}
	defer release()
	tw := &textWriter{w: w, ct: api.MediaPatch}
	err := s.b.Patch(r.Context(), id, tw)
	switch {
	case err != nil && !tw.started:
		s.fail(w, r, notFound(id, err))
	case err != nil:
		// Part of the patch is out: the answer must not look whole.
		fmt.Fprintf(s.opt.Log, "corral daemon: %s %s: the patch broke off: %v\n", r.Method, r.URL.Path, err)
		panic(http.ErrAbortHandler)
	case !tw.started:
		writeText(w, api.MediaPatch, nil) // an empty change set
	}
}

// textWriter answers a streamed text body of content type ct: the status
// and headers go with its first write, so that an error before any byte
// is still answered in the API's error form; the whole answer is bounded
// by answerWrite from there.
type textWriter struct {
	w       http.ResponseWriter
	ct      string
	started bool
}

func (t *textWriter) Write(p []byte) (int, error) {
	if !t.started {
		t.started = true
		_ = http.NewResponseController(t.w).SetWriteDeadline(time.Now().Add(answerWrite))
		t.w.Header().Set("Content-Type", t.ct)
		t.w.Header().Set("X-Content-Type-Options", "nosniff")
		t.w.WriteHeader(http.StatusOK)
	}
	return t.w.Write(p)
}

// profile is GET /v1/sessions/{id}/profile: the profile the session
// recorded, for a client that reports its limits as the CLI does.
func (s *Server) profile(w http.ResponseWriter, r *http.Request) {
	id, ok := s.session(w, r)
	if !ok {
		return
	}
	doc, err := s.b.Profile(r.Context(), id)
	if err != nil {
		s.fail(w, r, notFound(id, err))
		return
	}
	writeText(w, api.MediaYAML, doc)
}

func writeText(w http.ResponseWriter, ct string, b []byte) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(answerWrite))
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func (s *Server) apply(w http.ResponseWriter, r *http.Request) {
	id, ok := s.session(w, r)
	if !ok {
		return
	}
	var req api.Apply
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	p, _ := peerOf(r.Context())
	// The daemon writes as root: each directory written into must be one
	// the caller could write itself, and each file replaced or removed
	// one it could replace or remove.
	canWrite := func(repo, dir, file string) error {
		check := checkAsPeer(p, "repository directory", joinRepo(repo, dir), accessWrite|accessDir)
		if s.podMode() {
			// The Pod's own volume, judged from the volume down.
			check = checkBelowAsPeer(p, "repository directory", repo, dir, accessWrite|accessDir)
		}
		if check != nil {
			return check
		}
		return checkStickyAsPeer(p, repo, file)
	}
	rep, err := s.b.Apply(r.Context(), id, req, canWrite)
	if err != nil {
		s.failWith(w, r, notFound(id, err), rep)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func joinRepo(repo, dir string) string {
	if dir == "" || dir == "." {
		return repo
	}
	return strings.TrimSuffix(repo, "/") + "/" + dir
}
