package daemon

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCallContextLivesWithItsCalls: the backend's per-session cancel
// entry (which a removal uses to cancel the calls in flight) lives while
// the session has calls in flight, never longer, whoever removes the
// session. Before, every session ever called kept its entry until the
// daemon's own removal — forever for one the sandbox's sweep removed.
func TestCallContextLivesWithItsCalls(t *testing.T) {
	b := &sandboxBackend{removed: map[string]*sessionEnd{}}
	const id = "0123456789ab"
	ctx1, done1 := b.callContext(context.Background(), id)
	ctx2, done2 := b.callContext(context.Background(), id)
	require.Len(t, b.removed, 1)
	done1()
	done1() // released twice: counted once
	require.Len(t, b.removed, 1, "a call is still in flight")
	require.NoError(t, ctx2.Err())
	require.Error(t, ctx1.Err())
	done2()
	require.Empty(t, b.removed, "no call in flight: nothing kept for the session")

	// A removal while a call runs still cancels it, and the call's end
	// leaves nothing.
	ctx3, done3 := b.callContext(context.Background(), id)
	b.mu.Lock()
	end := b.removed[id]
	end.cancel()
	delete(b.removed, id)
	b.mu.Unlock()
	<-ctx3.Done()
	require.True(t, errors.Is(context.Cause(ctx3), errRemoved))
	// A call that starts after the removal gets its own entry, which the
	// first call's end does not drop.
	_, done4 := b.callContext(context.Background(), id)
	done3()
	require.Len(t, b.removed, 1)
	done4()
	require.Empty(t, b.removed)

	// A session the sandbox's sweep removed: forgotten.
	_, done5 := b.callContext(context.Background(), id)
	b.lost = map[string]string{id: lostReason}
	b.open = nil
	b.forgetGone(id)
	require.Empty(t, b.removed)
	require.Empty(t, b.lost)
	done5()
	require.Empty(t, b.removed)
}
