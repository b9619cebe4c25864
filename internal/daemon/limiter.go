package daemon

import (
	"context"
	"fmt"
	"slices"
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
//     containers it creates ahead run nothing until a call takes one;
//   - when perOwner > 0 (--max-running-per-uid), one owner whose calls are
//     capped (every uid but the admins', in Pod mode every Pod) runs at
//     most perOwner calls at once, so that slots always stay for others:
//     calls that run for their whole timeout (up to a profile's 24h)
//     could otherwise hold every slot and leave every other caller
//     nothing but 429 busy.
//
// A call that does not fit waits in one queue up to wait, then fails
// with ErrBusy naming the cap that held it back. The queue is fair
// between owners (a uid, in Pod mode a Pod: ownerKey) and strict: the
// next call to start is the queued call of the owner running the fewest
// calls now, among equals the one whose last call started longest ago,
// and of that owner the earliest queued (so one owner's calls start in
// the order they came); while that call does not fit no other starts, so a call with a large limit is not starved by a stream of small
// ones. One owner flooding the daemon thus delays another's call by the
// calls running, never by its own queue. It keeps memory and CPU bounded
// under any number of clients.
type limiter struct {
	maxCalls  int
	maxMemory int64
	wait      time.Duration
	perOwner  int

	mu     sync.Mutex
	calls  int
	memory int64
	queue  []*waiter
	// byOwner counts the calls running per owner.
	byOwner map[string]int
	// started is when (in grants) each owner's last call started, kept
	// while the owner runs or queues a call; granted counts the grants.
	started map[string]uint64
	granted uint64
}

// waiter is a queued call of owner (capped: perOwner applies to it):
// ready is closed once it holds its slot and memory (granted).
type waiter struct {
	owner   string
	capped  bool
	memory  int64
	ready   chan struct{}
	granted bool
}

// ErrBusy is a call that found a cap full for the whole queue wait. It
// wraps errdefs.ErrResourceExhausted; the API answers 429 kind busy.
// Cap and Wait name the call cap; when the call waited for memory
// instead, MemoryCap (--max-memory), Memory (the memory the running calls
// held) and Need (the call's own reservation) are set; when it waited
// for its owner's own calls (--max-running-per-uid), Owner and OwnerCap.
type ErrBusy struct {
	Cap  int
	Wait time.Duration

	MemoryCap, Memory, Need int64

	Owner    string
	OwnerCap int
}

func (e *ErrBusy) Error() string {
	if e.OwnerCap > 0 {
		return fmt.Sprintf("busy: %s runs %d calls already (the daemon's --max-running-per-uid) and none ended within %s (--queue-wait); retry later",
			e.Owner, e.OwnerCap, e.Wait)
	}
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

// DefaultMaxRunningPerUID is the daemon's default --max-running-per-uid
// for maxRunning calls at once: a quarter of the slots (at least one)
// stays for the other owners, all of them when maxRunning is 1.
func DefaultMaxRunningPerUID(maxRunning int) int {
	return max(1, maxRunning-max(1, maxRunning/4))
}

func newLimiter(calls int, memory int64, wait time.Duration, perOwner int) *limiter {
	return &limiter{maxCalls: calls, maxMemory: memory, wait: wait, perOwner: perOwner, byOwner: map[string]int{}, started: map[string]uint64{}}
}

// fits reports whether a call reserving memory can start now; l.mu held.
func (l *limiter) fits(memory int64) bool {
	return l.calls < l.maxCalls && (l.maxMemory <= 0 || l.memory+memory <= l.maxMemory)
}

// atOwnerCap reports whether owner runs its perOwner calls already (a
// capped owner only); l.mu held.
func (l *limiter) atOwnerCap(owner string, capped bool) bool {
	return capped && l.perOwner > 0 && l.byOwner[owner] >= l.perOwner
}

// take counts a call of owner reserving memory as running; l.mu held.
func (l *limiter) take(owner string, memory int64) {
	l.calls++
	l.memory += memory
	l.byOwner[owner]++
	l.granted++
	l.started[owner] = l.granted
}

// forget drops what l keeps of owner once it neither runs nor queues a
// call; l.mu held.
func (l *limiter) forget(owner string) {
	if l.byOwner[owner] > 0 || slices.ContainsFunc(l.queue, func(w *waiter) bool { return w.owner == owner }) {
		return
	}
	delete(l.byOwner, owner)
	delete(l.started, owner)
}

// acquire takes a slot for a call of owner (capped: --max-running-per-uid
// applies) and reserves memory bytes (profile is the session's profile,
// for the error of a call that can never fit), waiting up to l.wait; the
// caller must call the returned release once its container is gone
// (release is idempotent: a handler releases as soon as its call is
// done and again, deferred, on every other way out).
func (l *limiter) acquire(ctx context.Context, owner string, capped bool, profile string, memory int64) (release func(), err error) {
	if l.maxMemory > 0 && memory > l.maxMemory {
		return nil, &ErrCallMemory{Profile: profile, Limit: memory, MemoryCap: l.maxMemory}
	}
	release = sync.OnceFunc(func() { l.release(owner, memory) })
	l.mu.Lock()
	if len(l.queue) == 0 && l.fits(memory) && !l.atOwnerCap(owner, capped) {
		l.take(owner, memory)
		l.mu.Unlock()
		return release, nil
	}
	w := &waiter{owner: owner, capped: capped, memory: memory, ready: make(chan struct{})}
	l.queue = append(l.queue, w)
	// It may be the next to start (its owner runs fewer calls than the
	// others waiting), and fit.
	l.grant()
	l.mu.Unlock()

	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case <-w.ready:
		return release, nil
	case <-t.C:
		err = l.busy(owner, capped, memory)
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
	l.forget(owner)
	l.grant() // the next may have left
	return nil, err
}

// busy is the error of a call that waited in vain: its owner's cap when
// it is full, the call cap when it is full, else the memory cap.
func (l *limiter) busy(owner string, capped bool, memory int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.atOwnerCap(owner, capped) {
		return &ErrBusy{Cap: l.maxCalls, Wait: l.wait, Owner: owner, OwnerCap: l.perOwner}
	}
	if l.calls >= l.maxCalls || l.maxMemory <= 0 {
		return &ErrBusy{Cap: l.maxCalls, Wait: l.wait}
	}
	return &ErrBusy{Cap: l.maxCalls, Wait: l.wait, MemoryCap: l.maxMemory, Memory: l.memory, Need: memory}
}

func (l *limiter) release(owner string, memory int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls--
	l.memory -= memory
	l.byOwner[owner]--
	l.forget(owner)
	l.grant()
}

// next returns the index in l.queue of the call to start next, or -1
// for none: of the owners not at their own cap (atOwnerCap), the one
// running the fewest calls, among equals the one whose last call started
// longest ago; of its calls the earliest queued. l.mu held.
func (l *limiter) next() int {
	best := -1
	for i, w := range l.queue {
		if l.atOwnerCap(w.owner, w.capped) {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := l.queue[best].owner
		if n, m := l.byOwner[w.owner], l.byOwner[b]; n < m || n == m && l.started[w.owner] < l.started[b] {
			best = i
		}
	}
	return best
}

// grant starts queued calls while the next one (next) fits, stopping at
// the first that does not; l.mu held.
func (l *limiter) grant() {
	for {
		i := l.next()
		if i < 0 {
			return
		}
		w := l.queue[i]
		if !l.fits(w.memory) {
			return
		}
		l.queue = append(l.queue[:i], l.queue[i+1:]...)
		l.take(w.owner, w.memory)
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
