package daemon

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/corral-sandbox/corral/sandbox/api"
)

// streamStall is how long one write of a streamed exec may wait for the
// client to read before the client is deemed gone and the call canceled.
const streamStall = 60 * time.Second

// stream turns a streamed exec's output into NDJSON lines (api.ExecEvent)
// without ever making the tool wait for the client: the tool's output is
// appended to a per-call queue (bounded by the profile's output cap, which
// the sandbox applies before anything reaches here) and one goroutine
// writes the queue to the client. A slow reader slows only its own
// goroutine; the call's container exits, and frees its slot, at its own
// pace. Nothing is written before the first output, so a call refused or
// failed before any output gets an ordinary error answer.
type stream struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	cancel func() // cancels the call when the client stalls

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []chunk
	final   *api.ExecEvent
	done    bool // no more events
	started bool // the header is written
	failed  bool // a write to the client failed
	ended   chan struct{}
}

type chunk struct {
	stderr bool
	data   []byte
}

func newStream(w http.ResponseWriter, cancel func()) *stream {
	s := &stream{w: w, rc: http.NewResponseController(w), cancel: cancel, ended: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	go s.pump()
	return s
}

// sink is the io.Writer of one of the tool's streams.
type sink struct {
	s      *stream
	stderr bool
}

// Write queues p; it never blocks on the client.
func (k sink) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s := k.s
	s.mu.Lock()
	if !s.failed {
		// Consecutive output of one stream is merged into one line.
		if n := len(s.queue); n > 0 && s.queue[n-1].stderr == k.stderr {
			s.queue[n-1].data = append(s.queue[n-1].data, p...)
		} else {
			s.queue = append(s.queue, chunk{stderr: k.stderr, data: append([]byte(nil), p...)})
		}
		s.cond.Signal()
	}
	s.mu.Unlock()
	return len(p), nil
}

func (s *stream) stdout() sink { return sink{s: s} }
func (s *stream) stderr() sink { return sink{s: s, stderr: true} }

// finish ends the stream with ev (a result or an error). It reports false
// when nothing was written yet: the caller then answers as for an
// unstreamed call, and the stream writes nothing more.
func (s *stream) finish(ev *api.ExecEvent) bool {
	s.mu.Lock()
	if !s.started && len(s.queue) == 0 {
		s.done = true
		s.cond.Signal()
		s.mu.Unlock()
		<-s.ended
		return false
	}
	s.final = ev
	s.done = true
	s.cond.Signal()
	s.mu.Unlock()
	<-s.ended
	return true
}

func (s *stream) pump() {
	defer close(s.ended)
	enc := json.NewEncoder(writerFunc(func(p []byte) (int, error) {
		_ = s.rc.SetWriteDeadline(time.Now().Add(streamStall))
		return s.w.Write(p)
	}))
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.done {
			s.cond.Wait()
		}
		if len(s.queue) == 0 && s.done && (s.final == nil || s.failed) {
			s.mu.Unlock()
			return
		}
		batch := s.queue
		s.queue = nil
		final := s.final
		last := len(batch) == 0 && s.done
		if !s.started {
			s.started = true
			s.w.Header().Set("Content-Type", api.MediaNDJSON)
			s.w.Header().Set("X-Content-Type-Options", "nosniff")
			s.w.WriteHeader(http.StatusOK)
		}
		s.mu.Unlock()
		var err error
		for _, c := range batch {
			ev := api.ExecEvent{Stdout: c.data}
			if c.stderr {
				ev = api.ExecEvent{Stderr: c.data}
			}
			if err = enc.Encode(ev); err != nil {
				break
			}
		}
		if err == nil && last && final != nil {
			err = enc.Encode(final)
		}
		if err == nil {
			err = s.rc.Flush()
		}
		if err != nil {
			s.mu.Lock()
			s.failed = true
			s.queue = nil
			s.mu.Unlock()
			s.cancel()
			// Drain until finish: the tool must never block on us.
			s.mu.Lock()
			for !s.done {
				s.cond.Wait()
			}
			s.mu.Unlock()
			return
		}
		if last {
			return
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
