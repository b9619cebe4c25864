package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pipeServer runs the server of a fake session on a Transport over
// pipes: the test writes the client's lines to in and receives the
// server's lines (read as they come, so the server never blocks on its
// output) with recv. done receives Run's result.
type pipeServer struct {
	in    *io.PipeWriter
	outR  *io.PipeReader
	lines chan string
	done  chan error
}

func startPipeServer(t *testing.T, tr *Transport) *pipeServer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	tr.In, tr.Out = inR, outW
	ps := &pipeServer{in: inW, outR: outR, lines: make(chan string, 1024), done: make(chan error, 1)}
	go func() { ps.done <- NewWith(&fake{}, Options{Scope: "openwiki/"}).Run(context.Background(), tr) }()
	go func() {
		br := bufio.NewReaderSize(outR, 1<<20)
		for {
			s, err := br.ReadString('\n')
			if err != nil {
				close(ps.lines)
				return
			}
			ps.lines <- strings.TrimSuffix(s, "\n")
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
	})
	ps.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	require.Contains(t, ps.recv(t), `"id":0,"result":{`)
	ps.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	return ps
}

func (ps *pipeServer) send(t *testing.T, s string) {
	t.Helper()
	_, err := io.WriteString(ps.in, s)
	require.NoError(t, err)
}

// recv returns the server's next line, without its newline.
func (ps *pipeServer) recv(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-ps.lines:
		require.True(t, ok, "the server's output ended")
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no answer from the server")
		return ""
	}
}

// listCall is a valid tools/call with the given id and its answer's
// start.
func listCall(id int) (string, string) {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list","arguments":{}}}`+"\n", id),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[`, id)
}

func TestTransportSurvivesHostileInput(t *testing.T) {
	deep := strings.Repeat("[", 200_000) + strings.Repeat("]", 200_000)
	cases := []struct {
		name, in, want string
	}{
		{"truncated JSON", `{"jsonrpc":"2.0",`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: unexpected end of JSON input"}}`},
		{"not JSON", `hello`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid character 'h' looking for beginning of value"}}`},
		{"two values on a line", `{} {}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid character '{' after top-level value"}}`},
		{"raw control byte in a string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\x1bing\"}",
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid character '\\x1b' in string literal"}}`},
		{"200,000 levels deep", deep,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: nested deeper than 64 levels"}}`},
		{"deep params", `{"jsonrpc":"2.0","id":7,"method":"ping","params":{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: nested deeper than 64 levels"}}`},
		{"wrong version", `{"jsonrpc":"1.0","id":5,"method":"ping"}`,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"Invalid Request: \"jsonrpc\" must be \"2.0\""}}`},
		{"no version, string id", `{"id":"x","method":"ping"}`,
			`{"jsonrpc":"2.0","id":"x","error":{"code":-32600,"message":"Invalid Request: \"jsonrpc\" must be \"2.0\""}}`},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: \"id\" must be a string, a number or null"}}`},
		{"number", `42`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a message must be a JSON object"}}`},
		{"neither request nor response", `{"jsonrpc":"2.0"}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a message needs a \"method\" (request, notification) or an \"id\" (response)"}}`},
		{"method not a string", `{"jsonrpc":"2.0","id":6,"method":1}`,
			`{"jsonrpc":"2.0","id":6,"error":{"code":-32600,"message":"Invalid Request: \"method\" must be a string"}}`},
		{"empty batch", `[]`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: empty batch"}}`},
		{"batch", `[{"jsonrpc":"2.0","id":9,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},1]`,
			`[{"jsonrpc":"2.0","id":9,"error":{"code":-32600,"message":"Invalid Request: batches are not supported (MCP 2025-06-18 removed JSON-RPC batching): send one message per line"}},` +
				`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batches are not supported (MCP 2025-06-18 removed JSON-RPC batching): send one message per line"}}]`},
	}
	ps := startPipeServer(t, &Transport{})
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps.send(t, c.in+"\n")
			require.Equal(t, c.want, ps.recv(t))
			call, answer := listCall(100 + i)
			ps.send(t, call)
			require.True(t, strings.HasPrefix(ps.recv(t), answer))
		})
	}

	// Messages the go-sdk itself answers, or ignores, pass through.
	for i, in := range []string{
		`{"jsonrpc":"2.0","id":300,"method":"no/such/method"}`,
		`{"jsonrpc":"2.0","id":301,"method":"tools/call","params":"x"}`,
		`{"jsonrpc":"2.0","id":302,"method":"tools/call","params":{"name":"nope"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":303,\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}",
		`{"jsonrpc":"2.0","id":304,"result":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/unknown"}`,
	} {
		t.Run("passed on "+in, func(t *testing.T) {
			ps.send(t, in+"\n")
			if strings.Contains(in, `"method"`) && strings.Contains(in, `"id"`) {
				require.Contains(t, ps.recv(t), fmt.Sprintf(`"id":%d`, 300+i))
			}
			call, answer := listCall(400 + i)
			ps.send(t, call)
			require.True(t, strings.HasPrefix(ps.recv(t), answer))
		})
	}

	t.Run("blank lines, trailing blanks and CRLF", func(t *testing.T) {
		call, answer := listCall(200)
		ps.send(t, "\n  \n\t"+strings.TrimSuffix(call, "\n")+"  \r\n")
		require.True(t, strings.HasPrefix(ps.recv(t), answer))
	})
	t.Run("a batch of notifications gets no answer", func(t *testing.T) {
		ps.send(t, `[{"jsonrpc":"2.0","method":"notifications/x"}]`+"\n")
		call, answer := listCall(201)
		ps.send(t, call)
		require.True(t, strings.HasPrefix(ps.recv(t), answer))
	})

	ps.in.Close()
	select {
	case err := <-ps.done:
		require.NoError(t, err, "a closed input ends the server cleanly")
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not end when its input closed")
	}
}

func TestTransportMessageSize(t *testing.T) {
	ps := startPipeServer(t, &Transport{MaxMessageBytes: 1000})
	tooLong := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list","arguments":{"path":"` + strings.Repeat("a", 1000) + `"}}}`
	ps.send(t, tooLong+"\n")
	require.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: message longer than 1000 bytes"}}`, ps.recv(t))

	// Exactly the limit is served.
	call, answer := listCall(2)
	call = strings.TrimSuffix(call, "\n")
	ps.send(t, call+strings.Repeat(" ", 1000-len(call))+"\n")
	require.True(t, strings.HasPrefix(ps.recv(t), answer))
}

func TestTransportDiscardsHugeMessageUnbuffered(t *testing.T) {
	ps := startPipeServer(t, &Transport{})
	const size = 200 << 20
	chunk := []byte(strings.Repeat("a", 64<<10))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ps.send(t, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"`)
	for n := 0; n < size; n += len(chunk) {
		_, err := ps.in.Write(chunk)
		require.NoError(t, err)
	}
	ps.send(t, "\"}}\n")
	require.Equal(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: message longer than %d bytes"}}`, MaxMessageBytes), ps.recv(t))
	runtime.ReadMemStats(&after)
	// Holding the line whole would allocate more than its 200 MiB; the
	// filter holds at most MaxMessageBytes of it, grown by doubling.
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(3*MaxMessageBytes), "allocated while reading a 200 MiB line")
	call, answer := listCall(2)
	ps.send(t, call)
	require.True(t, strings.HasPrefix(ps.recv(t), answer))
}

func TestTransportClientClosesOutput(t *testing.T) {
	ps := startPipeServer(t, &Transport{})
	ps.outR.Close()
	call, _ := listCall(1)
	ps.send(t, call)
	select {
	case <-ps.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not end when its output closed")
	}

	// The same when the answer that fails is the filter's own.
	ps = startPipeServer(t, &Transport{})
	ps.outR.Close()
	ps.send(t, "not json\n")
	select {
	case <-ps.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not end when its output closed")
	}
}

func TestCheckAgreesWithJSON(t *testing.T) {
	// tooDeep counts brackets outside strings only.
	require.False(t, tooDeep([]byte(`{"a":"[[[[[[\"[[["}`), 2))
	require.True(t, tooDeep([]byte(`{"a":[[1]]}`), 2))
	require.False(t, tooDeep([]byte(`{"a":[1]}`), 2))
	var v any
	require.NoError(t, json.Unmarshal([]byte(`{"a":"[[[[[[\"[[["}`), &v))
}

// FuzzTransport: whatever a line holds, the server answers the valid
// call that follows it.
func FuzzTransport(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0",`, `[]`, `[1,{"id":2}]`, `{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"ping"}`, `"\u0000"`, `{"a":"\"[[["}`, "\xff\xfe", `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		ps := startPipeServer(t, &Transport{MaxMessageBytes: 4096})
		ps.send(t, line+"\n")
		call, answer := listCall(987654)
		ps.send(t, call)
		for {
			l := ps.recv(t)
			if strings.HasPrefix(l, answer) {
				return
			}
			require.True(t, json.Valid([]byte(l)), "every answer is JSON: %q", l)
		}
	})
}
