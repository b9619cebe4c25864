package audit

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoggerForContextPeer: a record written through For(ctx) names the
// peer the context carries; without one, the calling process.
func TestLoggerForContextPeer(t *testing.T) {
	state := t.TempDir()
	l, err := Open(state, "")
	require.NoError(t, err)
	peer := Peer{UID: 1234, GID: 99, PID: 4242}
	require.NoError(t, l.For(ContextWithPeer(context.Background(), peer)).Log("s1", &Refusal{Stage: "invocation", Error: "x"}))
	require.NoError(t, l.For(context.Background()).Log("s1", &Refusal{Stage: "invocation", Error: "y"}))
	require.NoError(t, l.Close())
	var nilLogger *Logger
	require.Nil(t, nilLogger.For(ContextWithPeer(context.Background(), peer)))

	recs, err := Read(filepath.Join(state, FileName))
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, peer, recs[0].Peer)
	require.Equal(t, recs[1].Actor.PID, recs[1].Peer.PID)
	require.NotEqual(t, peer, recs[1].Peer)
}
