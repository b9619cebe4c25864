package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits of one inbound message (see Transport).
const (
	// MaxMessageBytes is the default largest message, in bytes, not
	// counting its newline: twice the largest content the write tool
	// accepts (fsop.MaxWriteBytes, 8 MiB), so that content fits even when
	// JSON escaping doubles it. It equals the go-sdk's DefaultMaxLineLength.
	MaxMessageBytes = 16 << 20
	// MaxDepth is the default deepest nesting of JSON arrays and objects
	// in a message. MCP messages nest a handful of levels.
	MaxDepth = 64
)

// Transport is MCP's stdio transport (newline-delimited JSON-RPC 2.0, one
// message per line, as the MCP specification's stdio transport requires)
// made to survive a hostile client. The go-sdk's own connection ends at
// the first line it cannot decode, and buffers a line of any size; this
// transport puts a filter in front of it that reads one line at a time
// and hands on only messages the go-sdk accepts. Every other line is
// answered with a JSON-RPC 2.0 error response and the server keeps
// serving:
//
//   - a line longer than MaxMessageBytes is discarded as it arrives (never
//     held whole) and answered -32600 Invalid Request;
//   - text that is not one JSON value, or nests arrays and objects deeper
//     than MaxDepth, is answered -32700 Parse error;
//   - JSON that is not a JSON-RPC 2.0 message is answered -32600;
//   - a batch (a JSON array, which MCP 2025-06-18 removed) is answered
//     -32600 for each call in it and its messages are not processed; an
//     empty array gets one -32600.
//
// The id of an error response is the request's when it is a string or a
// number, else null (JSON-RPC 2.0 section 5). Blank lines are skipped. So
// the memory one message takes is bounded by a small multiple of
// MaxMessageBytes.
type Transport struct {
	// In and Out are the client's side: the server reads requests from In
	// and writes responses to Out. Close closes In.
	In  io.ReadCloser
	Out io.Writer
	// MaxMessageBytes and MaxDepth bound one message; zero means the
	// package's default.
	MaxMessageBytes int
	MaxDepth        int
}

// Stdio returns the Transport over the process's standard input and
// output.
func Stdio() *Transport { return &Transport{In: os.Stdin, Out: os.Stdout} }

// Connect implements mcp.Transport.
func (t *Transport) Connect(ctx context.Context) (mcp.Connection, error) {
	out := &lockedWriter{w: t.Out}
	f := &filter{in: t.In, br: bufio.NewReaderSize(t.In, 64<<10), out: out,
		max: t.MaxMessageBytes, depth: t.MaxDepth}
	if f.max <= 0 {
		f.max = MaxMessageBytes
	}
	if f.depth <= 0 {
		f.depth = MaxDepth
	}
	// The filter bounds every line; the go-sdk's own bound would end the
	// connection instead of answering, so it is off.
	inner := &mcp.IOTransport{Reader: f, Writer: out, MaxLineLength: -1}
	return inner.Connect(ctx)
}

// lockedWriter makes each Write whole on the shared output: the go-sdk
// writes a message in one Write, and so does the filter.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Close does nothing: the output belongs to the caller.
func (l *lockedWriter) Close() error { return nil }

// errTooLong is a line longer than the maximum message size.
var errTooLong = errors.New("line too long")

// filter is the io.ReadCloser the go-sdk's connection reads: it yields
// only acceptable messages, each on its own line, and answers the rest.
type filter struct {
	in         io.ReadCloser
	br         *bufio.Reader
	out        io.Writer
	max, depth int

	line    []byte // the current line, at most max+1 bytes
	pending []byte // what is left of the current message for Read
}

func (f *filter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		msg, err := f.next()
		if err != nil {
			return 0, err
		}
		f.pending = msg
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

func (f *filter) Close() error { return f.in.Close() }

// next returns the next acceptable message followed by a newline; it
// answers every unacceptable line on the way. A read error ends it, and
// so does a failed answer (the client is gone).
func (f *filter) next() ([]byte, error) {
	for {
		line, err := f.readLine()
		if errors.Is(err, errTooLong) {
			if werr := f.reply(errorResponse(nil, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Invalid Request: message longer than %d bytes", f.max))); werr != nil {
				return nil, werr
			}
			continue
		}
		msg := bytes.TrimSpace(line)
		if len(msg) > 0 {
			resp, pass := check(msg, f.depth)
			if pass {
				return append(msg, '\n'), nil
			}
			if werr := f.reply(resp); werr != nil {
				return nil, werr
			}
		}
		if err != nil {
			return nil, err
		}
	}
}

// readLine returns the next line without its newline; a final line may
// lack one (then with the read error, e.g. io.EOF). A line longer than
// f.max is read to its end and dropped: errTooLong.
func (f *filter) readLine() ([]byte, error) {
	if cap(f.line) > 1<<20 {
		f.line = nil // let a large message's buffer go
	}
	f.line = f.line[:0]
	tooLong := false
	for {
		chunk, err := f.br.ReadSlice('\n')
		// f.max+1: room for the newline.
		if !tooLong && len(f.line)+len(chunk) > f.max+1 {
			tooLong, f.line = true, nil
		}
		if !tooLong {
			f.line = appendDoubling(f.line, chunk, f.max+1)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case tooLong:
			return nil, errTooLong
		case err == nil:
			return f.line[:len(f.line)-1], nil
		case len(f.line) > f.max:
			return nil, errTooLong
		default:
			return f.line, err
		}
	}
}

// appendDoubling appends b to buf, doubling its capacity when it grows
// (up to limit), so that a line of n bytes costs about 2n bytes of
// allocation in all.
func appendDoubling(buf, b []byte, limit int) []byte {
	if need := len(buf) + len(b); need > cap(buf) {
		grown := make([]byte, len(buf), min(max(2*cap(buf), need, 4096), max(limit, need)))
		copy(grown, buf)
		buf = grown
	}
	return append(buf, b...)
}

func (f *filter) reply(resp []byte) error {
	if resp == nil {
		return nil
	}
	_, err := f.out.Write(resp)
	return err
}

// check decides a trimmed, non-empty line: pass it to the go-sdk, or
// answer it with resp (nil: drop it unanswered, as a batch of
// notifications).
func check(msg []byte, maxDepth int) (resp []byte, pass bool) {
	if tooDeep(msg, maxDepth) {
		return errorResponse(nil, jsonrpc.CodeParseError, fmt.Sprintf("Parse error: nested deeper than %d levels", maxDepth)), false
	}
	if err := json.Unmarshal(msg, new(json.RawMessage)); err != nil {
		return errorResponse(nil, jsonrpc.CodeParseError, "Parse error: "+err.Error()), false
	}
	if msg[0] != '[' {
		if _, err := jsonrpc.DecodeMessage(msg); err != nil {
			return errorResponse(idOf(msg), jsonrpc.CodeInvalidRequest, "Invalid Request: "+whyInvalid(msg)), false
		}
		return nil, true
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(msg, &batch); err != nil || len(batch) == 0 {
		return errorResponse(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: empty batch"), false
	}
	var resps []json.RawMessage
	for _, m := range batch {
		dm, err := jsonrpc.DecodeMessage(m)
		if req, ok := dm.(*jsonrpc.Request); err == nil && (!ok || !req.IsCall()) {
			continue // no answer to a notification or a response
		}
		r := errorResponse(idOf(m), jsonrpc.CodeInvalidRequest,
			"Invalid Request: batches are not supported (MCP 2025-06-18 removed JSON-RPC batching): send one message per line")
		resps = append(resps, bytes.TrimSuffix(r, []byte("\n")))
	}
	if len(resps) == 0 {
		return nil, false
	}
	out, _ := json.Marshal(resps)
	return append(out, '\n'), false
}

// whyInvalid names what makes msg (valid JSON) no JSON-RPC 2.0 message,
// in corral's words (the go-sdk's error text names its internal types).
func whyInvalid(msg []byte) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(msg, &obj) != nil {
		return "a message must be a JSON object"
	}
	var version string
	if json.Unmarshal(obj["jsonrpc"], &version) != nil || version != "2.0" {
		return `"jsonrpc" must be "2.0"`
	}
	id, hasID := obj["id"]
	if hasID && idOf(msg) == nil && string(id) != "null" {
		return `"id" must be a string, a number or null`
	}
	method, hasMethod := obj["method"]
	var name string
	if hasMethod && json.Unmarshal(method, &name) != nil {
		return `"method" must be a string`
	}
	if !hasMethod && idOf(msg) == nil {
		return `a message needs a "method" (request, notification) or an "id" (response)`
	}
	return "not a JSON-RPC 2.0 message"
}

// tooDeep reports whether msg nests arrays and objects deeper than max,
// without parsing it (brackets inside strings do not count).
func tooDeep(msg []byte, max int) bool {
	depth := 0
	inString, escaped := false, false
	for _, c := range msg {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > max {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

// idOf returns the "id" member of a JSON object when it is a string or a
// number, else nil (null).
func idOf(msg json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(msg, &obj) != nil {
		return nil
	}
	id := obj["id"]
	if len(id) == 0 || (id[0] != '"' && id[0] != '-' && (id[0] < '0' || id[0] > '9')) {
		return nil
	}
	return id
}

// errorResponse is a JSON-RPC 2.0 error response line with the given id
// (nil: null).
func errorResponse(id json.RawMessage, code int64, message string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	type wireError struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}
	out, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{code, message}})
	return append(out, '\n')
}
