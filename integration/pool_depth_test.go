package integration

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

// TestPoolLearnsBursts: a session's pool grows on a burst that drained
// it and shrinks back when idle, on the real containerd. A burst of
// pool_depth+1 calls at once ends with a miss, which doubles the depth
// (calls one after the other miss only if a creation takes longer than
// pool_depth calls, a race between the refill and the calls): at rest afterwards more containers than pool_depth are ready
// (containerd holds exactly those), and the next burst of the same size
// finds a container for each call (no miss: the depth stays). After
// PoolIdle without a call the pool is back to pool_depth and containerd
// holds no container of the session beyond it.
func TestPoolLearnsBursts(t *testing.T) {
	for _, name := range []string{"runc", "crun"} {
		t.Run(name, func(t *testing.T) {
			idle := 45 * time.Second
			e := testRuntime{name: name}.executor(t, func(c *sandbox.Config) { c.PoolIdle, c.MaxWarm = idle, 16 })
			ctx := e.Context(context.Background())
			s := newSessionOn(t, e, demoRepo(t))
			floor := docsProfile(t).Depth()
			containers := func() int {
				cs, err := e.Client().Containers(ctx, fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, s.ID))
				require.NoError(t, err)
				return len(cs)
			}
			burst := func() {
				errs := make(chan error, floor+1)
				for range floor + 1 {
					go func() {
						res, err := s.Exec(context.Background(), []string{"ls"}, nil, nil)
						if err == nil && res.ExitCode != 0 {
							err = fmt.Errorf("ls exited %d: %s", res.ExitCode, res.Stderr)
						}
						errs <- err
					}()
				}
				for range floor + 1 {
					require.NoError(t, <-errs)
				}
				s.Idle() // used containers destroyed, the pool refilled
			}
			require.NoError(t, s.Warm())
			s.Idle()
			require.Equal(t, sandbox.WarmState{Ready: floor, Wanted: floor, Held: floor, Cap: 16}, e.Warm())
			// Each burst: floor+1 calls.

			start := time.Now()
			burst()
			w := e.Warm()
			require.Less(t, time.Since(start), idle, "the test's premise: no idle shrink yet")
			require.Equal(t, 2*floor, w.Wanted, "the miss doubled the depth")
			require.Equal(t, 2*floor, w.Ready, "more containers ready than the floor: %+v", w)
			require.Equal(t, 2*floor, containers())
			require.Equal(t, floor, w.Hits)
			require.Equal(t, 1, w.Misses)

			start = time.Now()
			burst()
			require.Less(t, time.Since(start), idle)
			require.Equal(t, sandbox.WarmState{Ready: 2 * floor, Wanted: 2 * floor, Held: 2 * floor, Cap: 16, Hits: 2*floor + 1, Misses: 1}, e.Warm(),
				"each call of the second burst found a container ready (a miss would have doubled the depth again)")

			// The state last seen, for the failure's message (arguments
			// to Eventually are evaluated before it waits).
			var last atomic.Value
			last.Store("nothing")
			require.Eventually(t, func() bool {
				w, n := e.Warm(), containers()
				last.Store(fmt.Sprintf("%+v, %d containers", w, n))
				return w.Wanted == floor && w.Ready == floor && w.Held == floor && n == floor
			}, idle+90*time.Second, 500*time.Millisecond, "back to pool_depth after %s idle: %s", idle, stringer(last.Load))
		})
	}
}

// TestPoolFairBetweenOwners: on the real containerd, with --max-warm 16
// (a quarter kept for floors, half per owner), owner A's two sessions
// grow on their bursts to 8 containers together, floors included, and no
// further however they burst; owner B's burst still grows its session
// beyond its floor. Without owner keys A's sessions took every container
// beyond the floors (10 of the 12 the reserve allows) and B's burst found
// none to grow into.
func TestPoolFairBetweenOwners(t *testing.T) {
	e := testRuntime{name: "runc"}.executor(t, func(c *sandbox.Config) { c.PoolIdle, c.MaxWarm = 10*time.Minute, 16 })
	ctx := e.Context(context.Background())
	require.Equal(t, 2, docsProfile(t).Depth(), "the test's premise: pool_depth 2")
	repo := demoRepo(t)
	owner := func(key string) sessOpt { return func(c *sandbox.SessionConfig) { c.WarmOwner = key } }
	b := newSessionOn(t, e, repo, owner("uid:1001"))
	a1 := newSessionOn(t, e, repo, owner("uid:1000"))
	a2 := newSessionOn(t, e, repo, owner("uid:1000"))
	ready := func(s *sandbox.Session) int {
		cs, err := e.Client().Containers(ctx, fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, s.ID))
		require.NoError(t, err)
		return len(cs)
	}
	// burst runs n calls at once (more than are ready: one misses and
	// doubles the depth), then waits for the pool to refill.
	burst := func(s *sandbox.Session, n int) {
		errs := make(chan error, n)
		for range n {
			go func() {
				_, err := s.Exec(context.Background(), []string{"ls"}, nil, nil)
				errs <- err
			}()
		}
		for range n {
			require.NoError(t, <-errs)
		}
		s.Idle()
	}
	for _, s := range []*sandbox.Session{b, a1, a2} {
		require.NoError(t, s.Warm())
		s.Idle()
	}
	require.Equal(t, 6, e.Warm().Held)
	burst(a1, 3)
	burst(a2, 3)
	burst(a1, 5)
	burst(a2, 5)
	require.Equal(t, 8, ready(a1)+ready(a2), "owner A's sessions together, floors included: half of --max-warm: %+v", e.Warm())
	require.Equal(t, 2, ready(b))
	burst(b, 3)
	require.Equal(t, 4, ready(b), "owner B's burst grew its session: %+v", e.Warm())
	require.Equal(t, 8, ready(a1)+ready(a2))
}

// stringer prints what load returns when it is formatted, not when it is
// passed.
type stringer func() any

func (s stringer) String() string { return fmt.Sprint(s()) }
