// Package client is the Go client of corral's daemon API (package
// sandbox/api; docs/api/openapi.yaml): typed methods over HTTP/1.1 and
// JSON on the daemon's unix socket, exec streamed into io.Writers, and
// errors mapped back to the types corral's own packages return, so that a
// program printing them prints the lines corral's CLI prints:
//
//   - every error is an *Error whose Error() is the daemon's message, the
//     CLI's line for the same failure;
//   - errors.As finds the policy's *allowlist.Refusal, review's
//     *RefusedError and *ConflictError, review.ErrNoApproval, a change
//     set's *changeset.RejectedError, or a file tool's *FileError, with the
//     same fields as in-process, and errors.Is answers as it does for
//     that error in-process;
//   - any other error's errors.Is finds the errdefs category of its kind
//     (errdefs.ErrNotFound, …).
//
// A method's answer is nil when it returns an error. A Client is safe
// for concurrent use. The caller must call Close.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/sandbox/api"
)

// EnvSocket names the environment variable a launcher may set to point
// its tools at a daemon's socket (see Socket).
const EnvSocket = "CORRAL_DAEMON"

// Socket returns the socket a client should use: flag when set, else
// $CORRAL_DAEMON, else api.DefaultSocket.
func Socket(flag string) string {
	if flag != "" {
		return flag
	}
	if s := os.Getenv(EnvSocket); s != "" {
		return s
	}
	return api.DefaultSocket
}

// Client talks to one daemon.
type Client struct {
	socket string
	hc     *http.Client
}

// New returns a client of the daemon at socket without contacting it.
func New(socket string) *Client { return NewWith(socket, nil) }

// NewWith is New with the transport wrapped by wrap (nil: none), e.g. to
// record or check each exchange.
func NewWith(socket string, wrap func(http.RoundTripper) http.RoundTripper) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:          16,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ExpectContinueTimeout: 0,
	}
	var rt http.RoundTripper = tr
	if wrap != nil {
		rt = wrap(tr)
	}
	return &Client{socket: socket, hc: &http.Client{Transport: rt}}
}

// Dial returns a client of the daemon at socket once it answered
// GET /v1/version. When nothing answers the error wraps
// errdefs.ErrUnavailable (a caller may then work standalone).
func Dial(ctx context.Context, socket string) (*Client, error) {
	c := New(socket)
	if _, err := c.Version(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close closes the client's idle connections.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	if tr, ok := c.hc.Transport.(interface{ CloseIdleConnections() }); ok {
		tr.CloseIdleConnections()
	}
	return nil
}

// Socket returns the daemon's socket path.
func (c *Client) Socket() string { return c.socket }

const base = "http://corral"

// do sends a request and returns the answer when its status is 2xx; any
// other answer is decoded into an *Error.
func (c *Client) do(ctx context.Context, method, path string, body any, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encoding the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", api.MediaJSON)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("corral daemon at %s: %w: %v", c.socket, errdefs.ErrUnavailable, unwrapURL(err))
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, decodeError(resp)
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// call sends body and decodes a JSON answer into out.
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, body, api.MediaJSON)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("reading the daemon's answer to %s %s: %w", method, path, err)
	}
	return nil
}

// answer sends body and decodes a JSON answer into a new T; nil on
// error.
func answer[T any](ctx context.Context, c *Client, method, path string, body any) (*T, error) {
	var v T
	if err := c.call(ctx, method, path, body, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

func sessionPath(id, tail string) string { return "/v1/sessions/" + url.PathEscape(id) + tail }

// Version is GET /v1/version.
func (c *Client) Version(ctx context.Context) (*api.VersionInfo, error) {
	return answer[api.VersionInfo](ctx, c, http.MethodGet, "/v1/version", nil)
}

// Health is GET /v1/health.
func (c *Client) Health(ctx context.Context) (*api.Health, error) {
	return answer[api.Health](ctx, c, http.MethodGet, "/v1/health", nil)
}

// CreateSession is POST /v1/sessions.
func (c *Client) CreateSession(ctx context.Context, req api.CreateSession) (*api.Session, error) {
	return answer[api.Session](ctx, c, http.MethodPost, "/v1/sessions", req)
}

// Sessions is GET /v1/sessions: the caller's sessions.
func (c *Client) Sessions(ctx context.Context) ([]api.Session, error) {
	var v []api.Session
	return v, c.call(ctx, http.MethodGet, "/v1/sessions", nil, &v)
}

// Session is GET /v1/sessions/{id}.
func (c *Client) Session(ctx context.Context, id string) (*api.Session, error) {
	return answer[api.Session](ctx, c, http.MethodGet, sessionPath(id, ""), nil)
}

// RemoveSession is DELETE /v1/sessions/{id}.
func (c *Client) RemoveSession(ctx context.Context, id string) (*api.Removed, error) {
	return answer[api.Removed](ctx, c, http.MethodDelete, sessionPath(id, ""), nil)
}

// DiscardSession is DELETE /v1/sessions/{id}?discard=true: the session is
// removed without keeping its change set.
func (c *Client) DiscardSession(ctx context.Context, id string) (*api.Removed, error) {
	return answer[api.Removed](ctx, c, http.MethodDelete, sessionPath(id, "?discard=true"), nil)
}

// Profile is GET /v1/sessions/{id}/profile: the YAML of the profile the
// session recorded at creation (profiles.Parse reads it).
func (c *Client) Profile(ctx context.Context, id string) ([]byte, error) {
	return c.text(ctx, sessionPath(id, "/profile"))
}

// Prune is POST /v1/sessions/prune: idleFor is a Go duration, or "" for
// each session's own idle TTL.
func (c *Client) Prune(ctx context.Context, idleFor string) (*api.Pruned, error) {
	return answer[api.Pruned](ctx, c, http.MethodPost, "/v1/sessions/prune", api.Prune{IdleFor: idleFor})
}

// Check is POST /v1/sessions/{id}/check; a refusal is an error that
// errors.As turns into *allowlist.Refusal.
func (c *Client) Check(ctx context.Context, id string, argv []string) (*api.Decision, error) {
	return answer[api.Decision](ctx, c, http.MethodPost, sessionPath(id, "/check"), api.Check{Argv: argv})
}

// Exec is POST /v1/sessions/{id}/exec. When stdout or stderr is set the
// call is streamed: each receives its output as it arrives (a nil one
// discards its stream) and the result's Stdout and Stderr stay empty;
// otherwise the result holds the output. Canceling ctx cancels the call:
// the daemon kills the container.
func (c *Client) Exec(ctx context.Context, id string, argv []string, stdout, stderr io.Writer) (*api.ExecResult, error) {
	if stdout == nil && stderr == nil {
		return answer[api.ExecResult](ctx, c, http.MethodPost, sessionPath(id, "/exec"), api.Exec{Argv: argv})
	}
	resp, err := c.do(ctx, http.MethodPost, sessionPath(id, "/exec"), api.Exec{Argv: argv, Stream: true}, api.MediaNDJSON)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != api.MediaNDJSON {
		// Answered before any output: a plain result.
		var v api.ExecResult
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			return nil, fmt.Errorf("reading the daemon's answer: %w", err)
		}
		if stdout != nil {
			_, _ = stdout.Write(v.Stdout)
		}
		if stderr != nil {
			_, _ = stderr.Write(v.Stderr)
		}
		v.Stdout, v.Stderr = nil, nil
		return &v, nil
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev api.ExecEvent
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("reading the daemon's stream: %w", err)
		}
		switch {
		case ev.Stdout != nil:
			if stdout != nil {
				_, _ = stdout.Write(ev.Stdout)
			}
		case ev.Stderr != nil:
			if stderr != nil {
				_, _ = stderr.Write(ev.Stderr)
			}
		case ev.Result != nil:
			return ev.Result, nil
		case ev.Error != nil:
			return nil, newError(0, *ev.Error, nil)
		}
	}
}

// Read is POST /v1/sessions/{id}/files:read.
func (c *Client) Read(ctx context.Context, id string, req api.Read) (*api.ReadResult, error) {
	return answer[api.ReadResult](ctx, c, http.MethodPost, sessionPath(id, "/files:read"), req)
}

// List is POST /v1/sessions/{id}/files:list.
func (c *Client) List(ctx context.Context, id string, req api.List) (*api.ListResult, error) {
	return answer[api.ListResult](ctx, c, http.MethodPost, sessionPath(id, "/files:list"), req)
}

// Glob is POST /v1/sessions/{id}/files:glob.
func (c *Client) Glob(ctx context.Context, id string, req api.Glob) (*api.GlobResult, error) {
	return answer[api.GlobResult](ctx, c, http.MethodPost, sessionPath(id, "/files:glob"), req)
}

// Search is POST /v1/sessions/{id}/files:search.
func (c *Client) Search(ctx context.Context, id string, req api.Search) (*api.SearchResult, error) {
	return answer[api.SearchResult](ctx, c, http.MethodPost, sessionPath(id, "/files:search"), req)
}

// Write is POST /v1/sessions/{id}/files:write.
func (c *Client) Write(ctx context.Context, id string, req api.Write) (*api.WriteResult, error) {
	return answer[api.WriteResult](ctx, c, http.MethodPost, sessionPath(id, "/files:write"), req)
}

// Edit is POST /v1/sessions/{id}/files:edit.
func (c *Client) Edit(ctx context.Context, id string, req api.Edit) (*api.WriteResult, error) {
	return answer[api.WriteResult](ctx, c, http.MethodPost, sessionPath(id, "/files:edit"), req)
}

// Diff is GET /v1/sessions/{id}/diff?format=json.
func (c *Client) Diff(ctx context.Context, id string) (*api.ChangeSet, error) {
	return answer[api.ChangeSet](ctx, c, http.MethodGet, sessionPath(id, "/diff?format=json"), nil)
}

// DiffContents is GET /v1/sessions/{id}/diff?format=json&contents=true:
// the change set with each change's bytes.
func (c *Client) DiffContents(ctx context.Context, id string) (*api.ChangeSet, error) {
	return answer[api.ChangeSet](ctx, c, http.MethodGet, sessionPath(id, "/diff?format=json&contents=true"), nil)
}

// Patch is GET /v1/sessions/{id}/diff?format=patch: the change set as a
// git-style unified patch; a set with violations is an error that
// errors.As turns into *changeset.RejectedError.
func (c *Client) Patch(ctx context.Context, id string) ([]byte, error) {
	return c.text(ctx, sessionPath(id, "/diff?format=patch"))
}

// Stat is GET /v1/sessions/{id}/diff?format=stat.
func (c *Client) Stat(ctx context.Context, id string) (string, error) {
	b, err := c.text(ctx, sessionPath(id, "/diff?format=stat"))
	return string(b), err
}

func (c *Client) text(ctx context.Context, path string) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// Apply is POST /v1/sessions/{id}/apply. A refused apply or a conflict
// is an *Error that carries the report (Error.Report).
func (c *Client) Apply(ctx context.Context, id string, req api.Apply) (*api.Report, error) {
	return answer[api.Report](ctx, c, http.MethodPost, sessionPath(id, "/apply"), req)
}

// Patches is GET /v1/patches (Pod mode): the change sets kept when a
// session ended without discard, oldest first — every one for an admin,
// the calling Pod's own for a Pod.
func (c *Client) Patches(ctx context.Context) ([]api.PodPatch, error) {
	out, err := answer[[]api.PodPatch](ctx, c, http.MethodGet, "/v1/patches", nil)
	if err != nil {
		return nil, err
	}
	return *out, nil
}

// PodPatch is GET /v1/patches/{id} (an admin, or the Pod that owned the
// session): the kept patch of session id, a git-style unified patch.
func (c *Client) PodPatch(ctx context.Context, id string) ([]byte, error) {
	return c.text(ctx, "/v1/patches/"+url.PathEscape(id))
}

// RemovePatch is DELETE /v1/patches/{id} (an admin, or the Pod that owned
// the session): the kept patch and its record are removed, freeing the
// owner's --max-kept-patch-bytes budget.
func (c *Client) RemovePatch(ctx context.Context, id string) (*api.Removed, error) {
	return answer[api.Removed](ctx, c, http.MethodDelete, "/v1/patches/"+url.PathEscape(id), nil)
}
