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

// connLimiter is a listener that holds at most max connections open at
// once (--max-connections). Each connection holds a goroutine and
// buffers in the daemon, whatever it asks, so many idle connections
// could exhaust the daemon without one call. A connection over the cap is
// accepted and answered at once with 503 (kind unavailable, naming the
// flag) and closed, so that a client sees why instead of a reset; its
// request is never parsed, only drained and discarded.
type connLimiter struct {
	net.Listener
	max      int
	open     atomic.Int64
	refusing chan struct{}
}

// limitConns returns l holding at most max connections open at once.
func limitConns(l net.Listener, max int) net.Listener {
	return &connLimiter{Listener: l, max: max, refusing: make(chan struct{}, maxRefusing)}
}

// Accept returns the next connection under the cap, answering those
// over it itself.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); n <= int64(l.max) {
			return &countedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		select {
		case l.refusing <- struct{}{}:
			go func() {
				defer func() { <-l.refusing }()
				l.refuse(c)
			}()
		default:
			c.Close()
		}
	}
}

// refuse answers c 503 and closes it: the answer written, the write side
// shut, what the client sent drained (closing with unread data would
// reset the connection before the client reads the answer), all within
// refuseTime.
func (l *connLimiter) refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(refuseTime))
	body, _ := json.Marshal(api.ErrorBody{Error: api.Error{Kind: api.KindUnavailable,
		Message: fmt.Sprintf("too many connections: %d are open (the daemon's --max-connections); retry later", l.max)}})
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

// countedConn is a connection under the cap: closing it frees its place.
type countedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
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
