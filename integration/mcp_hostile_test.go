package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

// rawMCP drives `corral serve --mcp` over real pipes with hand-written
// JSON-RPC lines.
type rawMCP struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    io.ReadCloser
	lines  chan string
	stderr *lockedBuffer
	exited chan struct{} // closed when the server has exited
	err    error         // cmd.Wait's, once exited is closed
}

func startRawMCP(t *testing.T, sessionID string) *rawMCP {
	t.Helper()
	require.NoError(t, testutil.BuildCorral())
	cmd := exec.Command(testutil.CorralPath(), serverArgs(t, "--session", sessionID)...)
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
	r := &rawMCP{t: t, cmd: cmd, stderr: &lockedBuffer{}, lines: make(chan string, 64), exited: make(chan struct{})}
	cmd.Stderr = r.stderr
	var err error
	r.in, err = cmd.StdinPipe()
	require.NoError(t, err)
	r.out, err = cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		br := bufio.NewReader(r.out)
		for {
			s, err := br.ReadString('\n')
			if err != nil {
				close(r.lines)
				return
			}
			r.lines <- strings.TrimSuffix(s, "\n")
		}
	}()
	go func() {
		r.err = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		r.in.Close()
		select {
		case <-r.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
	require.Contains(t, r.recv(), `"id":0,"result":{`)
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	return r
}

func (r *rawMCP) send(s string) {
	r.t.Helper()
	_, err := io.WriteString(r.in, s)
	require.NoError(r.t, err, "server stderr: %s", r.stderr.String())
}

func (r *rawMCP) recv() string {
	r.t.Helper()
	select {
	case l, ok := <-r.lines:
		require.True(r.t, ok, "the server's output ended; stderr: %s", r.stderr.String())
		return l
	case <-time.After(90 * time.Second):
		r.t.Fatalf("no answer; server stderr: %s", r.stderr.String())
		return ""
	}
}

// wait waits for the server to exit and returns its exit code.
func (r *rawMCP) wait() int {
	r.t.Helper()
	select {
	case <-r.exited:
		var ee *exec.ExitError
		if errors.As(r.err, &ee) {
			return ee.ExitCode()
		}
		require.NoError(r.t, r.err)
		return 0
	case <-time.After(60 * time.Second):
		r.t.Fatalf("the server did not end; stderr: %s", r.stderr.String())
		return -1
	}
}

// requireNothingLeft fails when containers or leases of process pid are
// still in containerd.
func requireNothingLeft(t *testing.T, e *sandbox.Executor, pid int) {
	t.Helper()
	ctx := e.Context(context.Background())
	filter := fmt.Sprintf("labels.%q==%s", sandbox.LabelPID, strconv.Itoa(pid))
	cs, err := e.Client().Containers(ctx, filter)
	require.NoError(t, err)
	require.Empty(t, cs, "containers of the ended server")
	ls, err := e.Client().LeasesService().List(ctx, filter)
	require.NoError(t, err)
	require.Empty(t, ls, "leases of the ended server")
}

// TestMCPHostileInput: issue 9 item 15. Each hostile line gets its
// JSON-RPC error and the next valid call is served; a 200 MiB line is
// dropped without the server holding it; a closed stdin, and a closed
// stdout, end the server with exit 0 and nothing left in containerd.
func TestMCPHostileInput(t *testing.T) {
	e := testutil.Executor(t)
	repo := ftRepo(t)
	s := createSession(t, e, sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t)}, "docs")
	require.NoError(t, s.Close())
	t.Cleanup(func() { removeSession(t, e, s.ID) })

	r := startRawMCP(t, s.ID)
	exec := func(id int) {
		t.Helper()
		r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"exec","arguments":{"argv":["cat","README.md"]}}}`+"\n", id))
		ans := r.recv()
		require.True(t, strings.HasPrefix(ans, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":`, id)), ans)
		require.Contains(t, ans, `hello\nworld`)
	}
	exec(1)
	hostile := []struct{ name, in, want string }{
		{"malformed", `{"jsonrpc":"2.0","id":2,"method":`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: unexpected end of JSON input"}}`},
		{"200,000 deep", strings.Repeat("[", 200_000) + strings.Repeat("]", 200_000),
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: nested deeper than 64 levels"}}`},
		{"not JSON-RPC", `{"jsonrpc":"1.0","id":3,"method":"tools/list"}`,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"Invalid Request: \"jsonrpc\" must be \"2.0\""}}`},
		{"batch", `[{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`,
			`[{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"Invalid Request: batches are not supported (MCP 2025-06-18 removed JSON-RPC batching): send one message per line"}}]`},
	}
	for i, h := range hostile {
		r.send(h.in + "\n")
		require.Equal(t, h.want, r.recv(), h.name)
		exec(10 + i)
	}

	// 200 MiB on one line, streamed: answered once its newline arrives.
	r.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"write","arguments":{"path":"openwiki/big.md","content":"`)
	chunk := strings.Repeat("a", 1<<20)
	for range 200 {
		r.send(chunk)
	}
	r.send("\"}}}\n")
	require.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: message longer than 16777216 bytes"}}`, r.recv())
	exec(20)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid))
	require.NoError(t, err)
	var hwmKiB int
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			hwmKiB, err = strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			require.NoError(t, err)
		}
	}
	t.Logf("server peak RSS after a 200 MiB line: %d MiB", hwmKiB>>10)
	require.Less(t, hwmKiB>>10, 150, "peak resident MiB of the server")

	r.in.Close()
	require.Equal(t, 0, r.wait(), "a closed stdin ends the server; stderr: %s", r.stderr.String())
	requireNothingLeft(t, e, r.cmd.Process.Pid)

	// The client closes its end of stdout: the next answer fails with
	// EPIPE and the server ends through its cleanup.
	r = startRawMCP(t, s.ID)
	exec(30)
	require.NoError(t, r.out.Close())
	r.send(`{"jsonrpc":"2.0","id":31,"method":"tools/list"}` + "\n")
	require.Equal(t, 0, r.wait(), "stderr: %s", r.stderr.String())
	require.Contains(t, r.stderr.String(), "corral: the client closed the connection")
	requireNothingLeft(t, e, r.cmd.Process.Pid)

	// The session is intact for the next client.
	r = startRawMCP(t, s.ID)
	exec(40)
	r.in.Close()
	require.Equal(t, 0, r.wait())
}
