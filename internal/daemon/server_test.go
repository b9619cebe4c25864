package daemon

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/daemon/apitest"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/review"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/client"
	"github.com/stretchr/testify/require"
)

// testEnv is a Server over the fake backend, served on a unix socket.
// The connection's own peer (SO_PEERCRED) is replaced by the test's
// X-Test-Peer header ("uid:gid[:group,...[:pod-uid]]"), so one test process can be
// several callers.
type testEnv struct {
	t    *testing.T
	srv  *Server
	fake *fakeBackend
	sock string
	repo string
}

func newEnv(t *testing.T, opts ...func(*Options)) *testEnv {
	t.Helper()
	o := Options{Version: "test", AdminGID: -1, MaxRunning: 4, QueueWait: time.Second, StateDir: t.TempDir()}
	for _, f := range opts {
		f(&o)
	}
	fake := newFake()
	srv, err := NewServer(fake, o)
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "corral-daemon-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := r.Header.Get("X-Test-Peer"); h != "" {
			r = r.WithContext(context.WithValue(r.Context(), peerKey{}, parsePeer(h)))
		}
		srv.ServeHTTP(w, r)
	}), ConnContext: ConnContext}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	return &testEnv{t: t, srv: srv, fake: fake, sock: sock, repo: openDir(t)}
}

// openDir is a directory every uid can reach (t.TempDir's parent is
// root's alone).
func openDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "corral-daemon-repo-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	require.NoError(t, os.Chmod(d, 0o755))
	return d
}

func parsePeer(h string) Peer {
	f := strings.Split(h, ":")
	uid, _ := strconv.Atoi(f[0])
	gid, _ := strconv.Atoi(f[1])
	p := Peer{UID: uid, GID: gid, PID: 1}
	if len(f) > 2 && f[2] != "" {
		for _, g := range strings.Split(f[2], ",") {
			n, _ := strconv.Atoi(g)
			p.Groups = append(p.Groups, n)
		}
	}
	if len(f) > 3 {
		p.Pod = f[3] // "uid:gid:groups:pod-uid": a caller in that Pod
	}
	return p
}

// headerRT sets a header on every request.
type headerRT struct {
	next       http.RoundTripper
	key, value string
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return h.next.RoundTrip(r)
}

// client returns a client acting as peer ("" for the test process
// itself), every exchange checked against the OpenAPI document.
func (e *testEnv) client(peer string) (*client.Client, *apitest.Validating) {
	var v *apitest.Validating
	wrap := apitest.Wrap(e.t, &v)
	c := client.NewWith(e.sock, func(next http.RoundTripper) http.RoundTripper {
		if peer != "" {
			next = headerRT{next: next, key: "X-Test-Peer", value: peer}
		}
		return wrap(next)
	})
	e.t.Cleanup(func() { c.Close() })
	return c, v
}

// raw sends a request as the test process and returns status and body.
func (e *testEnv) raw(method, path, contentType, body string) (int, string) {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", e.sock)
	}}}
	req, err := http.NewRequest(method, "http://corral"+path, strings.NewReader(body))
	require.NoError(e.t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRoutesMatchOpenAPI: the document is valid OpenAPI, every route the
// server registers is documented and every documented route registered.
func TestRoutesMatchOpenAPI(t *testing.T) {
	doc, _ := apitest.Load(t)
	srv, err := NewServer(newFake(), Options{MaxRunning: 1, AdminGID: -1, StateDir: t.TempDir()})
	require.NoError(t, err)
	var registered []string
	for _, p := range srv.Patterns() {
		m, path, _ := strings.Cut(p, " ")
		registered = append(registered, m+" "+path)
	}
	documented := apitest.Operations(doc)
	slices.Sort(registered)
	slices.Sort(documented)
	require.Equal(t, registered, documented)
}

// TestEveryRouteAnswersAsDocumented drives every route, its answers and
// its errors, through the client with each exchange validated against
// the document.
func TestEveryRouteAnswersAsDocumented(t *testing.T) {
	e := newEnv(t)
	c, v := e.client("")
	ctx := context.Background()

	ver, err := c.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, api.VersionInfo{Version: "test", API: "v1", Go: ver.Go}, *ver)
	h, err := c.Health(ctx)
	require.NoError(t, err)
	require.True(t, h.OK)
	require.Equal(t, 4, h.Calls.Cap)
	status, body := e.raw("GET", "/v1/openapi.json", "", "")
	require.Equal(t, 200, status)
	require.Contains(t, body, `"openapi":"3.1.0"`)

	s, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo, IdleTTL: "2h"})
	require.NoError(t, err)
	require.Equal(t, os.Getuid(), s.Owner)
	require.Equal(t, int64(2*time.Hour), s.IdleTTLNS)
	list, err := c.Sessions(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	got, err := c.Session(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, s.ID, got.ID)

	d, err := c.Check(ctx, s.ID, []string{"echo", "hi"})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	res, err := c.Exec(ctx, s.ID, []string{"echo", "hi"}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, "hi\n", string(res.Stdout))
	var out, errb bytes.Buffer
	res, err = c.Exec(ctx, s.ID, []string{"echo", "streamed"}, &out, &errb)
	require.NoError(t, err)
	require.Equal(t, "streamed\n", out.String())
	require.Equal(t, "note\n", errb.String())
	require.Empty(t, res.Stdout)
	res, err = c.Exec(ctx, s.ID, []string{"false"}, &out, nil)
	require.NoError(t, err, "a streamed call without output answers a plain result")
	require.Equal(t, 1, res.ExitCode)

	w, err := c.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: "hello\n"})
	require.NoError(t, err)
	require.True(t, w.Created)
	w, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/b.md", ContentB64: []byte("bytes\n")})
	require.NoError(t, err)
	r, err := c.Read(ctx, s.ID, api.Read{Path: "openwiki/a.md"})
	require.NoError(t, err)
	require.Equal(t, "hello\n", r.Content)
	_, err = c.Edit(ctx, s.ID, api.Edit{Path: "openwiki/a.md", Old: "hello", New: "bye", ExpectedSHA256: r.SHA256})
	require.NoError(t, err)
	_, err = c.List(ctx, s.ID, api.List{})
	require.NoError(t, err)
	_, err = c.Glob(ctx, s.ID, api.Glob{Pattern: "*.md"})
	require.NoError(t, err)
	_, err = c.Search(ctx, s.ID, api.Search{Regexp: "hi"})
	require.NoError(t, err)
	cs, err := c.Diff(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, cs.Changes, 2)
	_, err = c.DiffContents(ctx, s.ID)
	require.NoError(t, err)
	patch, err := c.Patch(ctx, s.ID)
	require.NoError(t, err)
	require.Contains(t, string(patch), "+++ b/openwiki/a.md")
	stat, err := c.Stat(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, "2 file(s) changed\n", stat)
	rep, err := c.Apply(ctx, s.ID, api.Apply{})
	require.NoError(t, err)
	require.True(t, rep.DryRun)
	_, err = c.Apply(ctx, s.ID, api.Apply{Diffs: true})
	require.NoError(t, err)
	prof, err := c.Profile(ctx, s.ID)
	require.NoError(t, err)
	require.Contains(t, string(prof), "name: docs")
	rep, err = c.Apply(ctx, s.ID, api.Apply{Approve: []string{fakeToken}, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, "would-apply", rep.Items[0].Status)
	rep, err = c.Apply(ctx, s.ID, api.Apply{Approve: []string{fakeToken}})
	require.NoError(t, err)
	require.False(t, rep.DryRun)
	require.Len(t, rep.Written, 2)

	// Errors, each in its documented form.
	_, err = c.Exec(ctx, s.ID, []string{"sh", "-c", "id"}, nil, nil)
	requireKind(t, err, api.KindRefused, 403)
	_, err = c.Exec(ctx, s.ID, []string{"sh", "-c", "id"}, &out, &errb)
	requireKind(t, err, api.KindRefused, 403)
	_, err = c.Check(ctx, s.ID, []string{"sh"})
	requireKind(t, err, api.KindRefused, 403)
	_, err = c.Read(ctx, s.ID, api.Read{Path: "missing.md"})
	requireKind(t, err, api.KindNotFound, 404)
	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: "x", ExpectedSHA256: strings.Repeat("0", 64)})
	requireKind(t, err, api.KindConflict, 409)
	_, err = c.Apply(ctx, s.ID, api.Apply{Approve: []string{"ffffffffffffffff"}})
	requireKind(t, err, api.KindRefused, 403)
	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/conflict.md", Content: "x"})
	require.NoError(t, err)
	_, err = c.Apply(ctx, s.ID, api.Apply{Approve: []string{fakeToken}})
	requireKind(t, err, api.KindConflict, 409)
	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/.openwikiignore", Content: "x"})
	require.NoError(t, err)
	_, err = c.Patch(ctx, s.ID)
	requireKind(t, err, api.KindRejected, 403)
	_, err = c.Session(ctx, "000000000000")
	requireKind(t, err, api.KindNotFound, 404)
	_, err = c.CreateSession(ctx, api.CreateSession{Repo: "relative/repo"})
	requireKind(t, err, api.KindInvalid, 400)
	_, err = c.CreateSession(ctx, api.CreateSession{Repo: e.repo, IdleTTL: "forever"})
	requireKind(t, err, api.KindInvalid, 400)

	pr, err := c.Prune(ctx, "1h")
	require.NoError(t, err)
	require.Empty(t, pr.Pruned, "the session was just used")
	pr, err = c.Prune(ctx, "0s")
	require.NoError(t, err)
	require.Len(t, pr.Pruned, 1)
	require.Equal(t, s.ID, pr.Pruned[0].Removed)
	s2, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	rm, err := c.RemoveSession(ctx, s2.ID)
	require.NoError(t, err)
	require.Equal(t, s2.ID, rm.Removed)
	_, err = c.RemoveSession(ctx, s2.ID)
	requireKind(t, err, api.KindNotFound, 404)
	s3, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	_, err = c.Write(ctx, s3.ID, api.Write{Path: "openwiki/kept.md", Content: "x"})
	require.NoError(t, err)
	rm, err = c.DiscardSession(ctx, s3.ID)
	require.NoError(t, err)
	require.Equal(t, api.Removed{Removed: s3.ID}, *rm, "discard keeps no patch")
	_, err = c.CreateSession(ctx, api.CreateSession{Repo: e.repo, Volume: &api.Volume{Name: "work"}})
	requireKind(t, err, api.KindInvalid, 400)
	pps, err := c.Patches(ctx)
	require.NoError(t, err)
	require.Empty(t, pps, "no Pod mode, no Pod's patches")
	_, err = c.PodPatch(ctx, "000000000000")
	requireKind(t, err, api.KindNotFound, 404)
	_, err = c.RemovePatch(ctx, "000000000000")
	requireKind(t, err, api.KindNotFound, 404)

	// Every route was answered at least once.
	seen := map[string]bool{}
	for k := range v.Seen {
		f := strings.Fields(k)
		seen[f[0]+" "+f[1]] = true
	}
	doc, _ := apitest.Load(t)
	for _, op := range apitest.Operations(doc) {
		if op == "GET /v1/openapi.json" {
			continue // fetched raw above
		}
		require.True(t, seen[op], "route %s was not exercised", op)
	}
}

func requireKind(t *testing.T, err error, kind string, status int) {
	t.Helper()
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, kind, ce.API.Kind, "%v", err)
	if status != 0 && ce.Status != 0 {
		require.Equal(t, status, ce.Status)
	}
}

// TestClientErrorsAreCorralsOwn: the client gives back the error types
// corral's packages return in-process, with the same text, so the CLI
// prints the same lines through the daemon.
func TestClientErrorsAreCorralsOwn(t *testing.T) {
	e := newEnv(t)
	c, _ := e.client("")
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)

	_, err = c.Exec(ctx, s.ID, []string{"sh", "-c", "id"}, nil, nil)
	var r *allowlist.Refusal
	require.ErrorAs(t, err, &r)
	want := refuse([]string{"sh"})
	require.Equal(t, want, r)
	require.Equal(t, want.Error(), err.Error())
	require.ErrorIs(t, err, errdefs.ErrPermissionDenied)

	_, err = c.Read(ctx, s.ID, api.Read{Path: ".env"})
	require.ErrorAs(t, err, &r)
	require.Equal(t, allowlist.KindPath, r.Kind)

	_, err = c.Read(ctx, s.ID, api.Read{Path: "missing.md"})
	var fe *client.FileError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "not_found", fe.Code)
	require.ErrorIs(t, err, errdefs.ErrNotFound)

	_, err = c.Apply(ctx, s.ID, api.Apply{Approve: []string{"ffffffffffffffff"}})
	var refused *review.RefusedError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, (&review.RefusedError{Problems: []changeset.Problem{{Path: "ffffffffffffffff", Reason: "approval token matches no change of this change set"}}}).Error(), err.Error())

	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/conflict.md", Content: "x"})
	require.NoError(t, err)
	_, err = c.Apply(ctx, s.ID, api.Apply{Approve: []string{fakeToken}})
	var conflict *review.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	require.NotNil(t, ce.Report, "a conflict carries the report")
	require.Equal(t, "conflict", ce.Report.Items[0].Status)

	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/.openwikiignore", Content: "x"})
	require.NoError(t, err)
	_, err = c.Patch(ctx, s.ID)
	var rejected *changeset.RejectedError
	require.ErrorAs(t, err, &rejected)
	require.Equal(t, "change set rejected: openwiki/.openwikiignore: ignore files are never written", err.Error())

	_, err = client.Dial(ctx, filepath.Join(t.TempDir(), "nothing.sock"))
	require.ErrorIs(t, err, errdefs.ErrUnavailable)
}

// TestOwnersSeeOnlyTheirSessions: a session belongs to the uid that made
// it; another uid gets the same 404 as for a session that does not exist,
// for every route; root and the admin group see everything.
func TestOwnersSeeOnlyTheirSessions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a session as another uid checks the repository as that uid (setfsuid), which needs root")
	}
	e := newEnv(t, func(o *Options) { o.AdminGID = 4242 })
	ctx := context.Background()
	alice, _ := e.client("1001:1001")
	bob, _ := e.client("1002:1002")
	admin, _ := e.client("1003:1003:4242")
	root, _ := e.client("0:0")

	s, err := alice.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	require.Equal(t, 1001, s.Owner)
	_, err = alice.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: "alice\n"})
	require.NoError(t, err)

	list, err := bob.Sessions(ctx)
	require.NoError(t, err)
	require.Empty(t, list, "another uid's list hides the session")
	missing := "0000000000ff"
	for _, id := range []string{s.ID, missing} {
		calls := map[string]func() error{
			"get":    func() error { _, err := bob.Session(ctx, id); return err },
			"check":  func() error { _, err := bob.Check(ctx, id, []string{"echo"}); return err },
			"exec":   func() error { _, err := bob.Exec(ctx, id, []string{"echo"}, nil, nil); return err },
			"stream": func() error { _, err := bob.Exec(ctx, id, []string{"echo"}, io.Discard, nil); return err },
			"read":   func() error { _, err := bob.Read(ctx, id, api.Read{Path: "openwiki/a.md"}); return err },
			"list":   func() error { _, err := bob.List(ctx, id, api.List{}); return err },
			"glob":   func() error { _, err := bob.Glob(ctx, id, api.Glob{Pattern: "*"}); return err },
			"search": func() error { _, err := bob.Search(ctx, id, api.Search{Regexp: "a"}); return err },
			"write":  func() error { _, err := bob.Write(ctx, id, api.Write{Path: "openwiki/b.md", Content: "b"}); return err },
			"edit": func() error {
				_, err := bob.Edit(ctx, id, api.Edit{Path: "openwiki/a.md", Old: "a", New: "b", ExpectedSHA256: sum("alice\n")})
				return err
			},
			"diff":   func() error { _, err := bob.Diff(ctx, id); return err },
			"patch":  func() error { _, err := bob.Patch(ctx, id); return err },
			"apply":  func() error { _, err := bob.Apply(ctx, id, api.Apply{Approve: []string{fakeToken}}); return err },
			"remove": func() error { _, err := bob.RemoveSession(ctx, id); return err },
		}
		for name, call := range calls {
			err := call()
			requireKind(t, err, api.KindNotFound, 404)
			require.Equal(t, "session "+id+": not found", err.Error(), "%s of %s", name, id)
		}
	}
	pr, err := bob.Prune(ctx, "0s")
	require.NoError(t, err)
	require.Empty(t, pr.Pruned, "prune touches only the caller's sessions")

	for _, c := range []*client.Client{admin, root} {
		list, err := c.Sessions(ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		cs, err := c.Diff(ctx, s.ID)
		require.NoError(t, err)
		require.Len(t, cs.Changes, 1)
	}
	r, err := alice.Read(ctx, s.ID, api.Read{Path: "openwiki/a.md"})
	require.NoError(t, err)
	require.Equal(t, "alice\n", r.Content)

	// The daemon writes as root: an apply is refused where the caller
	// could not write itself (the repository is root's, 0755), and
	// allowed once it can.
	_, err = alice.Apply(ctx, s.ID, api.Apply{Approve: []string{fakeToken}})
	requireKind(t, err, api.KindRefused, 403)
	require.Contains(t, err.Error(), "uid 1001 (the caller) may not access it")
	_, err = alice.Apply(ctx, s.ID, api.Apply{Approve: []string{fakeToken}, DryRun: true})
	require.NoError(t, err, "a dry run writes nothing")
	require.NoError(t, os.Chown(e.repo, 1001, 1001))
	_, err = alice.Apply(ctx, s.ID, api.Apply{Approve: []string{fakeToken}})
	require.NoError(t, err)

	// A repository the caller cannot read is refused, checked as the
	// caller.
	private := filepath.Join(openDir(t), "private")
	require.NoError(t, os.Mkdir(private, 0o700))
	_, err = bob.CreateSession(ctx, api.CreateSession{Repo: private})
	requireKind(t, err, api.KindRefused, 403)
	require.Contains(t, err.Error(), "uid 1002 (the caller) may not access it")
	inside := filepath.Join(private, "repo")
	require.NoError(t, os.Mkdir(inside, 0o755))
	_, err = bob.CreateSession(ctx, api.CreateSession{Repo: inside})
	requireKind(t, err, api.KindRefused, 403)
	prof := filepath.Join(private, "p.yaml")
	require.NoError(t, os.WriteFile(prof, []byte("name: p\n"), 0o644))
	_, err = bob.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: prof})
	requireKind(t, err, api.KindRefused, 403)
	// The group's members may read it.
	require.NoError(t, os.Chown(private, 0, 2002))
	require.NoError(t, os.Chmod(private, 0o750))
	carol, _ := e.client("1004:1004:2002")
	_, err = carol.CreateSession(ctx, api.CreateSession{Repo: inside})
	require.NoError(t, err)
}

// TestBusyAfterQueueWait: over the cap a call waits for the queue wait,
// then gets 429 busy with a message naming the flags.
func TestBusyAfterQueueWait(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning, o.QueueWait = 1, 200*time.Millisecond })
	c, _ := e.client("")
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	sleepCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := c.Exec(sleepCtx, s.ID, []string{"sleep"}, nil, nil); done <- err }()
	require.Eventually(t, func() bool { return e.srv.lim.running() == 1 }, 5*time.Second, 10*time.Millisecond)

	start := time.Now()
	_, err = c.Exec(ctx, s.ID, []string{"echo"}, nil, nil)
	waited := time.Since(start)
	requireKind(t, err, api.KindBusy, 429)
	require.Contains(t, err.Error(), "--max-running")
	require.GreaterOrEqual(t, waited, 200*time.Millisecond)
	_, err = c.Read(ctx, s.ID, api.Read{Path: "x"})
	requireKind(t, err, api.KindBusy, 429)
	// Calls that run no container are not held back.
	_, err = c.Diff(ctx, s.ID)
	require.NoError(t, err)

	cancel()
	<-done
	require.Eventually(t, func() bool { return e.srv.lim.running() == 0 }, 5*time.Second, 10*time.Millisecond)
	_, err = c.Exec(ctx, s.ID, []string{"echo"}, nil, nil)
	require.NoError(t, err)
}

// TestStreamNeverWaitsForTheClient: a streamed call's output is queued
// per call, so the tool's side returns at once while the client has not
// read a byte; the client then gets every byte and the result.
func TestStreamNeverWaitsForTheClient(t *testing.T) {
	e := newEnv(t)
	c, _ := e.client("")
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)

	conn, err := net.Dial("unix", e.sock)
	require.NoError(t, err)
	defer conn.Close()
	body := fmt.Sprintf(`{"argv":["flood"],"stream":true}`)
	fmt.Fprintf(conn, "POST /v1/sessions/%s/exec HTTP/1.1\r\nHost: corral\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", s.ID, len(body), body)
	start := time.Now()
	select {
	case at := <-e.fake.execReturned:
		require.Less(t, at.Sub(start), 3*time.Second, "the tool's output must not wait for the client")
	case <-time.After(10 * time.Second):
		t.Fatal("the tool blocked on a client that does not read")
	}
	// Another session's call is served meanwhile.
	s2, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	_, err = c.Exec(ctx, s2.ID, []string{"echo", "x"}, nil, nil)
	require.NoError(t, err)
	<-e.fake.execReturned

	resp, err := http.ReadResponse(bufioReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, api.MediaNDJSON, resp.Header.Get("Content-Type"))
	all, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(all)), "\n")
	require.Contains(t, lines[len(lines)-1], `"result"`)
	var n int
	for _, l := range lines[:len(lines)-1] {
		n += strings.Count(l, "eHh4") // "xxx" in base64
	}
	require.Greater(t, n, 0)
}

// TestClientGoneCancelsTheCall: a client that goes away mid-call
// cancels it (the backend sees its context end), streamed or not.
func TestClientGoneCancelsTheCall(t *testing.T) {
	e := newEnv(t)
	c, _ := e.client("")
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	for _, stream := range []bool{false, true} {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			var w io.Writer
			if stream {
				w = io.Discard
			}
			_, err := c.Exec(cctx, s.ID, []string{"sleep"}, w, nil)
			done <- err
		}()
		require.Eventually(t, func() bool { return e.srv.lim.running() == 1 }, 5*time.Second, 10*time.Millisecond)
		cancel()
		select {
		case argv := <-e.fake.canceled:
			require.Equal(t, []string{"sleep"}, argv)
		case <-time.After(5 * time.Second):
			t.Fatalf("stream=%v: the call was not canceled when its client went away", stream)
		}
		require.ErrorIs(t, <-done, context.Canceled)
		<-e.fake.execReturned
		require.Eventually(t, func() bool { return e.srv.lim.running() == 0 }, 5*time.Second, 10*time.Millisecond)
	}
}

// TestRequestsAreStrict: unknown fields, trailing data, another content
// type, a body too large, an unknown route or method: all refused in the
// API's error form.
func TestRequestsAreStrict(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		method, path, ct, body string
		status                 int
		kind                   string
	}{
		{"POST", "/v1/sessions", "application/json", `{"repo":"/x","widen":true}`, 400, "invalid"},
		{"POST", "/v1/sessions", "application/json", `{"repo":"/x"} {}`, 400, "invalid"},
		{"POST", "/v1/sessions", "text/plain", `{"repo":"/x"}`, 400, "invalid"},
		{"POST", "/v1/sessions", "application/json", `{"repo":"` + strings.Repeat("a", maxBody) + `"}`, 400, "invalid"},
		{"GET", "/v1/nothing", "", "", 404, "not_found"},
		{"PUT", "/v1/version", "", "", 405, "method_not_allowed"},
		// An unclean path is refused before routing (TestUncleanPathsRefused).
		{"GET", "/v1/sessions/../../etc", "", "", 400, "invalid"},
		// A NUL byte in a host path is the caller's mistake, not corral's
		// failure.
		{"POST", "/v1/sessions", "application/json", `{"repo":"/tmp\u0000/x"}`, 400, "invalid"},
		{"POST", "/v1/sessions", "application/json", `{"repo":"/tmp","profile":"/tmp/p\u0000.yaml"}`, 400, "invalid"},
	} {
		status, body := e.raw(tc.method, tc.path, tc.ct, tc.body)
		require.Equal(t, tc.status, status, "%s %s: %s", tc.method, tc.path, clipS(body))
		require.Contains(t, body, `"kind":"`+tc.kind+`"`)
	}
}

func clipS(s string) string {
	if len(s) > 300 {
		return s[:300]
	}
	return s
}

// TestErrorKinds maps corral's errors to kinds and statuses.
func TestErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		err    error
		kind   string
		status int
	}{
		{&allowlist.Refusal{Kind: allowlist.KindCmd, Rule: "r"}, api.KindRefused, 403},
		{&review.RefusedError{}, api.KindRefused, 403},
		{&review.ConflictError{}, api.KindConflict, 409},
		{&changeset.RejectedError{}, api.KindRejected, 403},
		{&review.RollbackError{Err: errors.New("x")}, api.KindFailed, 500},
		{fmt.Errorf("x: %w", review.ErrNoApproval), api.KindRefused, 403},
		{fmt.Errorf("x: %w", errdefs.ErrInvalidArgument), api.KindInvalid, 400},
		{fmt.Errorf("x: %w", errdefs.ErrNotFound), api.KindNotFound, 404},
		{fmt.Errorf("x: %w", errdefs.ErrDataLoss), api.KindDataLoss, 410},
		{fmt.Errorf("x: %w", errdefs.ErrUnavailable), api.KindUnavailable, 503},
		{fmt.Errorf("x: %w", errdefs.ErrResourceExhausted), api.KindLimit, 422},
		{&ErrBusy{Cap: 1}, api.KindBusy, 429},
		{&FileFailure{Category: errdefs.ErrConflict}, api.KindConflict, 409},
		{errors.New("boom"), api.KindFailed, 500},
	} {
		e := apiError(tc.err)
		require.Equal(t, tc.kind, e.Kind, "%T", tc.err)
		require.Equal(t, tc.status, statusOf(e), "%T", tc.err)
		require.Equal(t, tc.err.Error(), e.Message)
	}
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// TestSessionsPerUIDCapped: one uid holds at most MaxSessionsPerUID
// sessions, however many requests it sends at once: the ones over are
// refused (422 limit, naming the flag) before anything is made; another
// uid and root are not held back by it; a removed session frees its
// place.
func TestSessionsPerUIDCapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a session as another uid checks the repository as that uid (setfsuid), which needs root")
	}
	e := newEnv(t, func(o *Options) { o.MaxSessionsPerUID = 3 })
	ctx := context.Background()
	alice, _ := e.client("1001:1001")
	bob, _ := e.client("1002:1002")
	root, _ := e.client("0:0")

	const n = 12
	errs := make(chan error, n)
	ids := make(chan string, n)
	for range n {
		go func() {
			s, err := alice.CreateSession(ctx, api.CreateSession{Repo: e.repo})
			if err == nil {
				ids <- s.ID
			}
			errs <- err
		}()
	}
	var refused int
	for range n {
		if err := <-errs; err != nil {
			requireKind(t, err, api.KindLimit, 422)
			require.Equal(t, "sessions of uid 1001: 3 already, the daemon's --max-sessions-per-uid; remove one first", err.Error())
			refused++
		}
	}
	require.Equal(t, n-3, refused)
	list, err := alice.Sessions(ctx)
	require.NoError(t, err)
	require.Len(t, list, 3)
	all, err := root.Sessions(ctx)
	require.NoError(t, err)
	require.Len(t, all, 3, "a refused creation makes nothing")

	_, err = bob.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err, "another uid has its own places")
	for range 4 {
		_, err = root.CreateSession(ctx, api.CreateSession{Repo: e.repo})
		require.NoError(t, err, "root is not capped")
	}
	_, err = alice.RemoveSession(ctx, <-ids)
	require.NoError(t, err)
	_, err = alice.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err, "a removed session frees its place")
}

// TestUncleanPathsRefused: a request path in any spelling but its
// canonical one is refused before routing, 400 invalid naming what is
// wrong with it — never cleaned and served (as a redirect or as the route
// it cleans to) nor answered as a missing route. Before, "/v1/./sessions"
// and "/v1//sessions" were answered as routes the mux cleaned them to.
func TestUncleanPathsRefused(t *testing.T) {
	e := newEnv(t)
	c, _ := e.client("")
	s, err := c.CreateSession(context.Background(), api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	for _, tc := range []struct{ path, why string }{
		{"/v1//sessions", `an empty segment ("//")`},
		{"//v1/sessions", `an empty segment ("//")`},
		{"/v1/./sessions", `a "." segment`},
		{"/v1/sessions/../sessions", `a ".." segment`},
		{"/v1/sessions/../x", `a ".." segment`},
		{"/v1/sessions/" + s.ID + "/./diff", `a "." segment`},
		{"/v1/sessions/", `a trailing "/"`},
		{"/v1/version/", `a trailing "/"`},
		{"/v1/sessions/%2e%2e/x", `percent-encodes`},
		{"/v1/sessions/" + s.ID + "%2Fdiff", `percent-encodes`},
		{"/v1/sessions/" + s.ID + "/files%3Aread", `percent-encodes`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			conn, err := net.Dial("unix", e.sock)
			require.NoError(t, err)
			defer conn.Close()
			_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: corral\r\nConnection: close\r\n\r\n", tc.path)
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
			require.Equal(t, api.MediaJSON, resp.Header.Get("Content-Type"))
			require.Contains(t, string(body), `"kind":"invalid"`)
			require.Contains(t, string(body), "not canonical: "+strings.ReplaceAll(tc.why, `"`, `\"`))
		})
	}
	// The canonical spellings are served.
	for _, p := range []string{"/v1/version", "/v1/sessions", "/v1/sessions/" + s.ID + "/diff"} {
		status, body := e.raw("GET", p, "", "")
		require.Equal(t, http.StatusOK, status, p+": "+body)
	}
}

// TestUnreadAnswerFreesItsSlot: a client that never reads the answer of
// a non-streamed call does not hold the call's slot while the daemon
// writes to it: with one slot, the next call runs at once. Before, the
// slot was released only after the answer was written, up to the 60 s
// write deadline later, and the next call waited out the queue (429).
func TestUnreadAnswerFreesItsSlot(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning = 1; o.QueueWait = 500 * time.Millisecond })
	c, _ := e.client("")
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	big := strings.Repeat("y", 4<<20)
	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/big.md", Content: big})
	require.NoError(t, err)
	for _, tc := range []struct{ path, body string }{
		// 4 MiB of stdout, ~5.6 MiB of JSON: far above a unix socket's
		// buffers.
		{"/v1/sessions/" + s.ID + "/exec", `{"argv":["flood"]}`},
		{"/v1/sessions/" + s.ID + "/files:read", `{"path":"openwiki/big.md"}`},
	} {
		conn, err := net.Dial("unix", e.sock)
		require.NoError(t, err)
		defer conn.Close()
		_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: corral\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", tc.path, len(tc.body), tc.body)
		require.NoError(t, err)
		if strings.HasSuffix(tc.path, "/exec") {
			select {
			case <-e.fake.execReturned:
			case <-time.After(10 * time.Second):
				t.Fatal("the call did not run")
			}
		} else {
			time.Sleep(200 * time.Millisecond) // the read is done at once
		}
		// The answer is being written to a client that reads nothing.
		require.Eventually(t, func() bool { return e.srv.lim.running() == 0 }, 5*time.Second, 10*time.Millisecond,
			"the slot is held while the answer waits for its reader")
		res, err := c.Exec(ctx, s.ID, []string{"echo", "next"}, nil, nil)
		require.NoError(t, err)
		require.Equal(t, "next\n", string(res.Stdout))
	}
}

// TestCreateKilledAtEveryStep: a daemon killed at any step of a
// session's creation — its owner record written pending, the session
// made, the record committed — leaves nothing its creator cannot see or
// remove: after the next start (ForgetMissing) a creation stopped before
// its commit is undone (the session removed, nothing kept; the record
// gone), and a committed one is its creator's, listed to it and
// removable by it. Before, a kill between making the session and writing
// its owner record left a session owned by root until its idle TTL.
func TestCreateKilledAtEveryStep(t *testing.T) {
	for _, step := range []string{createPending, createMade, createCommitted} {
		t.Run(step, func(t *testing.T) {
			var opts Options
			e := newEnv(t, func(o *Options) { opts = *o })
			ctx := context.Background()
			killed := errors.New("killed")
			e.srv.createHook = func(at string) error {
				if at == step {
					return killed
				}
				return nil
			}
			a, _ := e.client("1000:1000")
			_, err := a.CreateSession(ctx, api.CreateSession{Repo: e.repo})
			require.Error(t, err)
			records, err := filepath.Glob(filepath.Join(opts.StateDir, "daemon", "sessions", "*.json"))
			require.NoError(t, err)
			require.Len(t, records, 1, "the owner record is written first")
			id := strings.TrimSuffix(filepath.Base(records[0]), ".json")

			// The next daemon, on the same state directory.
			srv, err := NewServer(e.fake, opts)
			require.NoError(t, err)
			require.NoError(t, srv.ForgetMissing(ctx))
			all, err := e.fake.Sessions(ctx)
			require.NoError(t, err)
			if step != createCommitted {
				require.Empty(t, all, "an unfinished creation is undone")
				require.NoFileExists(t, records[0])
				require.Equal(t, 0, srv.owners.count(func(ownerRecord) bool { return true }))
				return
			}
			require.Len(t, all, 1)
			require.Equal(t, id, all[0].ID)
			rec := srv.owners.get(id)
			require.Equal(t, 1000, rec.UID)
			require.False(t, rec.Pending)
			require.True(t, srv.visible(Peer{UID: 1000, GID: 1000}, rec))
			require.False(t, srv.visible(Peer{UID: 1001, GID: 1001}, rec))
		})
	}
	// A creation that fails (not a kill) leaves no record either.
	var opts Options
	e := newEnv(t, func(o *Options) { opts = *o })
	a, _ := e.client("1000:1000")
	_, err := a.CreateSession(context.Background(), api.CreateSession{Repo: e.repo, Profile: "missing"})
	require.Error(t, err)
	records, err := filepath.Glob(filepath.Join(opts.StateDir, "daemon", "sessions", "*"))
	require.NoError(t, err)
	require.Empty(t, records)
}

// TestRecordsOfSweptSessionsForgotten: a session removed behind the
// server's back (the sandbox's own sweep of an expired session, the CLI)
// loses its owner record at the next forgetRemoved (the prune timer's),
// while a creation in flight (its record pending) keeps its own.
func TestRecordsOfSweptSessionsForgotten(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, _ := e.client("1000:1000")
	s, err := a.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	_, err = e.fake.Remove(ctx, s.ID, true) // the sandbox's sweep
	require.NoError(t, err)
	require.NoError(t, e.srv.owners.add("0123456789ab", ownerRecord{UID: 1000, GID: 1000, Pending: true}))
	require.NoError(t, e.srv.forgetRemoved(ctx))
	require.Equal(t, []string{"0123456789ab"}, e.srv.owners.pending())
	require.Empty(t, e.srv.owners.committed())
}
