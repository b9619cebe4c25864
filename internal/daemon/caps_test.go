package daemon

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	go hs.Serve(limitConns(l, 2))
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
	_, err = c.Version(ctx)
	requireKind(t, err, api.KindUnavailable, http.StatusServiceUnavailable)
	require.Equal(t, "too many connections: 2 are open (the daemon's --max-connections); retry later", err.Error())

	held[0].Close()
	require.Eventually(t, func() bool {
		_, err := c.Version(ctx)
		return err == nil
	}, 5*time.Second, 20*time.Millisecond, "a closed connection frees its place")
	held[1].Close()
}

// TestMemoryQueueIsStrict: a call that would fit waits behind an earlier
// one that does not (a large call is never starved by small ones), and
// runs after it; the busy error of such a call says why it waited.
func TestMemoryQueueIsStrict(t *testing.T) {
	l := newLimiter(4, 1<<30, 10*time.Second)
	ctx := context.Background()
	release, err := l.acquire(ctx, "big", 768<<20)
	require.NoError(t, err)
	bigDone := make(chan func(), 1)
	go func() {
		r, err := l.acquire(ctx, "big", 768<<20)
		assert.NoError(t, err)
		bigDone <- r
	}()
	require.Eventually(t, func() bool { _, w, _ := l.state(); return w == 1 }, 5*time.Second, 5*time.Millisecond)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = l.acquire(short, "small", 128<<20)
	require.ErrorIs(t, err, context.DeadlineExceeded, "128MiB would fit, but a call queued before it does not")

	smallDone := make(chan func(), 1)
	go func() {
		r, err := l.acquire(ctx, "small", 128<<20)
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
	_, err = l.acquire(ctx, "huge", 2<<30)
	require.EqualError(t, err, `profile "huge": its memory limit of 2GiB per call is above the daemon's --max-memory 1GiB; use a profile with a smaller resources.memory`)
	require.True(t, errdefs.IsResourceExhausted(err))
	running, waiting, memory = l.state()
	require.Equal(t, [3]int64{0, 0, 0}, [3]int64{int64(running), int64(waiting), memory})
}
