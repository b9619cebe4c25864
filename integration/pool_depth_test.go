package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

// TestPoolLearnsBursts: a session's pool grows on a burst that drained
// it and shrinks back when idle, on the real containerd. A burst of
// pool_depth+1 back-to-back calls ends with a miss, which doubles the
// depth: at rest afterwards more containers than pool_depth are ready
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
				for range floor + 1 {
					run(t, s, "ls")
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

			require.Eventually(t, func() bool {
				w := e.Warm()
				return w.Wanted == floor && w.Ready == floor && w.Held == floor && containers() == floor
			}, idle+90*time.Second, 500*time.Millisecond, "back to pool_depth after %s idle: %+v, %d containers", idle, e.Warm(), containers())
		})
	}
}
