//go:build !linux || !cgo

package seccomp

import (
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
)

// TestWithoutLibseccomp: without libseccomp nothing validates, so nothing
// can be turned into a filter by mistake.
func TestWithoutLibseccomp(t *testing.T) {
	p, err := LoadDefault()
	require.Nil(t, p)
	require.True(t, errdefs.IsNotImplemented(err), "%v", err)
	require.Nil(t, Default())
	_, err = (&Profile{}).Spec()
	require.True(t, errdefs.IsNotImplemented(err), "%v", err)
}
