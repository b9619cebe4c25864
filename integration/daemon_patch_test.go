package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// TestDaemonPatchStreamedUnderASlot: against the real daemon with
// --max-running 1, GET .../diff?format=patch of a session with a 4 MiB
// change holds the call slot while its answer is written: a client that
// reads none of it blocks the daemon mid-answer (the patch is streamed,
// so only the socket's buffers hold what was written), and another call
// waits and gets 429 busy. Once the client reads, it gets the whole
// patch and the slot frees. Before, the patch was built whole in memory
// and took no slot, so any number of such requests held as many patches.
func TestDaemonPatchStreamedUnderASlot(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock, "--max-running", "1", "--queue-wait", "2s")
	c := d.client()
	ctx := context.Background()
	repo := openRepo(t, map[string]string{"README.md": "r\n", "openwiki/a.md": "# a\n"})
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
	require.NoError(t, err)
	line := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n"
	big := strings.Repeat(line, (4<<20)/len(line))
	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/big.md", Content: big})
	require.NoError(t, err)

	conn, err := net.Dial("unix", sock)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET /v1/sessions/%s/diff?format=patch HTTP/1.1\r\nHost: corral\r\n\r\n", s.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		h, err := c.Health(ctx)
		return err == nil && h.Calls.Running == 1
	}, 30*time.Second, 50*time.Millisecond, "the patch takes the slot")
	time.Sleep(500 * time.Millisecond) // the daemon is blocked writing to a client that reads nothing
	h, err := c.Health(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, h.Calls.Running, "the slot is held while the patch is written")
	_, err = c.Exec(ctx, s.ID, []string{"ls"}, nil, nil)
	requireAPIKind(t, err, api.KindBusy)

	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, api.MediaPatch, resp.Header.Get("Content-Type"))
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(body), "diff --git a/openwiki/big.md b/openwiki/big.md\n"), "%.200s", body)
	require.Greater(t, len(body), len(big), "the whole patch")
	require.Equal(t, strings.Count(big, "\n"), strings.Count(string(body), "\n+"+line[:16]))
	require.Eventually(t, func() bool {
		h, err := c.Health(ctx)
		return err == nil && h.Calls.Running == 0
	}, 30*time.Second, 50*time.Millisecond, "the slot frees once the patch is written")
	res, err := c.Exec(ctx, s.ID, []string{"ls"}, nil, nil)
	require.NoError(t, err)
	require.Zero(t, res.ExitCode)
	_, err = c.DiscardSession(ctx, s.ID)
	require.NoError(t, err)
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}

// TestDaemonUIDKeptPatchBudget: against the real daemon outside Pod
// mode, with --max-kept-patch-bytes 2KiB, a uid's session removed without
// discard keeps its patch with the uid's
// (STATE_DIR/patches/uid-N/ID.patch, its record beside), which that uid
// lists, fetches and removes and another uid cannot see (404); a DELETE
// whose patch would pass the budget is refused 422 and removes nothing.
// Before, a uid's kept patches had no budget and were the admins' alone.
func TestDaemonUIDKeptPatchBudget(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	require.NoError(t, err)
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	const other = 54321
	bin := daemonClientPath(t)
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock, "--max-kept-patch-bytes", "2KiB")
	repo := openRepo(t, map[string]string{"README.md": "r\n", "openwiki/a.md": "# a\n"})
	as := func(uid, gid int, args ...string) dcOutput {
		return asUID(t, bin, uid, gid, append([]string{sock}, args...)...)
	}
	created := func() string {
		o := as(uid, gid, "create", repo)
		require.Empty(t, o.Kind, o.Message)
		var s api.Session
		require.NoError(t, json.Unmarshal(o.Result, &s))
		return s.ID
	}

	id := created()
	o := as(uid, gid, "write", id, "openwiki/new.md", "kept\n")
	require.Empty(t, o.Kind, o.Message)
	o = as(uid, gid, "remove", id)
	require.Empty(t, o.Kind, o.Message)
	var rm api.Removed
	require.NoError(t, json.Unmarshal(o.Result, &rm))
	dir := filepath.Join(state, "patches", "uid-"+nobody.Uid)
	require.Equal(t, filepath.Join(dir, id+".patch"), rm.Patch)
	require.FileExists(t, filepath.Join(dir, id+".json"))
	o = as(uid, gid, "patches")
	require.Empty(t, o.Kind, o.Message)
	var mine []api.PodPatch
	require.NoError(t, json.Unmarshal(o.Result, &mine))
	require.Len(t, mine, 1)
	require.Equal(t, "uid:"+nobody.Uid, mine[0].OwnedBy)
	require.Equal(t, []string{"openwiki/new.md"}, mine[0].Files)
	o = as(uid, gid, "patch", id)
	require.Empty(t, o.Kind, o.Message)
	require.Contains(t, string(o.Result), "+++ b/openwiki/new.md")
	o = as(other, gid, "patches")
	require.Empty(t, o.Kind, o.Message)
	require.JSONEq(t, "[]", string(o.Result), "another uid sees none")
	o = as(other, gid, "patch", id)
	require.Equal(t, api.KindNotFound, o.Kind)

	big := created()
	o = as(uid, gid, "write", big, "openwiki/big.md", strings.Repeat("0123456789abcdef\n", 200))
	require.Empty(t, o.Kind, o.Message)
	o = as(uid, gid, "remove", big)
	require.Equal(t, api.KindLimit, o.Kind, o.Message)
	require.Equal(t, 422, o.Status)
	require.Contains(t, o.Message, "--max-kept-patch-bytes")
	o = as(uid, gid, "get", big)
	require.Empty(t, o.Kind, "the refused DELETE removed nothing: %s", o.Message)
	o = as(uid, gid, "discard", big)
	require.Empty(t, o.Kind, o.Message)

	o = as(uid, gid, "rmpatch", id)
	require.Empty(t, o.Kind, o.Message)
	require.NoDirExists(t, dir, "its last kept patch gone, the owner's directory goes")
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}
