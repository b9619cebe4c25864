package daemon

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/go-units"
)

// limiter holds the host-wide caps on the work that runs containers
// (exec, the file tools, and session creation):
//
//   - at most maxCalls at once (--max-running), each taking one slot;
//   - when maxMemory > 0 (--max-memory), the memory limits of the calls
//     running add up to at most maxMemory: a call reserves its profile's
//     memory limit, the limit its container's cgroup gets (memory.max), so
//     that however the calls use memory the node's never overcommits.
//     Session creation takes a slot and reserves no memory: the
//     containers it creates ahead run nothing until a call takes one.
//
// A call that does not fit waits in one FIFO queue up to wait, then fails
// with ErrBusy naming the cap that held it back. The queue is strict:
// a call that fits never passes one queued before it, so a call with a
// large limit is not starved by a stream of small ones. It keeps memory
// and CPU bounded under any number of clients.
type limiter struct {
	maxCalls  int
	maxMemory int64
	wait      time.Duration

	mu     sync.Mutex
	calls  int
	memory int64
	queue  []*waiter
}

// waiter is a queued call: ready is closed once it holds its slot and
// memory (granted).
type waiter struct {
	memory  int64
	ready   chan struct{}
	granted bool
}

// ErrBusy is a call that found a cap full for the whole queue wait. It
// wraps errdefs.ErrResourceExhausted; the API answers 429 kind busy.
// Cap and Wait name the call cap; when the call waited for memory
// instead, MemoryCap (--max-memory), Memory (the memory the running calls
// held) and Need (the call's own reservation) are set.
type ErrBusy struct {
	Cap  int
	Wait time.Duration

	MemoryCap, Memory, Need int64
}

func (e *ErrBusy) Error() string {
	if e.MemoryCap > 0 && e.Memory+e.Need <= e.MemoryCap {
		// It would fit, but the queue is strict and an earlier call
		// needs more than is free.
		return fmt.Sprintf("busy: running calls hold %s of the daemon's --max-memory %s and a call queued before this one (%s) needs more than is free; not enough freed within %s (--queue-wait); retry later",
			size(e.Memory), size(e.MemoryCap), size(e.Need), e.Wait)
	}
	if e.MemoryCap > 0 {
		return fmt.Sprintf("busy: running calls hold %s of the daemon's --max-memory %s and this call needs %s (its profile's memory limit); not enough freed within %s (--queue-wait); retry later",
			size(e.Memory), size(e.MemoryCap), size(e.Need), e.Wait)
	}
	return fmt.Sprintf("busy: %d calls are running (the daemon's --max-running) and no slot freed within %s (--queue-wait); retry later", e.Cap, e.Wait)
}

// Unwrap returns errdefs.ErrResourceExhausted.
func (e *ErrBusy) Unwrap() error { return errdefs.ErrResourceExhausted }

// ErrCallMemory is a profile whose memory limit per call is above the
// daemon's --max-memory: no call of it could ever run. Session creation
// refuses such a profile; a session made before the cap was lowered gets
// it on each call. It wraps errdefs.ErrResourceExhausted (422 limit).
type ErrCallMemory struct {
	Profile   string
	Limit     int64
	MemoryCap int64
}

func (e *ErrCallMemory) Error() string {
	return fmt.Sprintf("profile %q: its memory limit of %s per call is above the daemon's --max-memory %s; use a profile with a smaller resources.memory",
		e.Profile, size(e.Limit), size(e.MemoryCap))
}

// Unwrap returns errdefs.ErrResourceExhausted.
func (e *ErrCallMemory) Unwrap() error { return errdefs.ErrResourceExhausted }

// size writes n bytes in binary units ("512MiB").
func size(n int64) string { return units.BytesSize(float64(n)) }

func newLimiter(calls int, memory int64, wait time.Duration) *limiter {
	return &limiter{maxCalls: calls, maxMemory: memory, wait: wait}
}

// fits reports whether a call reserving memory can start now; l.mu held.
func (l *limiter) fits(memory int64) bool {
	return l.calls < l.maxCalls && (l.maxMemory <= 0 || l.memory+memory <= l.maxMemory)
}

// take counts a call reserving memory as running; l.mu held.
func (l *limiter) take(memory int64) {
	l.calls++
	l.memory += memory
}

// acquire takes a slot and reserves memory bytes (profile is the
// session's profile, for the error of a call that can never fit), waiting
// up to l.wait; the caller must call the returned release once its
// container is gone.
func (l *limiter) acquire(ctx context.Context, profile string, memory int64) (release func(), err error) {
	if l.maxMemory > 0 && memory > l.maxMemory {
		return nil, &ErrCallMemory{Profile: profile, Limit: memory, MemoryCap: l.maxMemory}
	}
	release = func() { l.release(memory) }
	l.mu.Lock()
	if len(l.queue) == 0 && l.fits(memory) {
		l.take(memory)
		l.mu.Unlock()
		return release, nil
	}
	w := &waiter{memory: memory, ready: make(chan struct{})}
	l.queue = append(l.queue, w)
	l.mu.Unlock()

	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case <-w.ready:
		return release, nil
	case <-t.C:
		err = l.busy(memory)
	case <-ctx.Done():
		err = ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted {
		// Granted as the wait ended: keep it rather than drop it.
		return release, nil
	}
	for i, x := range l.queue {
		if x == w {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			break
		}
	}
	l.grant() // the head may have left
	return nil, err
}

// busy is the error of a call that waited in vain: the call cap when it
// is full, else the memory cap.
func (l *limiter) busy(memory int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls >= l.maxCalls || l.maxMemory <= 0 {
		return &ErrBusy{Cap: l.maxCalls, Wait: l.wait}
	}
	return &ErrBusy{Cap: l.maxCalls, Wait: l.wait, MemoryCap: l.maxMemory, Memory: l.memory, Need: memory}
}

func (l *limiter) release(memory int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls--
	l.memory -= memory
	l.grant()
}

// grant starts the queued calls that fit, in order, stopping at the
// first that does not; l.mu held.
func (l *limiter) grant() {
	for len(l.queue) > 0 && l.fits(l.queue[0].memory) {
		w := l.queue[0]
		l.queue = l.queue[1:]
		l.take(w.memory)
		w.granted = true
		close(w.ready)
	}
}

// state returns the calls running and waiting and the memory they hold.
func (l *limiter) state() (running, waiting int, memory int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls, len(l.queue), l.memory
}
