package sandbox

import (
	"context"
	"sync"
	"time"
)

// maxWarmAge is the time before its call's timeout starts that every
// container's deadline label and lease expiry grant it (runner.create:
// the label is created + maxWarmAge + the profile's timeout + InitGrace,
// the lease's expiry a minute later; a sweep of any corral reaps what
// passed its label, live owner or not).
//
// Invariant: a live call never passes its container's deadline label or
// lease expiry. A container created on the call starts at once. One
// created ahead waits at most maxTakeAge (take destroys an older one),
// and its call then holds it at most callSlack beyond the timeout, so it
// is destroyed by created + maxWarmAge + timeout, before its label.
const maxWarmAge = 30 * time.Minute

// callSlack is how long a call may hold its container beyond the
// profile's timeout, counted from the take: send's wait for the init to
// open its FIFO (sendWait) or, for a container not started ahead, the
// start (startWait), the kill at the limit and the exit (killWait), the
// output's copy (ioWait, twice: the wait, then the wait for the copy to
// stop once its FIFOs are closed; the time the copy waits on the
// caller's own writer is the caller's), then destroy (destroyWait for
// containerd, then cgroupSettle for the cgroups the runtime left): 80 s,
// and a margin. A take as late as
// maxWarmAge with no slack let a call outlive its label: taken at
// 29:59.5, its request sent up to 10 s later, its tool killed at the
// timeout after that (30:09.5 + the timeout), while any sweep reaps it
// from 30:02 + the timeout (TestCallFitsItsDeadline).
const callSlack = 90 * time.Second

// maxTakeAge is the age of the oldest container created ahead that take
// hands out: the label leaves its call callSlack beyond the timeout, and
// its corral-init, which waits at most initctl.MaxWait for a request,
// gets it by maxTakeAge + sendWait.
const maxTakeAge = maxWarmAge - callSlack

// takeable reports whether a container created ahead at created may
// still be handed to a call at now (maxTakeAge).
func takeable(created, now time.Time) bool {
	return now.Sub(created) <= maxTakeAge
}

// DefaultMaxWarm is the executor-wide cap on containers created ahead
// when Config.MaxWarm is 0. Each waiting container holds about 1.3 MiB
// of charged memory and 6-7 pids (corral-init blocked on its FIFO, the
// runtime's shim).
const DefaultMaxWarm = 16

// DefaultPoolIdle is how long a session's pool keeps the depth its
// bursts grew it to after its last call (Config.PoolIdle when 0); then
// it shrinks back to the profile's pool_depth, destroying the extra
// containers.
const DefaultPoolIdle = time.Minute

// warmCap is the executor-wide cap on containers created ahead: a token
// per container, taken before it is created, given back when it is taken
// for a call or destroyed unused. Sessions beyond the cap run their calls
// on containers created on the call.
//
// Fairness: a container beyond its session's floor (pool_depth) takes a
// token only while more than reserve stay free, so that sessions grown
// by bursts never take the slots other sessions' floors need; one
// session grows to at most half the cap (pool.max); and the sessions of
// one owner (an opaque key the launcher gives, SessionConfig.WarmOwner:
// the daemon's uid or Pod) grow beyond their floors only while they hold,
// all together and floors included, fewer than half the cap
// (ownerMax), so that one owner's many sessions never take the bursts
// of the others. Floors are always served, whatever their owner holds.
// Sessions without an owner key are bound by the first two rules only.
// It also keeps the figures WarmState reports. warmCap.mu is taken under
// pool.mu, never the reverse.
type warmCap struct {
	mu       sync.Mutex
	max      int            // tokens
	reserve  int            // tokens a container beyond its floor leaves free
	ownerMax int            // tokens an owner's sessions may hold and still grow
	held     int            // tokens taken: ready containers and creations in flight
	owners   map[string]int // tokens taken, per owner key (none for "")
	ready    int            // containers ready in every pool
	filling  int            // pools whose refill runs
	wanted   int            // the pools' current depths, summed
	hits     int            // takes that found a container ready, ever
	misses   int            // takes that found none (the call created its own), ever
}

func newWarmCap(max int) *warmCap {
	return &warmCap{max: max, reserve: max / 4, ownerMax: max / 2, owners: map[string]int{}}
}

// tryAcquire takes a token for owner (a pool's WarmOwner; "" for none);
// extra (a container beyond its session's floor) only while more than
// reserve stay free and owner holds fewer than ownerMax.
func (w *warmCap) tryAcquire(owner string, extra bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	free := w.max - w.held
	if free <= 0 || (extra && free <= w.reserve) {
		return false
	}
	if extra && owner != "" && w.owners[owner] >= w.ownerMax {
		return false
	}
	w.held++
	if owner != "" {
		w.owners[owner]++
	}
	return true
}

// release gives back n tokens of owner.
func (w *warmCap) release(owner string, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held -= n
	if owner == "" {
		return
	}
	if w.owners[owner] -= n; w.owners[owner] <= 0 {
		delete(w.owners, owner)
	}
}

// took counts a take that found a container ready (hit) or none.
func (w *warmCap) took(hit bool) {
	w.mu.Lock()
	if hit {
		w.hits++
	} else {
		w.misses++
	}
	w.mu.Unlock()
}

// add moves the figures by the given deltas.
func (w *warmCap) add(ready, filling, wanted int) {
	w.mu.Lock()
	w.ready += ready
	w.filling += filling
	w.wanted += wanted
	w.mu.Unlock()
}

// WarmState is the executor's containers created ahead, now: Ready wait
// for a call, Wanted is the depth every open session's pool aims at (its
// floor, or more after bursts), Filling pools are creating more, Held
// tokens of Cap are taken (ready and in creation). Hits and Misses count
// the calls, since the executor started, that found a container ready
// and that found none (and created their own).
type WarmState struct {
	Ready, Wanted, Filling, Held, Cap int
	Hits, Misses                      int
}

func (w *warmCap) state() WarmState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WarmState{Ready: w.ready, Wanted: w.wanted, Filling: w.filling, Held: w.held, Cap: w.max, Hits: w.hits, Misses: w.misses}
}

// pool keeps containers of one session made ahead of the calls
// (runner.createAhead: started, their corral-init waiting for the
// request, where the runtime allows; else created, not started), refilled
// one at a time in the background after each take.
//
// Its depth learns the session's bursts: it starts at floor (the
// profile's pool_depth); a take that finds the pool empty (a miss)
// doubles it, up to max (the profile's pool_max_depth, and at most half
// the executor's cap; a container beyond the floor also needs its owner's
// share of the cap, warmCap); after idle without a take it shrinks back to
// floor and the extra containers are destroyed. A call that finds the
// pool empty creates its own.
//
// One creation at a time: measured with back-to-back calls on two loaded
// cores, where calls empty the pool faster than creations refill it,
// making the missing containers side by side, or having the call wait
// for the creation in flight instead of creating its own, both raised
// the calls' p50 (every call then waits for a creation).
type pool struct {
	floor, max int
	owner      string        // the session's owner key (warmCap); "" for none
	idle       time.Duration // 0: DefaultPoolIdle
	cap        *warmCap
	create     func(context.Context) (*container, error)
	destroy    func(*container)

	mu       sync.Mutex
	depth    int // floor to max; 0 until init
	ready    []*container
	filling  bool
	closed   bool
	lastTake time.Time
	shrink   *time.Timer
	wg       sync.WaitGroup
}

// newPool is a pool of depth floor growing up to maxDepth (lowered to
// half of the cap's tokens, never below floor), whose containers count
// against owner's share of the cap ("" for none).
func newPool(floor, maxDepth int, idle time.Duration, cap *warmCap, owner string, create func(context.Context) (*container, error), destroy func(*container)) *pool {
	maxDepth = max(floor, min(maxDepth, cap.max/2))
	if idle <= 0 {
		idle = DefaultPoolIdle
	}
	p := &pool{floor: floor, max: maxDepth, owner: owner, idle: idle, cap: cap, create: create, destroy: destroy, depth: floor}
	cap.add(0, 0, floor)
	return p
}

// take returns a container created ahead, or nil; a container older than
// maxTakeAge is destroyed instead. A miss grows the pool's depth. It
// starts a refill.
func (p *pool) take() *container {
	p.mu.Lock()
	var c *container
	var stale []*container
	for len(p.ready) > 0 && c == nil {
		c, p.ready = p.ready[0], p.ready[1:]
		p.cap.release(p.owner, 1)
		p.cap.add(-1, 0, 0)
		if !takeable(c.created, time.Now()) {
			stale, c = append(stale, c), nil
		}
	}
	if p.floor > 0 && !p.closed {
		p.cap.took(c != nil)
		p.lastTake = time.Now()
		if c == nil && p.depth < p.max {
			grown := min(p.depth*2, p.max)
			p.cap.add(0, 0, grown-p.depth)
			p.depth = grown
		}
		if p.depth > p.floor && p.shrink == nil {
			p.shrink = time.AfterFunc(p.idle, p.shrinkIfIdle)
		}
	}
	p.mu.Unlock()
	for _, s := range stale {
		p.destroy(s)
	}
	p.refill()
	return c
}

// shrinkIfIdle brings the depth back to floor once idle passed since the
// last take, destroying the containers beyond it; else it checks again
// when idle will have passed.
func (p *pool) shrinkIfIdle() {
	p.mu.Lock()
	if p.closed {
		p.shrink = nil
		p.mu.Unlock()
		return
	}
	if wait := p.idle - time.Since(p.lastTake); wait > 0 {
		p.shrink.Reset(wait)
		p.mu.Unlock()
		return
	}
	p.shrink = nil
	p.cap.add(0, 0, p.floor-p.depth)
	p.depth = p.floor
	var extra []*container
	if len(p.ready) > p.floor {
		extra = append(extra, p.ready[p.floor:]...)
		p.ready = p.ready[:p.floor]
		p.cap.release(p.owner, len(extra))
		p.cap.add(-len(extra), 0, 0)
	}
	p.wg.Add(1) // under mu while not closed: close waits for it
	p.mu.Unlock()
	defer p.wg.Done()
	for _, c := range extra {
		p.destroy(c)
	}
}

// Depth is the pool's depth now.
func (p *pool) Depth() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.depth
}

// refill creates containers in one background goroutine until depth are
// ready, the executor's cap is reached, a creation fails (the next call
// creates its own and reports the error) or the pool closes.
func (p *pool) refill() {
	if p.floor <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.filling || p.closed || len(p.ready) >= p.depth {
		return
	}
	p.filling = true
	p.cap.add(0, 1, 0)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			p.mu.Lock()
			n := len(p.ready)
			if p.closed || n >= p.depth || !p.cap.tryAcquire(p.owner, n >= p.floor) {
				p.stopFilling()
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			c, err := p.create(context.Background())
			p.mu.Lock()
			if err != nil || p.closed || len(p.ready) >= p.depth {
				// Failed, closed, or shrunk while it was made.
				p.cap.release(p.owner, 1)
				p.stopFilling()
				p.mu.Unlock()
				if c != nil {
					p.destroy(c)
				}
				return
			}
			p.ready = append(p.ready, c)
			p.cap.add(1, 0, 0)
			p.mu.Unlock()
		}
	}()
}

// stopFilling marks the refill ended; p.mu is held.
func (p *pool) stopFilling() {
	p.filling = false
	p.cap.add(0, -1, 0)
}

// drain destroys every container waiting in the pool; refills may start
// again afterwards unless the pool is closed.
func (p *pool) drain() {
	for _, c := range p.takeAll() {
		p.destroy(c)
	}
}

// takeAll removes every ready container from the pool and returns them
// for the caller to destroy (drain without the destroys: a call hands
// them to the background, so it does not wait on their shims).
func (p *pool) takeAll() []*container {
	p.mu.Lock()
	defer p.mu.Unlock()
	ready := p.ready
	p.ready = nil
	p.cap.release(p.owner, len(ready))
	p.cap.add(-len(ready), 0, 0)
	return ready
}

// stop stops refilling for good and destroys what is ready; a refill in
// progress destroys what it makes.
func (p *pool) stop() {
	p.markClosed()
	p.drain()
}

// close is stop, after waiting for a refill or shrink in progress.
func (p *pool) close() {
	p.markClosed()
	p.wg.Wait()
	p.drain()
}

// markClosed closes the pool once: no refill or growth after it, and its
// depth no longer counts in the executor's figures.
func (p *pool) markClosed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	if p.shrink != nil {
		p.shrink.Stop()
		p.shrink = nil
	}
	p.cap.add(0, 0, -p.depth)
}
