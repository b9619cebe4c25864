package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/daemon"
	"github.com/corral-sandbox/corral/internal/testhook"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/client"
	"github.com/stretchr/testify/require"
)

// inProcessDaemon serves a daemon's API from this test binary (so a test
// can reach its testhook points) on a socket every uid may connect to;
// it returns the socket and the backend.
func inProcessDaemon(t *testing.T) (sock string, b daemon.Backend) {
	t.Helper()
	state, sock := daemonDirs(t)
	b, _ = inProcessDaemonOn(t, state, sock)
	return sock, b
}

// inProcessDaemonOn is inProcessDaemon on state and sock; stop ends it
// as a stop would (connections closed, sessions closed, nothing removed).
func inProcessDaemonOn(t *testing.T, state, sock string) (b daemon.Backend, stop func()) {
	t.Helper()
	testutil.Executor(t) // the test image
	ctx := context.Background()
	b, err := daemon.NewBackend(ctx, sandbox.Config{Namespace: testutil.Namespace, StateDir: state, Image: testutil.TestImageRef, Cold: true})
	require.NoError(t, err)
	srv, err := daemon.NewServer(b, daemon.Options{Version: "test", AdminGID: -1, MaxRunning: 4, QueueWait: 30 * time.Second, StateDir: state})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(sock), 0o755))
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(sock, 0o777))
	hs := &http.Server{Handler: srv, ConnContext: srv.ConnContext}
	go hs.Serve(l)
	stop = sync.OnceFunc(func() {
		hs.Close()
		require.NoError(t, b.Close())
	})
	t.Cleanup(stop)
	return b, stop
}

// TestDaemonCopyAsCaller: what a session copies out of the repository
// (its write directory, or its page) is read with the caller's
// credentials at the copy itself: a file swapped between the daemon's
// check as the caller and the copy (testhook point
// daemon.HookCreateChecked) for another user's 0600 file is refused —
// the creation fails 403, no session is left, and not a byte of the
// file reaches the state directory. Without the swap the same creation
// copies the caller's files as before. Before, the check passed and the
// copy, as root, took the swapped file into the caller's session.
func TestDaemonCopyAsCaller(t *testing.T) {
	sock, b := inProcessDaemon(t)
	nobody, err := user.Lookup("nobody")
	require.NoError(t, err)
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	bin := daemonClientPath(t)
	const secret = "ROOT-ONLY-SECRET-7f3a"
	ctx := context.Background()

	for _, tc := range []struct {
		name, victim string
		req          map[string]any
	}{
		{"write dir", "openwiki/a.md", map[string]any{}},
		{"page", "openwiki/page.md", map[string]any{"page": "openwiki/page.md"}},
	} {
		for _, swap := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: "", true: " swapped"}[swap], func(t *testing.T) {
				repo := openRepo(t, map[string]string{"README.md": "r\n", "openwiki/a.md": "# a\n", "openwiki/page.md": "# page\n"})
				require.NoError(t, filepath.WalkDir(repo, func(p string, _ fs.DirEntry, err error) error {
					require.NoError(t, err)
					return os.Lchown(p, uid, gid)
				}))
				testhook.SetPoint(daemon.HookCreateChecked, func() error {
					if swap {
						tmp := filepath.Join(repo, "openwiki", ".swap")
						require.NoError(t, os.WriteFile(tmp, []byte(secret+"\n"), 0o600))
						require.NoError(t, os.Rename(tmp, filepath.Join(repo, tc.victim)))
					}
					return nil
				})
				t.Cleanup(func() { testhook.SetPoint(daemon.HookCreateChecked, nil) })
				req := map[string]any{"repo": repo}
				for k, v := range tc.req {
					req[k] = v
				}
				body, err := json.Marshal(req)
				require.NoError(t, err)
				before, err := b.Sessions(ctx)
				require.NoError(t, err)
				o := asUID(t, bin, uid, gid, sock, "create-json", string(body))
				if !swap {
					require.Empty(t, o.Kind, o.Message)
					var s api.Session
					require.NoError(t, json.Unmarshal(o.Result, &s))
					rd := asUID(t, bin, uid, gid, sock, "read", s.ID, tc.victim)
					require.Empty(t, rd.Kind, rd.Message)
					require.Contains(t, string(rd.Result), "# ")
					rm := asUID(t, bin, uid, gid, sock, "remove", s.ID)
					require.Empty(t, rm.Kind, rm.Message)
					return
				}
				require.Equal(t, api.KindRefused, o.Kind, o.Message)
				require.Equal(t, 403, o.Status)
				require.Contains(t, o.Message, "may not read it")
				after, err := b.Sessions(ctx)
				require.NoError(t, err)
				require.Len(t, after, len(before), "no session is left")
				state := filepath.Join(filepath.Dir(filepath.Dir(sock)), "state")
				require.NoError(t, filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
					if err != nil || !d.Type().IsRegular() {
						return nil
					}
					data, err := os.ReadFile(p)
					if err == nil && bytes.Contains(data, []byte(secret)) {
						t.Errorf("%s holds the swapped file's bytes", p)
					}
					return nil
				}))
			})
		}
	}
}

// TestDaemonCreateKilledAtEveryStep: a daemon stopped at any step of a
// session's creation (testhook points daemon.HookCreateStep: owner
// record written pending, session made, record committed), and one
// killed while the session directory was still being staged (.new-<id>,
// its record pending), leaves nothing its creator cannot see: the next
// daemon's start removes an unfinished creation whole (session, mounts,
// staging directory, owner record), and a committed one is its
// creator's, listed to it and removed by it. Before, a stop between the
// session and its owner record left a session of root's until its idle
// TTL, and a young staging directory waited a minute for the sweep.
func TestDaemonCreateKilledAtEveryStep(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	require.NoError(t, err)
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	bin := daemonClientPath(t)
	repo := openRepo(t, map[string]string{"README.md": "r\n", "openwiki/a.md": "# a\n"})
	for _, step := range []string{"pending", "made", "committed"} {
		t.Run(step, func(t *testing.T) {
			state, sock := daemonDirs(t)
			_, stop := inProcessDaemonOn(t, state, sock)
			testhook.SetPoint(daemon.HookCreateStep+step, func() error { return errors.New("killed") })
			t.Cleanup(func() { testhook.SetPoint(daemon.HookCreateStep+step, nil) })
			o := asUID(t, bin, uid, gid, sock, "create", repo)
			require.NotEmpty(t, o.Kind, "the creation was stopped")
			stop()
			made, err := filepath.Glob(filepath.Join(state, "sessions", "[0-9a-f]*", "session.json"))
			require.NoError(t, err)
			require.Len(t, made, map[string]int{"pending": 0, "made": 1, "committed": 1}[step], "what the stopped daemon left")
			// A creation killed inside the sandbox's staging, a moment ago.
			const staged = "aaaaaaaaaaa9"
			records := filepath.Join(state, "daemon", "sessions")
			require.NoError(t, os.WriteFile(filepath.Join(records, staged+".json"), []byte(`{"uid":`+nobody.Uid+`,"gid":`+nobody.Gid+`,"pending":true}`), 0o600))
			staging := filepath.Join(state, "sessions", ".new-"+staged)
			require.NoError(t, os.MkdirAll(filepath.Dir(staging), 0o700))
			require.NoError(t, os.Mkdir(staging, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(staging, "inuse"), nil, 0o600))

			d := startDaemon(t, filepath.Join(state), filepath.Join(filepath.Dir(sock), "corral2.sock"))
			require.NoDirExists(t, staging)
			all, err := d.client().Sessions(context.Background())
			require.NoError(t, err)
			left, err := filepath.Glob(filepath.Join(records, "*.json"))
			require.NoError(t, err)
			mine := asUID(t, bin, uid, gid, d.sock, "list")
			require.Empty(t, mine.Kind, mine.Message)
			var listed []api.Session
			require.NoError(t, json.Unmarshal(mine.Result, &listed))
			if step != "committed" {
				require.Empty(t, all, "an unfinished creation is undone")
				require.Empty(t, left, "and its owner record")
				require.Empty(t, listed)
				d.stop(true)
				requireDaemonLeftNothing(t, state)
				return
			}
			require.Len(t, all, 1)
			require.Len(t, left, 1)
			require.Len(t, listed, 1, "the creator sees its session")
			require.Equal(t, uid, listed[0].Owner)
			rm := asUID(t, bin, uid, gid, d.sock, "remove", listed[0].ID)
			require.Empty(t, rm.Kind, rm.Message)
			d.stop(true)
			requireDaemonLeftNothing(t, state)
		})
	}
}

// TestDaemonRequestEdges: against the real daemon, a request path in any
// but its canonical spelling is refused before routing (400 invalid,
// naming the problem), and a client that never reads the answer of a
// non-streamed call holds no call slot: with --max-running 1 the next
// call runs at once instead of waiting out the queue (429).
func TestDaemonRequestEdges(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock, "--max-running", "1", "--queue-wait", "3s")
	c := d.client()
	ctx := context.Background()
	big := strings.Repeat("0123456789abcdef\n", 256<<10) // 4.25 MiB
	repo := openRepo(t, map[string]string{"README.md": "r\n", "big.txt": big})
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
	require.NoError(t, err)

	for path, why := range map[string]string{
		"/v1//sessions":                    `an empty segment`,
		"/v1/./sessions":                   `a \".\" segment`,
		"/v1/sessions/../x":                `a \"..\" segment`,
		"/v1/sessions/" + s.ID + "/../x":   `a \"..\" segment`,
		"/v1/sessions/":                    `a trailing`,
		"/v1/sessions/" + s.ID + "%2Fdiff": `percent-encodes`,
	} {
		conn, err := net.Dial("unix", sock)
		require.NoError(t, err)
		_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: corral\r\nConnection: close\r\n\r\n", path)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", path, body)
		require.Contains(t, string(body), `"kind":"invalid"`, path)
		require.Contains(t, string(body), "not canonical: "+why, path)
	}

	// An exec whose answer (~6 MiB of JSON) its client never reads.
	conn, err := net.Dial("unix", sock)
	require.NoError(t, err)
	defer conn.Close()
	req := `{"argv":["cat","big.txt"]}`
	_, err = fmt.Fprintf(conn, "POST /v1/sessions/%s/exec HTTP/1.1\r\nHost: corral\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", s.ID, len(req), req)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		h, err := c.Health(ctx)
		return err == nil && h.Calls.Running == 0 && h.Calls.Waiting == 0
	}, 60*time.Second, 100*time.Millisecond)
	time.Sleep(2 * time.Second) // the call has run; its answer waits for a reader
	h, err := c.Health(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, h.Calls.Running, "the unread answer holds no slot")
	start := time.Now()
	res, err := c.Exec(ctx, s.ID, []string{"cat", "README.md"}, nil, nil)
	require.NoError(t, err, "the next call gets the one slot")
	require.Equal(t, "r\n", string(res.Stdout))
	t.Logf("next call with an unread answer pending: %s", time.Since(start))
	_, err = c.RemoveSession(ctx, s.ID)
	require.NoError(t, err)
	conn.Close()
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}

// TestDaemonCreateFailsAfterSessionMade: a creation that panics or fails
// inside the backend right after the sandbox made the session (testhook
// point daemon.HookBackendCreateMade) leaves nothing, against the real
// containerd: the client gets an error, the session is removed with its
// mounts and containers, and its owner record goes; the next creation
// works. Before, a panic there dropped the pending owner record and left
// the session, owned by nobody (root's) until its idle TTL.
func TestDaemonCreateFailsAfterSessionMade(t *testing.T) {
	for _, tc := range []struct {
		name string
		hook func() error
	}{
		{"panic", func() error { panic("a fault after the session was made") }},
		{"error", func() error { return errors.New("a failure after the session was made") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, sock := daemonDirs(t)
			_, stop := inProcessDaemonOn(t, state, sock)
			repo := openRepo(t, map[string]string{"README.md": "r\n", "openwiki/a.md": "# a\n"})
			c := client.New(sock)
			defer c.Close()
			ctx := context.Background()
			testhook.SetPoint(daemon.HookBackendCreateMade, tc.hook)
			t.Cleanup(func() { testhook.SetPoint(daemon.HookBackendCreateMade, nil) })
			_, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
			require.Error(t, err)
			testhook.SetPoint(daemon.HookBackendCreateMade, nil)
			made, err := filepath.Glob(filepath.Join(state, "sessions", "[0-9a-f]*"))
			require.NoError(t, err)
			require.Empty(t, made, "the session made is removed")
			records, err := filepath.Glob(filepath.Join(state, "daemon", "sessions", "*"))
			require.NoError(t, err)
			require.Empty(t, records, "and its owner record")
			list, err := c.Sessions(ctx)
			require.NoError(t, err)
			require.Empty(t, list)
			requireDaemonLeftNothing(t, state)

			s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
			require.NoError(t, err, "the next creation works")
			_, err = c.DiscardSession(ctx, s.ID)
			require.NoError(t, err)
			stop()
			requireDaemonLeftNothing(t, state)
		})
	}
}
