package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/daemon"
	"github.com/corral-sandbox/corral/internal/testhook"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// inProcessDaemon serves a daemon's API from this test binary (so a test
// can reach its testhook points) on a socket every uid may connect to;
// it returns the socket and the backend.
func inProcessDaemon(t *testing.T) (sock string, b daemon.Backend) {
	t.Helper()
	testutil.Executor(t) // the test image
	state, sock := daemonDirs(t)
	ctx := context.Background()
	b, err := daemon.NewBackend(ctx, sandbox.Config{Namespace: testutil.Namespace, StateDir: state, Image: testutil.TestImageRef, Cold: true})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	srv, err := daemon.NewServer(b, daemon.Options{Version: "test", AdminGID: -1, MaxRunning: 4, QueueWait: 30 * time.Second, StateDir: state})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(sock), 0o755))
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(sock, 0o777))
	hs := &http.Server{Handler: srv, ConnContext: srv.ConnContext}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	return sock, b
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
