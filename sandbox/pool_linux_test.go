package sandbox

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeContainers counts what a pool creates and destroys.
type fakeContainers struct {
	mu                 sync.Mutex
	created, destroyed int
	fail               bool
}

func (f *fakeContainers) create(context.Context) (*container, error) {
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

func TestPoolDepthAndCap(t *testing.T) {
	cap := make(warmCap, 3)
	fa, fb := &fakeContainers{}, &fakeContainers{}
	a := &pool{depth: 2, cap: cap, create: fa.create, destroy: fa.destroy}
	b := &pool{depth: 2, cap: cap, create: fb.create, destroy: fb.destroy}
	require.Nil(t, a.take(), "nothing ready before a refill")
	a.wg.Wait()
	require.Equal(t, 2, fa.created, "filled to its depth")
	b.refill()
	b.wg.Wait()
	require.Equal(t, 1, fb.created, "the executor-wide cap stops the second pool")
	require.NotNil(t, a.take())
	a.wg.Wait()
	require.Equal(t, 2, len(a.ready), "refilled after a take")
	require.Equal(t, 3, len(cap), "tokens: a's two, b's one")

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
	require.Empty(t, a.ready, "a failed refill stops")

	b.stop()
	require.Equal(t, 1, fb.destroyed)
	require.Empty(t, cap, "every token given back")
	b.refill()
	b.wg.Wait()
	require.Equal(t, 1, fb.created, "a stopped pool never refills")
}
