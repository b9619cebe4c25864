package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionsNodeCapped: the daemon holds at most MaxSessions sessions,
// every owner's together and root's included, however many requests
// arrive at once: the ones over are refused (422 limit, naming the flag
// and the figure) before anything is made; a removed session frees its
// place.
func TestSessionsNodeCapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a session as another uid checks the repository as that uid (setfsuid), which needs root")
	}
	e := newEnv(t, func(o *Options) { o.MaxSessions, o.MaxRunning = 3, 16 })
	ctx := context.Background()
	peers := []string{"1001:1001", "1002:1002", "0:0"}
	const n = 12
	errs := make(chan error, n)
	ids := make(chan string, n)
	for i := range n {
		c, _ := e.client(peers[i%len(peers)])
		go func() {
			s, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
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
			require.Equal(t, "sessions of this host: 3 already, the daemon's --max-sessions; remove one first", err.Error())
			refused++
		}
	}
	require.Equal(t, n-3, refused)
	root, _ := e.client("0:0")
	all, err := root.Sessions(ctx)
	require.NoError(t, err)
	require.Len(t, all, 3, "a refused creation makes nothing")
	_, err = root.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	requireKind(t, err, api.KindLimit, 422)

	_, err = root.RemoveSession(ctx, <-ids)
	require.NoError(t, err)
	_, err = root.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err, "a removed session frees its place")
}

// TestSessionsPerPodCapped: in Pod mode MaxSessionsPerUID counts the
// sessions of each Pod, not of a uid: two Pods whose processes run as the
// same uid each have their own places, and a Pod running as root is
// capped like any other.
func TestSessionsPerPodCapped(t *testing.T) {
	root := kubeletRoot(t)
	e := newEnv(t, func(o *Options) { o.KubeletRoot, o.MaxSessionsPerUID = root, 2 })
	ctx := context.Background()
	for _, uid := range []string{"1000:1000", "0:0"} {
		t.Run(uid, func(t *testing.T) {
			a, _ := e.client(uid + "::" + podA)
			b, _ := e.client(uid + "::" + podB)
			var ids []string
			for range 2 {
				s, err := a.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "work"}})
				require.NoError(t, err)
				ids = append(ids, s.ID)
			}
			_, err := a.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "work"}})
			requireKind(t, err, api.KindLimit, 422)
			require.Equal(t, "sessions of pod:"+podA+": 2 already, the daemon's --max-sessions-per-uid; remove one first", err.Error())
			s, err := b.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "other"}})
			require.NoError(t, err, "another Pod of the same uid has its own places")
			for _, id := range append(ids, s.ID) {
				_, err := e.srv.removeSession(ctx, id, true, endByDelete)
				require.NoError(t, err)
			}
		})
	}
}

// TestRunningPerPodCapped: in Pod mode --max-running-per-uid counts the
// calls of each Pod: two Pods whose processes run as the same uid each
// have their own, and a Pod at its cap gets 429 naming it while another
// Pod's call runs.
func TestRunningPerPodCapped(t *testing.T) {
	root := kubeletRoot(t)
	e := newEnv(t, func(o *Options) {
		o.KubeletRoot, o.MaxRunning, o.MaxRunningPerUID, o.QueueWait = root, 4, 1, 300*time.Millisecond
	})
	ctx := context.Background()
	a, _ := e.client("1000:1000::" + podA)
	b, _ := e.client("1000:1000::" + podB)
	sa, err := a.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "work"}})
	require.NoError(t, err)
	sb, err := b.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "other"}})
	require.NoError(t, err)
	sleepCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := a.Exec(sleepCtx, sa.ID, []string{"sleep"}, nil, nil); done <- err }()
	require.Eventually(t, func() bool { return e.srv.lim.running() == 1 }, 5*time.Second, 10*time.Millisecond)

	_, err = a.Exec(ctx, sa.ID, []string{"echo", "a"}, nil, nil)
	requireKind(t, err, api.KindBusy, 429)
	require.Equal(t, "busy: pod:"+podA+" runs 1 calls already (the daemon's --max-running-per-uid) and none ended within 300ms (--queue-wait); retry later", err.Error())
	res, err := b.Exec(ctx, sb.ID, []string{"echo", "b"}, nil, nil)
	require.NoError(t, err, "another Pod of the same uid runs its own calls")
	require.Equal(t, "b\n", string(res.Stdout))
	cancel()
	<-done
}

// TestMemoryCapQueues: calls reserve their profile's memory limit; one
// that would pass MaxMemory waits in the queue of MaxRunning (a free call
// slot is not enough) and runs once memory frees, without failing; past
// the queue wait it fails busy naming the cap and the figures; calls
// whose limits fit together run together.
func TestMemoryCapQueues(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning, o.MaxMemory, o.QueueWait = 4, 1<<30, 300*time.Millisecond })
	c, _ := e.client("")
	ctx := context.Background()
	big, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "mem-768MiB"})
	require.NoError(t, err)
	small, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "mem-256MiB"})
	require.NoError(t, err)

	sleepCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := c.Exec(sleepCtx, big.ID, []string{"sleep"}, nil, nil); done <- err }()
	require.Eventually(t, func() bool { return e.srv.lim.running() == 1 }, 5*time.Second, 10*time.Millisecond)

	h, err := c.Health(ctx)
	require.NoError(t, err)
	require.Equal(t, api.CallsState{Running: 1, Cap: 4, Memory: 768 << 20, MemoryCap: 1 << 30}, h.Calls)

	// 768MiB + 256MiB fit in 1GiB: it runs at once.
	_, err = c.Exec(ctx, small.ID, []string{"echo"}, nil, nil)
	require.NoError(t, err)

	// 768MiB + 768MiB do not: it waits the queue wait, then is busy.
	start := time.Now()
	_, err = c.Exec(ctx, big.ID, []string{"echo"}, nil, nil)
	requireKind(t, err, api.KindBusy, 429)
	require.Equal(t, "busy: running calls hold 768MiB of the daemon's --max-memory 1GiB and this call needs 768MiB (its profile's memory limit); not enough freed within 300ms (--queue-wait); retry later", err.Error())
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	_, err = c.Read(ctx, big.ID, api.Read{Path: "x"})
	requireKind(t, err, api.KindBusy, 429)

	// Once the first call ends, a waiting one runs.
	waited := make(chan error, 1)
	go func() { _, err := c.Exec(ctx, big.ID, []string{"echo"}, nil, nil); waited <- err }()
	require.Eventually(t, func() bool { _, w, _ := e.srv.lim.state(); return w == 1 }, 5*time.Second, 5*time.Millisecond)
	cancel()
	<-done
	require.NoError(t, <-waited)
	require.Eventually(t, func() bool { r, w, m := e.srv.lim.state(); return r == 0 && w == 0 && m == 0 }, 5*time.Second, 10*time.Millisecond)
}

// TestProfileOverMemoryCap: a profile whose memory limit per call alone
// is above MaxMemory is refused at session creation (422 naming both
// figures), and nothing is made.
func TestProfileOverMemoryCap(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxMemory = 1 << 30 })
	c, _ := e.client("")
	ctx := context.Background()
	_, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "mem-2GiB"})
	requireKind(t, err, api.KindLimit, 422)
	require.Equal(t, `profile "mem-2GiB": its memory limit of 2GiB per call is above the daemon's --max-memory 1GiB; use a profile with a smaller resources.memory`, err.Error())
	list, err := c.Sessions(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
	_, err = c.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "mem-1GiB"})
	require.NoError(t, err, "a limit equal to the cap fits")
}

// TestCreationTakesACallSlot: creating a session mounts and starts
// containers, so it waits for a slot of MaxRunning like a call, and gets
// 429 busy past the queue wait.
func TestCreationTakesACallSlot(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning, o.QueueWait = 1, 200*time.Millisecond })
	c, _ := e.client("")
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	sleepCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := c.Exec(sleepCtx, s.ID, []string{"sleep"}, nil, nil); done <- err }()
	require.Eventually(t, func() bool { return e.srv.lim.running() == 1 }, 5*time.Second, 10*time.Millisecond)

	_, err = c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	requireKind(t, err, api.KindBusy, 429)
	require.Contains(t, err.Error(), "--max-running")
	list, err := c.Sessions(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1, "a creation refused busy makes nothing")

	cancel()
	<-done
	require.Eventually(t, func() bool { return e.srv.lim.running() == 0 }, 5*time.Second, 10*time.Millisecond)
	_, err = c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	require.Zero(t, e.srv.lim.running(), "the creation's slot is released")
}

// TestCreationPanicGivesItsSlotBack: a backend that panics while creating
// a session (net/http recovers the handler's panic and drops the
// connection) gives back the creation's call slot and its count against
// the session caps; before, the slot stayed taken for the daemon's life,
// and --max-running panics locked every call out.
func TestCreationPanicGivesItsSlotBack(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning, o.QueueWait, o.MaxSessions = 1, 200*time.Millisecond, 1 })
	c, _ := e.client("")
	ctx := context.Background()
	_, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "panic"})
	require.Error(t, err)
	require.Zero(t, e.srv.lim.running(), "the slot is given back")
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err, "the next creation gets the slot and the session cap's place")
	res, err := c.Exec(ctx, s.ID, []string{"echo", "hi"}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, "hi\n", string(res.Stdout))
}

// TestCreationFailingAfterTheSessionIsMadeUndoesIt: a creation that
// panics or fails after the backend made the session — inside Create,
// or in the server between Create and the commit — leaves nothing: the
// client got an error, so the session is removed (nothing kept) and its
// pending owner record goes. Before, a panic dropped the pending record
// and left the session, root's until its idle TTL.
func TestCreationFailingAfterTheSessionIsMadeUndoesIt(t *testing.T) {
	var panicked atomic.Bool // the hook panics once
	for _, tc := range []struct {
		name, profile string
		hook          func(string) error
	}{
		{name: "panic in Create", profile: "panic-after-made"},
		{name: "error in Create", profile: "fail-after-made"},
		{name: "panic after Create", hook: func(step string) error {
			if step == createMade && !panicked.Swap(true) {
				panic("the server panicked after the session was made")
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts Options
			e := newEnv(t, func(o *Options) { o.MaxRunning, o.QueueWait, o.MaxSessions = 1, 200*time.Millisecond, 1; opts = *o })
			e.srv.createHook = tc.hook
			c, _ := e.client("1000:1000")
			ctx := context.Background()
			_, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: tc.profile})
			require.Error(t, err)
			all, err := e.fake.Sessions(ctx)
			require.NoError(t, err)
			require.Empty(t, all, "the session made is removed")
			records, err := filepath.Glob(filepath.Join(opts.StateDir, "daemon", "sessions", "*"))
			require.NoError(t, err)
			require.Empty(t, records, "and its owner record")
			require.Zero(t, e.srv.lim.running(), "the slot is given back")
			_, err = c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
			require.NoError(t, err, "the session cap's place is given back")
		})
	}
}

// TestConnectionCap: past max connections open at once a new connection
// is answered 503 (kind unavailable, naming the flag) and closed; one
// closed frees its place.
func TestConnectionCap(t *testing.T) {
	srv, err := NewServer(newFake(), Options{Version: "test", AdminGID: -1, MaxRunning: 4, QueueWait: time.Second, StateDir: t.TempDir()})
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "corral-daemon-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	hs := &http.Server{Handler: srv, ConnContext: srv.ConnContext}
	go hs.Serve(limitConns(l, 2, 0, nil))
	t.Cleanup(func() { hs.Close() })
	ctx := context.Background()

	var held []net.Conn
	for range 2 {
		c, err := net.Dial("unix", sock)
		require.NoError(t, err)
		held = append(held, c)
	}
	c := client.New(sock)
	defer c.Close()
	// Every time: the answer is written once the request has come, never
	// before it (Go's client drops an answer that comes before its
	// request as unsolicited, and fails with no message).
	for range 200 {
		c := client.New(sock)
		_, err = c.Version(ctx)
		c.Close()
		requireKind(t, err, api.KindUnavailable, http.StatusServiceUnavailable)
		require.Equal(t, "too many connections: 2 are open (the daemon's --max-connections); retry later", err.Error())
	}

	held[0].Close()
	require.Eventually(t, func() bool {
		_, err := c.Version(ctx)
		return err == nil
	}, 5*time.Second, 20*time.Millisecond, "a closed connection frees its place")
	held[1].Close()
}

// TestConnectionCapPerOwner: one owner (here named by the path its
// client socket is bound to) holds at most --max-connections-per-uid
// connections; its next is answered 503 naming the owner and the flag,
// while another owner and an admin (capped false) still connect — so
// that one uid's idle keep-alive connections cannot lock every other
// caller out, as they could with the host-wide cap alone. Closing one
// frees its owner's place.
func TestConnectionCapPerOwner(t *testing.T) {
	srv, err := NewServer(newFake(), Options{Version: "test", AdminGID: -1, MaxRunning: 4, QueueWait: time.Second, StateDir: t.TempDir()})
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "corral-daemon-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	ownerOf := func(c net.Conn) (Peer, bool, string, bool) {
		name := filepath.Base(c.RemoteAddr().String())
		owner, _, _ := strings.Cut(name, "-")
		return Peer{UID: 0, PID: 1}, true, owner, owner != "admin"
	}
	hs := &http.Server{Handler: srv, ConnContext: srv.ConnContext}
	go hs.Serve(limitConns(l, 10, 2, ownerOf))
	t.Cleanup(func() { hs.Close() })

	n := 0
	dial := func(owner string) net.Conn {
		n++
		laddr := &net.UnixAddr{Name: filepath.Join(dir, fmt.Sprintf("%s-%d", owner, n)), Net: "unix"}
		c, err := net.DialUnix("unix", laddr, &net.UnixAddr{Name: sock, Net: "unix"})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	// get sends GET /v1/version on c and returns the status and body.
	get := func(c net.Conn) (int, string) {
		_, err := io.WriteString(c, "GET /v1/version HTTP/1.1\r\nHost: corral\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	hostile := []net.Conn{dial("hostile"), dial("hostile")}
	for _, c := range hostile {
		status, _ := get(c)
		require.Equal(t, http.StatusOK, status, "kept alive, idle")
	}
	status, body := get(dial("hostile"))
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.JSONEq(t, `{"error":{"kind":"unavailable","message":"too many connections of hostile: 2 are open (the daemon's --max-connections-per-uid); retry later"}}`, body)
	for _, owner := range []string{"victim", "admin", "admin", "admin"} {
		status, _ := get(dial(owner))
		require.Equal(t, http.StatusOK, status, "%s is not locked out by another owner's connections", owner)
	}

	hostile[0].Close()
	require.Eventually(t, func() bool {
		status, _ := get(dial("hostile"))
		return status == http.StatusOK
	}, 5*time.Second, 20*time.Millisecond, "a closed connection frees its owner's place")
}

// TestMemoryQueueIsStrict: a call that would fit waits behind an earlier
// one that does not (a large call is never starved by small ones), and
// runs after it; the busy error of such a call says why it waited.
func TestMemoryQueueIsStrict(t *testing.T) {
	l := newLimiter(4, 1<<30, 10*time.Second, 0)
	ctx := context.Background()
	release, err := l.acquire(ctx, "uid 1000", true, "big", 768<<20)
	require.NoError(t, err)
	bigDone := make(chan func(), 1)
	go func() {
		r, err := l.acquire(ctx, "uid 1000", true, "big", 768<<20)
		assert.NoError(t, err)
		bigDone <- r
	}()
	require.Eventually(t, func() bool { _, w, _ := l.state(); return w == 1 }, 5*time.Second, 5*time.Millisecond)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = l.acquire(short, "uid 1000", true, "small", 128<<20)
	require.ErrorIs(t, err, context.DeadlineExceeded, "128MiB would fit, but a call queued before it does not")

	smallDone := make(chan func(), 1)
	go func() {
		r, err := l.acquire(ctx, "uid 1000", true, "small", 128<<20)
		assert.NoError(t, err)
		smallDone <- r
	}()
	require.Eventually(t, func() bool { _, w, _ := l.state(); return w == 2 }, 5*time.Second, 5*time.Millisecond)
	release()
	releaseBig, releaseSmall := <-bigDone, <-smallDone
	running, waiting, memory := l.state()
	require.Equal(t, [3]int64{2, 0, 896 << 20}, [3]int64{int64(running), int64(waiting), memory}, "once the first left, both fit")
	releaseBig()
	releaseSmall()

	require.EqualError(t, &ErrBusy{Cap: 4, Wait: time.Second, MemoryCap: 1 << 30, Memory: 768 << 20, Need: 128 << 20},
		"busy: running calls hold 768MiB of the daemon's --max-memory 1GiB and a call queued before this one (128MiB) needs more than is free; not enough freed within 1s (--queue-wait); retry later")
	_, err = l.acquire(ctx, "uid 1000", true, "huge", 2<<30)
	require.EqualError(t, err, `profile "huge": its memory limit of 2GiB per call is above the daemon's --max-memory 1GiB; use a profile with a smaller resources.memory`)
	require.True(t, errdefs.IsResourceExhausted(err))
	running, waiting, memory = l.state()
	require.Equal(t, [3]int64{0, 0, 0}, [3]int64{int64(running), int64(waiting), memory})
}

// TestQueueFairBetweenOwners: with one slot held by owner A and 5 more
// of A's calls queued, a call of owner B queued after them all starts at
// the next release (B runs fewer calls), not behind A's queue; A's own
// calls still start in the order they came. With a strict FIFO, B waited
// for all of A's calls and, past the queue wait, got 429 busy.
func TestQueueFairBetweenOwners(t *testing.T) {
	l := newLimiter(1, 0, 10*time.Second, 0)
	ctx := context.Background()
	first, err := l.acquire(ctx, "uid 1000", true, "", 0)
	require.NoError(t, err)
	started := make(chan string, 7)
	releases := make(chan func(), 7)
	call := func(owner, name string) {
		r, err := l.acquire(ctx, owner, true, "", 0)
		assert.NoError(t, err)
		started <- name
		releases <- r
	}
	for i := range 5 {
		go call("uid 1000", fmt.Sprintf("A%d", i))
		require.Eventually(t, func() bool { _, w, _ := l.state(); return w == i+1 }, 5*time.Second, time.Millisecond)
	}
	go call("uid 1001", "B")
	require.Eventually(t, func() bool { _, w, _ := l.state(); return w == 6 }, 5*time.Second, time.Millisecond)

	first()
	var order []string
	for range 6 {
		order = append(order, <-started)
		(<-releases)()
	}
	require.Equal(t, []string{"B", "A0", "A1", "A2", "A3", "A4"}, order)
	running, waiting, _ := l.state()
	require.Equal(t, [2]int{0, 0}, [2]int{running, waiting})
	require.Empty(t, l.byOwner, "every owner's count went back to zero")
	require.Empty(t, l.started, "nothing kept of an owner that neither runs nor queues a call")
}

// TestRunningCapPerOwner: with 4 slots and --max-running-per-uid 2, an
// owner running 2 calls waits for one of its own to end, even with slots
// free, and past the queue wait gets 429 naming it and the flag; its
// waiting call holds no one else back (another owner's calls start), an
// admin's calls (not capped) are held by the host-wide cap alone, and one
// of its own ending lets its next start. Without it, one owner's calls
// of a long timeout held every slot.
func TestRunningCapPerOwner(t *testing.T) {
	l := newLimiter(4, 0, time.Second, 2)
	ctx := context.Background()
	a1, err := l.acquire(ctx, "uid 1000", true, "", 0)
	require.NoError(t, err)
	a2, err := l.acquire(ctx, "uid 1000", true, "", 0)
	require.NoError(t, err)
	_, err = l.acquire(ctx, "uid 1000", true, "", 0)
	require.EqualError(t, err, "busy: uid 1000 runs 2 calls already (the daemon's --max-running-per-uid) and none ended within 1s (--queue-wait); retry later")
	requireBusy := func(err error) { require.True(t, errdefs.IsResourceExhausted(err), "%v", err) }
	requireBusy(err)

	a3 := make(chan func(), 1)
	go func() {
		r, err := l.acquire(ctx, "uid 1000", true, "", 0)
		if err == nil {
			a3 <- r
		}
		close(a3)
	}()
	require.Eventually(t, func() bool { _, w, _ := l.state(); return w == 1 }, 5*time.Second, time.Millisecond)
	b1, err := l.acquire(ctx, "uid 1001", true, "", 0)
	require.NoError(t, err, "another owner's call passes the capped owner's waiting one")
	root, err := l.acquire(ctx, "uid 0", false, "", 0)
	require.NoError(t, err, "an admin is held by the host-wide cap alone")
	a1()
	r, ok := <-a3
	require.True(t, ok, "one of its own ended: its next starts")
	for _, f := range []func(){r, a2, b1, root} {
		f()
	}
	running, waiting, _ := l.state()
	require.Equal(t, [2]int{0, 0}, [2]int{running, waiting})
}

// TestCreateNamesWarmOwner: a creation names its owner's key, under which
// the session's containers created ahead share --max-warm (a uid's; in
// Pod mode the Pod's, whatever uid it ran as; none for root outside Pod
// mode), so that one owner's sessions cannot take another's bursts.
func TestCreateNamesWarmOwner(t *testing.T) {
	ctx := context.Background()
	warmOwner := func(f *fakeBackend, id string) string {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.sessions[id].warmOwner
	}
	t.Run("uids", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("creating a session as another uid checks the repository as that uid (setfsuid), which needs root")
		}
		e := newEnv(t)
		for peer, want := range map[string]string{"1000:1000": "uid:1000", "0:0": ""} {
			c, _ := e.client(peer)
			s, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
			require.NoError(t, err)
			require.Equal(t, want, warmOwner(e.fake, s.ID), peer)
			require.Equal(t, want, e.srv.warmOwnerOf(s.ID), "as Adopt is told")
		}
	})
	t.Run("pods", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.KubeletRoot = kubeletRoot(t) })
		for _, tc := range []struct{ peer, volume, want string }{
			{"1000:1000::" + podA, "work", "pod:" + podA},
			{"0:0::" + podB, "other", "pod:" + podB},
		} {
			c, _ := e.client(tc.peer)
			s, err := c.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: tc.volume}})
			require.NoError(t, err)
			require.Equal(t, tc.want, warmOwner(e.fake, s.ID), tc.peer)
			require.Equal(t, tc.want, e.srv.warmOwnerOf(s.ID), "as Adopt is told")
		}
	})
}
