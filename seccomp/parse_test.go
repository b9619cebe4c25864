package seccomp

import (
	"slices"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
)

// TestParseRejects covers what fails before any syscall name is looked up,
// so it runs on every platform.
func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want string
	}{
		{"unknown top-level field", "defaultAction: SCMP_ACT_ERRNO\nflags: []\n", "field flags not found"},
		{"unknown rule field", "syscalls:\n  - names: [read]\n    action: SCMP_ACT_ALLOW\n    comment: x\n", "field comment not found"},
		{"unknown arg field", "syscalls:\n  - names: [socket]\n    action: SCMP_ACT_ALLOW\n    args: [{index: 0, value: 1, op: SCMP_CMP_EQ, mask: 1}]\n", "field mask not found"},
		{"duplicate key", "defaultAction: SCMP_ACT_ERRNO\ndefaultAction: SCMP_ACT_KILL\n", "already defined"},
		{"negative errno", "defaultErrnoRet: -1\n", "cannot unmarshal"},
		{"empty", "", "empty document"},
		{"two documents", "defaultAction: SCMP_ACT_ERRNO\n---\ndefaultAction: SCMP_ACT_ALLOW\n", "more than one document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Load([]byte(tc.yaml))
			require.Nil(t, p)
			require.ErrorContains(t, err, tc.want)
			require.True(t, errdefs.IsInvalidArgument(err), "%v", err)
		})
	}
}

func TestKnown(t *testing.T) {
	for _, list := range [][]string{KnownActions(), KnownOperators(), KnownArchitectures()} {
		require.True(t, slices.IsSorted(list))
	}
	require.Contains(t, KnownActions(), "SCMP_ACT_ERRNO")
	require.NotContains(t, KnownActions(), "SCMP_ACT_NOTIFY", "needs a listener corral does not run")
	require.Contains(t, KnownOperators(), "SCMP_CMP_MASKED_EQ")
	require.Contains(t, KnownArchitectures(), "SCMP_ARCH_X86_64")
}
