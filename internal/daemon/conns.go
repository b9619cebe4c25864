package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-sandbox/corral/sandbox/api"
)

// DefaultMaxConnections is the daemon's default --max-connections.
const DefaultMaxConnections = 1024

// Bounds of the answer to a connection over the cap.
const (
	// refuseTime bounds the whole answer to one refused connection.
	refuseTime = 2 * time.Second
	// maxRefusing bounds the refused connections being answered at once;
	// past it a refused connection is closed without an answer.
	maxRefusing = 64
)

// DefaultMaxConnectionsPerUID is the daemon's default
// --max-connections-per-uid.
const DefaultMaxConnectionsPerUID = 64

// connLimiter is a listener that holds at most max connections open at
// once (--max-connections), and at most perOwner of one owner's
// (--max-connections-per-uid): each connection holds a goroutine and
// buffers in the daemon, whatever it asks, so many idle connections
// could exhaust the daemon without one call, and one uid (or Pod) holding
// every place — a keep-alive connection costs a request every two
// minutes — would lock every other caller out, root included. A
// connection over a cap is accepted and answered at once with 503 (kind
// unavailable, naming the flag) and closed, so that a client sees why
// instead of a reset; its request is never parsed, only drained and
// discarded.
type connLimiter struct {
	net.Listener
	max      int
	perOwner int
	// ownerOf names the owner a connection counts against (connOwner),
	// capped false for one no owner cap applies to (admins); peer is its
	// caller, ok false when it could not be read.
	ownerOf  func(net.Conn) (peer Peer, ok bool, owner string, capped bool)
	open     atomic.Int64
	refusing chan struct{}

	mu    sync.Mutex
	owned map[string]int
}

// limitConns returns l holding at most max connections open at once, and
// at most perOwner (0: no cap) of each owner ownerOf names (nil: none).
func limitConns(l net.Listener, max, perOwner int, ownerOf func(net.Conn) (Peer, bool, string, bool)) net.Listener {
	return &connLimiter{Listener: l, max: max, perOwner: perOwner, ownerOf: ownerOf,
		refusing: make(chan struct{}, maxRefusing), owned: map[string]int{}}
}

// Accept returns the next connection under the caps, answering those
// over them itself.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); n > int64(l.max) {
			l.open.Add(-1)
			l.refuseAsync(c, fmt.Sprintf("too many connections: %d are open (the daemon's --max-connections); retry later", l.max))
			continue
		}
		cc := &countedConn{Conn: c, l: l}
		if l.ownerOf != nil {
			var owner string
			var capped bool
			cc.peer, cc.peerOK, owner, capped = l.ownerOf(c)
			if capped && l.perOwner > 0 {
				if !l.takeOwned(owner) {
					l.open.Add(-1)
					l.refuseAsync(c, fmt.Sprintf("too many connections of %s: %d are open (the daemon's --max-connections-per-uid); retry later", owner, l.perOwner))
					continue
				}
				cc.owner = owner
			}
		}
		return cc, nil
	}
}

// takeOwned counts one more connection of owner, or reports false when
// it holds perOwner already.
func (l *connLimiter) takeOwned(owner string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.owned[owner] >= l.perOwner {
		return false
	}
	l.owned[owner]++
	return true
}

func (l *connLimiter) dropOwned(owner string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.owned[owner]--; l.owned[owner] <= 0 {
		delete(l.owned, owner)
	}
}

// refuseAsync answers c 503 with msg in a goroutine of its own, at most
// maxRefusing at once; past it c is closed without an answer.
func (l *connLimiter) refuseAsync(c net.Conn, msg string) {
	select {
	case l.refusing <- struct{}{}:
		go func() {
			defer func() { <-l.refusing }()
			refuseConn(c, msg)
		}()
	default:
		c.Close()
	}
}

// refuseConn answers c 503 with msg and closes it, all within
// refuseTime: first what the client sends is read up to the end of its
// request's header (or maxRefusedHeader bytes, or until it sends nothing
// more), because an answer that comes before the request is written is
// dropped by Go's client as unsolicited (the call fails with no message);
// then the answer written, the write side shut, and the rest drained
// (closing with unread data would reset the connection before the client
// reads the answer). The request is never parsed.
func refuseConn(c net.Conn, msg string) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(refuseTime))
	_ = readUntilHeaderEnd(c, maxRefusedHeader)
	body, _ := json.Marshal(api.ErrorBody{Error: api.Error{Kind: api.KindUnavailable, Message: msg}})
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %s\r\nConnection: close\r\n\r\n",
		http.StatusServiceUnavailable, http.StatusText(http.StatusServiceUnavailable), api.MediaJSON, strconv.Itoa(len(body)+1))
	b.Write(body)
	b.WriteByte('\n')
	if _, err := c.Write(b.Bytes()); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, maxBody))
}

// maxRefusedHeader bounds what refuseConn reads before it answers.
const maxRefusedHeader = 64 << 10

// readUntilHeaderEnd reads from r until it has read an HTTP header's end
// (an empty line), max bytes, or an error (the deadline, EOF).
func readUntilHeaderEnd(r io.Reader, max int) error {
	var tail []byte // the last bytes read, which an end may span
	chunk := make([]byte, 4096)
	for read := 0; read < max; {
		n, err := r.Read(chunk[:min(len(chunk), max-read)])
		read += n
		tail = append(tail, chunk[:n]...)
		if bytes.Contains(tail, []byte("\r\n\r\n")) || bytes.Contains(tail, []byte("\n\n")) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(tail) > 3 {
			tail = append(tail[:0], tail[len(tail)-3:]...)
		}
	}
	return nil
}

// countedConn is a connection under the caps: closing it frees its
// places. It carries the caller read when it was accepted (peerOK), so
// that ConnContext reads it once.
type countedConn struct {
	net.Conn
	l      *connLimiter
	owner  string // "" when no owner cap counts it
	peer   Peer
	peerOK bool
	once   sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		if c.owner != "" {
			c.l.dropOwned(c.owner)
		}
	})
	return err
}

// NetConn returns the accepted connection (the peer's credentials are
// read from it).
func (c *countedConn) NetConn() net.Conn { return c.Conn }

// unixConn returns c's unix socket, through a countedConn.
func unixConn(c net.Conn) (*net.UnixConn, bool) {
	if w, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = w.NetConn()
	}
	uc, ok := c.(*net.UnixConn)
	return uc, ok
}
