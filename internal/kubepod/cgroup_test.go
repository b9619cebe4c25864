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
		{"pod segment outside kubepods", "0::/system.slice/pod" + uidA + "/x\n", "", errdefs.ErrPermissionDenied},
		{"nested forgery below a real pod counts the outer one", "0::/kubepods/besteffort/pod" + uidA + "/c/kubepods/pod11111111-2222-3333-4444-555555555555\n", uidA, nil},
		{"two pods", "8:pids:/kubepods/pod" + uidA + "/c\n4:memory:/kubepods/pod11111111-2222-3333-4444-555555555555/c\n", "", errdefs.ErrPermissionDenied},
		{"upper-case uid is not the kubelet's: refused", "0::/kubepods/pod0F8E7D6C-5B4A-4938-8271-6A5B4C3D2E1F/c\n", "", errdefs.ErrPermissionDenied},
		{"empty", "", "", ErrNoPod},
		{"the daemon's own Pod's other container, from its cgroup namespace", "0::/../ctr2\n", "", ErrNoPod},
		{"a kubelet layout not known here (kind's systemd slices)", "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod0f8e7d6c_5b4a_4938_8271_6a5b4c3d2e1f.slice/x\n", "", errdefs.ErrPermissionDenied},
		// Forgeries: a Pod-like cgroup made where a caller may create
		// cgroups (a node user's systemd-delegated user@UID.service, a
		// container's writable cgroupfs) is no Pod.
		{"kubepods made in a delegated user slice", "0::/user.slice/user-1000.slice/user@1000.service/kubepods/besteffort/pod" + uidA + "/x\n", "", errdefs.ErrPermissionDenied},
		{"systemd kubepods made in a delegated user slice", "0::/user.slice/user-1000.slice/user@1000.service/kubepods.slice/kubepods-pod0f8e7d6c_5b4a_4938_8271_6a5b4c3d2e1f.slice/x\n", "", errdefs.ErrPermissionDenied},
		{"v1 kubepods made in a docker container's cgroup", "8:pids:/system.slice/docker-0123.scope/kubepods/pod" + uidA + "/x\n0::/\n", "", errdefs.ErrPermissionDenied},
		{"pod cgroup made in a delegated slice, seen from a cgroup namespace", "0::/../../../../user.slice/user-1000.slice/user@1000.service/pod" + uidA + "\n", "", errdefs.ErrPermissionDenied},
		{"kubepods made in a delegated slice, seen from a cgroup namespace", "0::/../../../../user.slice/user@1000.service/kubepods/besteffort/pod" + uidA + "\n", "", errdefs.ErrPermissionDenied},
		{"pod below a non-QoS cgroup of kubepods", "0::/kubepods/besteffort/x/pod" + uidA + "/c\n", "", errdefs.ErrPermissionDenied},
		{"kubepods not at the kubelet's root", "0::/corral-kube/kubepods/besteffort/pod" + uidA + "/c\n", "", errdefs.ErrPermissionDenied},
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

// A kubelet with a --cgroup-root (hack/kube's cluster: /corral-kube):
// its Pods are found below that root only, the root learned from the
// reader's own cgroup (the daemon's own Pod).
func TestUIDFromCgroupRoots(t *testing.T) {
	self := "12:pids:/corral-kube/kubepods/burstable/pod11111111-2222-3333-4444-555555555555/d\n4:memory:/corral-kube/kubepods/burstable/pod11111111-2222-3333-4444-555555555555/d\n0::/\n"
	roots := KubeletCgroupRoots([]byte(self))
	require.Equal(t, []string{"/corral-kube"}, roots)
	got, err := UIDFromCgroup([]byte("12:pids:/corral-kube/kubepods/besteffort/pod"+uidA+"/c\n0::/\n"), roots...)
	require.NoError(t, err)
	require.Equal(t, uidA, got)
	for _, forged := range []string{
		"12:pids:/kubepods/besteffort/pod" + uidA + "/c\n",
		"12:pids:/user.slice/user-1000.slice/user@1000.service/corral-kube/kubepods/pod" + uidA + "/c\n",
	} {
		_, err = UIDFromCgroup([]byte(forged), roots...)
		require.ErrorIs(t, err, errdefs.ErrPermissionDenied, forged)
	}
	for _, notInPod := range []string{"", "0::/\n", "0::/user.slice/session-1.scope\n", "0::/kubepods/x\n"} {
		require.Equal(t, []string{"/"}, KubeletCgroupRoots([]byte(notInPod)), notInPod)
	}
	require.Equal(t, []string{"/"}, KubeletCgroupRoots([]byte("0::/kubepods.slice/kubepods-pod0f8e7d6c_5b4a_4938_8271_6a5b4c3d2e1f.slice/cri-containerd-1.scope\n")))
}
