package sandbox

import (
	"context"
	"sync"
	"time"
)

// maxWarmAge is how long a container created ahead may wait for a call;
// an older one is destroyed instead of used. It bounds the deadline label
// every container carries (a sweep reaps what passed it).
const maxWarmAge = 30 * time.Minute

// DefaultMaxWarm is the executor-wide cap on containers created ahead
// when Config.MaxWarm is 0.
const DefaultMaxWarm = 8

// warmCap is the executor-wide cap on containers created ahead: a token
// per container, taken before it is created, given back when it is taken
// for a call or destroyed unused. Sessions beyond the cap run their calls
// on containers created on the call.
type warmCap chan struct{}

func (w warmCap) tryAcquire() bool {
	select {
	case w <- struct{}{}:
		return true
	default:
		return false
	}
}

func (w warmCap) release() { <-w }

// pool keeps up to depth containers of one session made ahead of the
// calls (runner.createAhead: started, their corral-init waiting for the
// request, where the runtime allows; else created, not started), refilled
// one at a time in the background after each take so that the refill
// never competes with more than the call that triggered it. A call that
// finds the pool empty creates its own. Measured with back-to-back calls
// on two loaded cores, where calls empty the pool faster than creations
// refill it: making the missing containers side by side, or having the
// call wait for the creation in flight instead of creating its own, both
// raised the calls' p50 (every call then waits for a creation; as it is,
// about half find one ready).
type pool struct {
	depth   int
	cap     warmCap
	create  func(context.Context) (*container, error)
	destroy func(*container)

	mu      sync.Mutex
	ready   []*container
	filling bool
	closed  bool
	wg      sync.WaitGroup
}

// take returns a container created ahead, or nil; a container older than
// maxWarmAge is destroyed instead. It starts a refill.
func (p *pool) take() *container {
	p.mu.Lock()
	var c *container
	var stale []*container
	for len(p.ready) > 0 && c == nil {
		c, p.ready = p.ready[0], p.ready[1:]
		p.cap.release()
		if time.Since(c.created) > maxWarmAge {
			stale, c = append(stale, c), nil
		}
	}
	p.mu.Unlock()
	for _, s := range stale {
		p.destroy(s)
	}
	p.refill()
	return c
}

// refill creates containers in one background goroutine until depth are
// ready, the executor's cap is reached, a creation fails (the next call
// creates its own and reports the error) or the pool closes.
func (p *pool) refill() {
	if p.depth <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.filling || p.closed || len(p.ready) >= p.depth {
		return
	}
	p.filling = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			p.mu.Lock()
			if p.closed || len(p.ready) >= p.depth || !p.cap.tryAcquire() {
				p.filling = false
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			c, err := p.create(context.Background())
			p.mu.Lock()
			if err != nil || p.closed {
				p.cap.release()
				p.filling = false
				p.mu.Unlock()
				if c != nil {
					p.destroy(c)
				}
				return
			}
			p.ready = append(p.ready, c)
			p.mu.Unlock()
		}
	}()
}

// drain destroys every container waiting in the pool; refills may start
// again afterwards unless the pool is closed.
func (p *pool) drain() {
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	for range ready {
		p.cap.release()
	}
	p.mu.Unlock()
	for _, c := range ready {
		p.destroy(c)
	}
}

// stop stops refilling for good and destroys what is ready; a refill in
// progress destroys what it makes.
func (p *pool) stop() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.drain()
}

// close is stop, after waiting for a refill in progress.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
	p.drain()
}
