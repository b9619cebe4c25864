package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestContainerdGoneIsOneLine(t *testing.T) {
	e := &Executor{cfg: Config{Address: "/run/x.sock"}}
	grpcErr := status.Error(codes.Unavailable, "error reading from server: EOF\nconnection error: desc = \"transport: Error while dialing\"")
	err := e.wrapContainerd("waiting for task corral-a-1", grpcErr)
	require.ErrorIs(t, err, ErrContainerdGone)
	require.True(t, errdefs.IsUnavailable(err))
	require.Equal(t, "containerd at /run/x.sock stopped answering while waiting for task corral-a-1; the container is reaped at the next corral start: start containerd again, then repeat the call", err.Error())
	require.False(t, strings.Contains(err.Error(), "\n"))

	other := e.wrapContainerd("creating container x", errdefs.ErrAlreadyExists)
	require.True(t, errdefs.IsAlreadyExists(other))
	require.False(t, errors.Is(other, ErrContainerdGone))
}

// TestShimSilentError: the error of a call whose shim went silent is
// ErrShimSilent and errdefs' unavailable (the API's kind "unavailable",
// a retry later), and its text names no category.
func TestShimSilentError(t *testing.T) {
	err := error(&shimSilentError{"container c: its shim reported no exit within 15s of the kill"})
	require.ErrorIs(t, err, ErrShimSilent)
	require.True(t, errdefs.IsUnavailable(err))
	require.Equal(t, "container c: its shim reported no exit within 15s of the kill", err.Error())
}
