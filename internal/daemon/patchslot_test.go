package daemon

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// TestPatchStreamedUnderASlot: GET .../diff?format=patch streams the
// patch one file at a time — the client reads the first file's patch
// while the backend has not rendered the next — and holds a slot of the
// call cap until the answer is written: with --max-running 1 another
// call waits and gets 429 busy. Before, the handler built the whole
// patch in memory and took no slot, so a client could make the daemon
// hold as many patches as it sent requests.
func TestPatchStreamedUnderASlot(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning, o.QueueWait = 1, 200*time.Millisecond })
	c, _ := e.client("")
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	big := strings.Repeat("a", 256<<10) // past the server's write buffer
	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: big})
	require.NoError(t, err)
	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/b.md", Content: "b\n"})
	require.NoError(t, err)
	gate := make(chan struct{})
	e.fake.mu.Lock()
	e.fake.patchGate = gate
	e.fake.mu.Unlock()

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", e.sock)
	}}}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://corral/v1/sessions/"+s.ID+"/diff?format=patch", nil)
	require.NoError(t, err)
	resp, err := hc.Do(req)
	require.NoError(t, err, "the answer starts before the patch is rendered whole")
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, api.MediaPatch, resp.Header.Get("Content-Type"))
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "diff --git a/openwiki/a.md b/openwiki/a.md\n", first)

	require.Equal(t, 1, e.srv.lim.running(), "the patch holds a call slot while it is written")
	_, err = c.Exec(ctx, s.ID, []string{"echo", "hi"}, nil, nil)
	requireKind(t, err, api.KindBusy, 429)

	close(gate)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	require.Contains(t, string(rest), "diff --git a/openwiki/b.md b/openwiki/b.md\n")
	require.Eventually(t, func() bool { return e.srv.lim.running() == 0 }, 5*time.Second, 10*time.Millisecond)
	res, err := c.Exec(ctx, s.ID, []string{"echo", "hi"}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, "hi\n", string(res.Stdout))

	// A refusal is still answered in the API's error form (nothing was
	// written before it).
	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/.openwikiignore", Content: "x\n"})
	require.NoError(t, err)
	_, err = c.Patch(ctx, s.ID)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "diff --git")
}

// TestKeptPatchSizingTakesASlot: the sizing a DELETE without discard
// does against --max-kept-patch-bytes renders the change set, so it
// takes a call slot: with --max-running 1 held by a running call, the
// DELETE waits and gets 429 busy, removing nothing; once the slot is
// free it goes through. Before, the sizing took no slot.
func TestKeptPatchSizingTakesASlot(t *testing.T) {
	root := kubeletRoot(t)
	var state string
	e := newEnv(t, func(o *Options) {
		o.KubeletRoot = root
		state = o.StateDir
		o.MaxKeptPatchBytes = 1 << 20
		o.MaxRunning, o.QueueWait = 1, 200*time.Millisecond
	})
	e.fake.patchDir = state + "/patches"
	ctx := context.Background()
	a, _ := e.client("1000:1000::" + podA)
	s, err := a.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "work", SubPath: "repo"}})
	require.NoError(t, err)
	_, err = a.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: "a\n"})
	require.NoError(t, err)
	sleepCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := a.Exec(sleepCtx, s.ID, []string{"sleep"}, nil, nil); done <- err }()
	require.Eventually(t, func() bool { return e.srv.lim.running() == 1 }, 5*time.Second, 10*time.Millisecond)

	_, err = a.RemoveSession(ctx, s.ID)
	requireKind(t, err, api.KindBusy, 429)
	list, err := a.Sessions(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1, "a DELETE refused busy removes nothing")

	cancel()
	<-done
	require.Eventually(t, func() bool { return e.srv.lim.running() == 0 }, 5*time.Second, 10*time.Millisecond)
	rm, err := a.RemoveSession(ctx, s.ID)
	require.NoError(t, err)
	require.NotEmpty(t, rm.Patch)
	require.Zero(t, e.srv.lim.running())
}
