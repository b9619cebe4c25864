package sandbox

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/initctl"
	"github.com/stretchr/testify/require"
)

// fakeContainers counts what a pool creates and destroys.
type fakeContainers struct {
	hold               sync.Mutex // held: creations wait
	mu                 sync.Mutex
	created, destroyed int
	fail               bool
}

func (f *fakeContainers) create(context.Context) (*container, error) {
	f.hold.Lock()
	f.hold.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return nil, errors.New("no containerd")
	}
	f.created++
	return &container{created: time.Now()}, nil
}

func (f *fakeContainers) destroy(*container) {
	f.mu.Lock()
	f.destroyed++
	f.mu.Unlock()
}

func (f *fakeContainers) counts() (created, destroyed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.created, f.destroyed
}

func (p *pool) readyNow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

func TestPoolDepthAndCap(t *testing.T) {
	cap := newWarmCap(3)
	fa, fb := &fakeContainers{}, &fakeContainers{}
	// Fixed depth 2 (max = floor).
	a := newPool(2, 2, 0, cap, "", fa.create, fa.destroy)
	b := newPool(2, 2, 0, cap, "", fb.create, fb.destroy)
	require.Nil(t, a.take(), "nothing ready before a refill")
	a.wg.Wait()
	require.Equal(t, 2, fa.created, "filled to its depth")
	b.refill()
	b.wg.Wait()
	require.Equal(t, 1, fb.created, "the executor-wide cap stops the second pool")
	require.NotNil(t, a.take())
	a.wg.Wait()
	require.Equal(t, 2, a.readyNow(), "refilled after a take")
	require.Equal(t, WarmState{Ready: 3, Wanted: 4, Held: 3, Cap: 3, Hits: 1, Misses: 1}, cap.state(), "tokens: a's two, b's one")

	// A container older than maxWarmAge is destroyed, not used.
	a.mu.Lock()
	for _, c := range a.ready {
		c.created = time.Now().Add(-2 * maxWarmAge)
	}
	a.mu.Unlock()
	fa.fail = true
	require.Nil(t, a.take())
	a.wg.Wait()
	require.Equal(t, 2, fa.destroyed)
	require.Zero(t, a.readyNow(), "a failed refill stops")

	b.stop()
	require.Equal(t, 1, fb.destroyed)
	b.refill()
	b.wg.Wait()
	require.Equal(t, 1, fb.created, "a stopped pool never refills")
	a.close()
	require.Equal(t, WarmState{Cap: 3, Hits: 1, Misses: 2}, cap.state(), "every token given back, no pool counted")
}

// drainAndRefill takes every ready container of p, then one more (a
// miss), with f's creations held meanwhile, and waits for the refill; it
// returns how many calls found one.
func drainAndRefill(p *pool, f *fakeContainers) int {
	hits := 0
	f.hold.Lock()
	for p.take() != nil {
		hits++
	}
	f.hold.Unlock()
	p.wg.Wait()
	return hits
}

func TestPoolGrowsOnMisses(t *testing.T) {
	cap := newWarmCap(32)
	f := &fakeContainers{}
	p := newPool(2, 8, time.Hour, cap, "", f.create, f.destroy)
	defer p.close()
	p.refill()
	p.wg.Wait()
	require.Equal(t, 2, p.readyNow())
	// Each drained burst ends with a miss, which doubles the depth.
	for _, want := range []struct{ hits, depth int }{{2, 4}, {4, 8}, {8, 8}, {8, 8}} {
		require.Equal(t, want.hits, drainAndRefill(p, f))
		require.Equal(t, want.depth, p.Depth(), "never past the session's max")
		require.Equal(t, want.depth, p.readyNow())
	}
	st := cap.state()
	require.Equal(t, 8, st.Wanted)
	require.Equal(t, 2+4+8+8, st.Hits)
	require.Equal(t, 4, st.Misses, "one miss per drained burst")
}

func TestPoolMaxIsHalfTheCap(t *testing.T) {
	cap := newWarmCap(8)
	f := &fakeContainers{}
	p := newPool(2, 16, time.Hour, cap, "", f.create, f.destroy)
	defer p.close()
	require.Equal(t, 4, p.max, "one session grows to at most half the host cap")
	for range 4 {
		drainAndRefill(p, f)
	}
	require.Equal(t, 4, p.Depth())
	require.Equal(t, 4, p.readyNow())
	// A floor above half the cap stays the floor.
	q := newPool(6, 6, time.Hour, cap, "", f.create, f.destroy)
	defer q.close()
	require.Equal(t, 6, q.max)
}

func TestPoolShrinksWhenIdle(t *testing.T) {
	cap := newWarmCap(32)
	f := &fakeContainers{}
	// An idle time far above the test's own steps (20 ms sleeps, fake
	// creations): a loaded machine must not shrink the pool between them.
	p := newPool(2, 8, 500*time.Millisecond, cap, "", f.create, f.destroy)
	defer p.close()
	p.refill()
	p.wg.Wait()
	drainAndRefill(p, f)
	drainAndRefill(p, f)
	require.Equal(t, 8, p.readyNow())
	_, destroyed := f.counts()
	require.Eventually(t, func() bool { return p.Depth() == 2 && p.readyNow() == 2 }, 5*time.Second, 10*time.Millisecond, "back to the floor")
	p.wg.Wait()
	_, after := f.counts()
	require.Equal(t, 6, after-destroyed, "the six beyond the floor destroyed")
	require.Equal(t, WarmState{Ready: 2, Wanted: 2, Held: 2, Cap: 32, Hits: 6, Misses: 2}, cap.state())

	// Calls keep a grown pool grown: the idle time counts from the last take.
	drainAndRefill(p, f)
	require.Equal(t, 4, p.Depth())
	for range 6 {
		time.Sleep(20 * time.Millisecond)
		require.NotNil(t, p.take())
		p.wg.Wait()
	}
	require.Equal(t, 4, p.Depth(), "no shrink while calls come")
	require.Eventually(t, func() bool { return p.Depth() == 2 }, 5*time.Second, 10*time.Millisecond)
}

func TestPoolFairUnderTheCap(t *testing.T) {
	// cap 8, reserve 2: grown sessions leave two tokens for floors.
	cap := newWarmCap(8)
	f := &fakeContainers{}
	a := newPool(2, 8, time.Hour, cap, "", f.create, f.destroy)
	b := newPool(2, 8, time.Hour, cap, "", f.create, f.destroy)
	defer a.close()
	defer b.close()
	for range 4 {
		drainAndRefill(a, f)
		drainAndRefill(b, f)
	}
	st := cap.state()
	require.Equal(t, 6, st.Held, "extras stop at the reserve: %+v", st)
	require.LessOrEqual(t, a.readyNow(), 4)
	require.LessOrEqual(t, b.readyNow(), 4)
	// A new session still gets its floor.
	c := newPool(2, 8, time.Hour, cap, "", f.create, f.destroy)
	defer c.close()
	c.refill()
	c.wg.Wait()
	require.Equal(t, 2, c.readyNow(), "the reserve serves another session's floor")
	require.Equal(t, 8, cap.state().Held)
	// Nothing more fits, floor or extra.
	d := newPool(2, 8, time.Hour, cap, "", f.create, f.destroy)
	defer d.close()
	d.refill()
	d.wg.Wait()
	require.Zero(t, d.readyNow())
}

// ownerHeld is the tokens owner holds.
func (w *warmCap) ownerHeld(owner string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.owners[owner]
}

func TestPoolFairBetweenOwners(t *testing.T) {
	// cap 16: reserve 4, an owner grows while it holds fewer than 8.
	// Owner a's two sessions burst first, then owner b's one.
	for _, tc := range []struct {
		name       string
		a, b       string
		aHeld, bTo int
	}{
		// Without owner keys the reserve is the only bound: a's
		// sessions take every extra token (12 held but b's floor),
		// and b cannot grow at all.
		{name: "no owners", a: "", b: "", aHeld: 10, bTo: 2},
		// With them a's sessions stop at half the cap, floors
		// included, and b's burst grows to the reserve.
		{name: "two owners", a: "pod:a", b: "uid:1000", aHeld: 8, bTo: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cap := newWarmCap(16)
			f := &fakeContainers{}
			b := newPool(2, 8, time.Hour, cap, tc.b, f.create, f.destroy)
			defer b.close()
			b.refill()
			b.wg.Wait()
			a1 := newPool(2, 8, time.Hour, cap, tc.a, f.create, f.destroy)
			a2 := newPool(2, 8, time.Hour, cap, tc.a, f.create, f.destroy)
			defer a1.close()
			defer a2.close()
			for range 4 {
				drainAndRefill(a1, f)
				drainAndRefill(a2, f)
			}
			require.Equal(t, tc.aHeld, a1.readyNow()+a2.readyNow(), "owner a's sessions together: %+v", cap.state())
			for range 4 {
				drainAndRefill(b, f)
			}
			require.Equal(t, tc.bTo, b.readyNow(), "owner b's burst: %+v", cap.state())
			if tc.a != "" {
				require.Equal(t, tc.aHeld, cap.ownerHeld(tc.a))
				require.Equal(t, tc.bTo, cap.ownerHeld(tc.b))
			}
			// A new session of a, over its share, still gets its floor.
			a3 := newPool(2, 8, time.Hour, cap, tc.a, f.create, f.destroy)
			defer a3.close()
			a3.refill()
			a3.wg.Wait()
			require.Equal(t, 2, a3.readyNow(), "floors are served whatever their owner holds")
		})
	}
}

// TestPoolTakeAge: take hands out a container created ahead only while
// its deadline label leaves its call the timeout plus callSlack: one
// aged just under maxWarmAge (the bound before) is destroyed, not used;
// one just under maxTakeAge is used.
func TestPoolTakeAge(t *testing.T) {
	for _, c := range []struct {
		name string
		age  time.Duration
		want bool
	}{
		{"just under maxWarmAge", maxWarmAge - time.Second, false},
		{"a few seconds past maxTakeAge", maxTakeAge + 5*time.Second, false},
		{"just under maxTakeAge", maxTakeAge - time.Second, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeContainers{}
			p := newPool(1, 1, 0, newWarmCap(4), "", f.create, f.destroy)
			p.refill()
			p.wg.Wait()
			p.mu.Lock()
			p.ready[0].created = time.Now().Add(-c.age)
			p.mu.Unlock()
			f.hold.Lock() // the refill after the take waits
			got := p.take()
			_, destroyed := f.counts()
			f.hold.Unlock()
			p.close()
			require.Equal(t, c.want, got != nil, "handed out")
			require.Equal(t, !c.want, destroyed == 1, "destroyed")
		})
	}
}

// TestCallFitsItsDeadline: the bounds that keep a live call inside its
// container's deadline label (created + maxWarmAge + timeout + InitGrace)
// and its init's wait (initctl.MaxWait) hold: what a call may add to its
// timeout after the take (sendWait or startWait, killWait, ioWait,
// destroyWait, cgroupSettle) fits in
// callSlack, a container taken as late as maxTakeAge is destroyed before
// its label, and its init gets the request before MaxWait.
func TestCallFitsItsDeadline(t *testing.T) {
	require.LessOrEqual(t, max(sendWait, startWait)+killWait+2*ioWait+destroyWait+cgroupSettle, callSlack)
	timeout := 5 * time.Minute
	created := time.Unix(1_000_000, 0)
	// The label is whole seconds, and a sweep reaps once now.Unix() > it.
	label := created.Add(maxWarmAge + timeout + InitGrace).Truncate(time.Second)
	lastTaken := created.Add(maxTakeAge)
	require.True(t, takeable(created, lastTaken))
	require.False(t, takeable(created, lastTaken.Add(time.Nanosecond)))
	require.False(t, lastTaken.Add(timeout+callSlack).After(label), "a call taken last ends by its label")
	require.Less(t, maxTakeAge+sendWait, initctl.MaxWait, "the init gets the request before its own bound")
}
