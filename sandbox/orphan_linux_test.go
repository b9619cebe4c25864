package sandbox

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestShimFlags(t *testing.T) {
	args := []string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "corral", "-id", "corral-a-1", "-address", "/run/c.sock"}
	require.Equal(t, []string{"-namespace", "corral", "-id", "corral-a-1", "-address", "/run/c.sock"}, shimFlags(args))
	require.Empty(t, shimFlags(args[:1]))
	require.Equal(t, []string{"-namespace", "corral"}, shimFlags([]string{"shim", "-namespace", "corral", "start"}))
}
