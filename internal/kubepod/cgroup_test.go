package kubepod

import (
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
)

const uidA = "0f8e7d6c-5b4a-4938-8271-6a5b4c3d2e1f"

func TestUIDFromCgroup(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
		err              error
	}{
		{"v2 cgroupfs besteffort", "0::/kubepods/besteffort/pod" + uidA + "/0123abcd\n", uidA, nil},
		{"v2 cgroupfs guaranteed", "0::/kubepods/pod" + uidA + "/ctr\n", uidA, nil},
		{"v2 systemd besteffort", "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f8e7d6c_5b4a_4938_8271_6a5b4c3d2e1f.slice/cri-containerd-0123.scope\n", uidA, nil},
		{"v2 systemd guaranteed", "0::/kubepods.slice/kubepods-pod0f8e7d6c_5b4a_4938_8271_6a5b4c3d2e1f.slice/cri-containerd-0123.scope\n", uidA, nil},
		{"v2 from another cgroup namespace", "0::/../../kubepods/burstable/pod" + uidA + "/x\n", uidA, nil},
		{"v1 cgroupfs, hierarchies agree", "12:pids:/kubepods/besteffort/pod" + uidA + "/c\n4:memory:/kubepods/besteffort/pod" + uidA + "/c\n1:name=systemd:/kubepods/besteffort/pod" + uidA + "/c\n0::/\n", uidA, nil},
		{"v1 one hierarchy only", "8:pids:/kubepods/besteffort/pod" + uidA + "/x\n4:memory:/\n0::/\n", uidA, nil},
		{"v1 systemd", "11:cpu,cpuacct:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f8e7d6c_5b4a_4938_8271_6a5b4c3d2e1f.slice/cri-containerd-1.scope\n", uidA, nil},
		{"v2 from a cgroup namespace below kubepods", "0::/../../pod" + uidA + "/ctr\n", uidA, nil},
		{"v2 from a cgroup namespace below kubepods, systemd", "0::/../../kubepods-besteffort-pod0f8e7d6c_5b4a_4938_8271_6a5b4c3d2e1f.slice/cri-containerd-1.scope\n", uidA, nil},
		{"host process seen from a cgroup namespace", "0::/../../../../user.slice/session-3.scope\n", "", ErrNoPod},
		{"same container as the reader", "0::/\n", "", ErrNoPod},
		{"host process", "0::/user.slice/user-1000.slice/session-3.scope\n", "", ErrNoPod},
		{"pod segment outside kubepods", "0::/system.slice/pod" + uidA + "/x\n", "", ErrNoPod},
		{"nested forgery below a real pod counts the outer one", "0::/kubepods/besteffort/pod" + uidA + "/c/kubepods/pod11111111-2222-3333-4444-555555555555\n", uidA, nil},
		{"two pods", "8:pids:/kubepods/pod" + uidA + "/c\n4:memory:/kubepods/pod11111111-2222-3333-4444-555555555555/c\n", "", errdefs.ErrPermissionDenied},
		{"upper-case uid is not the kubelet's", "0::/kubepods/pod0F8E7D6C-5B4A-4938-8271-6A5B4C3D2E1F/c\n", "", ErrNoPod},
		{"empty", "", "", ErrNoPod},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := UIDFromCgroup([]byte(tc.text))
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
