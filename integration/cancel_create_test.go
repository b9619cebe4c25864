package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

// TestCallCanceledDuringCreateLeavesNothing (red team of the bounded
// start): a call that makes its container (none ready: a cold session)
// and whose client goes away while containerd makes it left the
// container's record behind: containerd committed what the canceled
// NewContainer asked for while its answer was lost, and destroy knew
// nothing of it. Cancels land at every few milliseconds of the create;
// once the session is closed no container or lease of it is left.
func TestCallCanceledDuringCreateLeavesNothing(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		e := rt.executor(t, func(c *sandbox.Config) { c.ReapCgroup = ""; c.Cold = true })
		s := newSessionOn(t, e, hiddenRepo(t))
		run(t, s, "ls")
		for d := time.Duration(0); d < 40*time.Millisecond; d += 3 * time.Millisecond {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(d, cancel)
			_, err := testutil.ExecWithoutPolicy(ctx, s, []string{"ls"}, nil, nil)
			cancel()
			if err != nil {
				require.ErrorIs(t, err, context.Canceled, "cancel at %s", d)
			}
			s.Idle()
		}
		require.NoError(t, s.Close())
		var left []string
		ctx := e.Context(context.Background())
		for _, c := range sessionContainers(t, e, s.ID) {
			left = append(left, c.ID())
			_ = c.Delete(ctx, containerd.WithSnapshotCleanup)
		}
		require.Empty(t, left, "containers of the closed session")
		ls, err := e.Client().LeasesService().List(ctx, fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, s.ID))
		require.NoError(t, err)
		for _, l := range ls {
			_ = e.Client().LeasesService().Delete(ctx, l)
		}
		require.Empty(t, ls, "leases of the closed session")
	})
}

// TestCallCanceledAfterItsStart (red team of the bounded create): a
// container made on the call waited for its exit under the call's
// context, so the call's end delivered a made-up status (gRPC's
// Canceled, no exit code) that the kill took for the exit: the call
// returned "waiting for task …: rpc error: code = Canceled", which is
// not the call's cancel (the daemon answered it as a failed call), and
// no exit was seen. Now: the call's own error, and the tool is gone.
func TestCallCanceledAfterItsStart(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		e := rt.executor(t, func(c *sandbox.Config) { c.ReapCgroup = ""; c.Cold = true })
		s := newSessionOn(t, e, hiddenRepo(t))
		run(t, s, "ls")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(3*time.Second, cancel)
		start := time.Now()
		_, err := testutil.ExecWithoutPolicy(ctx, s, []string{"probe", "sleep", "30s"}, nil, nil)
		require.ErrorIs(t, err, context.Canceled)
		require.Less(t, time.Since(start), 25*time.Second, "the call waited out its tool")
	})
}
