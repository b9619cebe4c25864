package sandbox

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLimitOrderNamesEveryLimit: every Limit* constant has its place in
// limitOrder (one missing would sort first, before timeout).
func TestLimitOrderNamesEveryLimit(t *testing.T) {
	for _, l := range []string{LimitTimeout, LimitMemory, LimitPids, LimitOutput, LimitWriteArea} {
		require.True(t, slices.Contains(limitOrder, l), l)
	}
	require.Len(t, limitOrder, 5)
}
