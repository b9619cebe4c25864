package daemon

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
)

// limiter is the host-wide cap on calls that run a container (exec and
// the file tools): at most cap at once; a call over it waits up to wait
// for a slot, then fails with ErrBusy. It keeps memory and CPU bounded
// under any number of clients; the order among waiters is the runtime's
// (channel receivers are served first come, first served).
type limiter struct {
	slots   chan struct{}
	wait    time.Duration
	waiting atomic.Int64
}

// ErrBusy is a call that found the cap full for the whole queue wait. It
// wraps errdefs.ErrResourceExhausted; the API answers 429 kind busy.
type ErrBusy struct {
	Cap  int
	Wait time.Duration
}

func (e *ErrBusy) Error() string {
	return fmt.Sprintf("busy: %d calls are running (the daemon's --max-running) and no slot freed within %s (--queue-wait); retry later", e.Cap, e.Wait)
}

// Unwrap returns errdefs.ErrResourceExhausted.
func (e *ErrBusy) Unwrap() error { return errdefs.ErrResourceExhausted }

func newLimiter(n int, wait time.Duration) *limiter {
	return &limiter{slots: make(chan struct{}, n), wait: wait}
}

// acquire takes a slot, waiting up to l.wait; the caller must call the
// returned release once its container is gone.
func (l *limiter) acquire(ctx context.Context) (release func(), err error) {
	select {
	case l.slots <- struct{}{}:
		return l.release, nil
	default:
	}
	l.waiting.Add(1)
	defer l.waiting.Add(-1)
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return l.release, nil
	case <-t.C:
		return nil, &ErrBusy{Cap: cap(l.slots), Wait: l.wait}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *limiter) release() { <-l.slots }

func (l *limiter) running() int { return len(l.slots) }
