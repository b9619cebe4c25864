package kubepod

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
)

const uidB = "11111111-2222-3333-4444-555555555555"

// kubeletTree builds a fake kubelet root: Pod A with an emptyDir "work"
// (holding repo/ and a link out), a CSI volume "data", a volume "twice"
// under two plugins; Pod B with an emptyDir "other".
func kubeletTree(t *testing.T) string {
	root := t.TempDir()
	mk := func(p string) {
		require.NoError(t, os.MkdirAll(filepath.Join(root, p), 0o755))
	}
	a := "pods/" + uidA + "/volumes/"
	mk(a + "kubernetes.io~empty-dir/work/repo/docs")
	require.NoError(t, os.WriteFile(filepath.Join(root, a+"kubernetes.io~empty-dir/work/repo/f"), nil, 0o644))
	require.NoError(t, os.Symlink("/etc", filepath.Join(root, a+"kubernetes.io~empty-dir/work/etc")))
	require.NoError(t, os.Symlink("repo", filepath.Join(root, a+"kubernetes.io~empty-dir/work/inside")))
	mk(a + "kubernetes.io~csi/data/mount/src")
	mk(a + "kubernetes.io~empty-dir/twice")
	mk(a + "kubernetes.io~configmap/twice")
	require.NoError(t, os.Symlink("/", filepath.Join(root, a+"kubernetes.io~empty-dir/rootlink")))
	mk("pods/" + uidB + "/volumes/kubernetes.io~empty-dir/other")
	// What a Pod must never open as a repository.
	mk(a + "kubernetes.io~secret/creds")
	mk(a + "kubernetes.io~projected/kube-api-access-x2b9")
	mk(a + "kubernetes.io~configmap/conf")
	mk(a + "kubernetes.io~downward-api/podinfo")
	mk(a + "kubernetes.io~some-future-plugin/future")
	mk(a + "kubernetes.io~local-volume/pv1/src")
	return root
}

func TestOpenVolume(t *testing.T) {
	root := kubeletTree(t)
	a := filepath.Join(root, "pods", uidA, "volumes")
	for _, tc := range []struct {
		name, uid, vol, sub string
		want                string
		err                 error
	}{
		{"emptyDir root", uidA, "work", "", a + "/kubernetes.io~empty-dir/work", nil},
		{"subPath", uidA, "work", "repo", a + "/kubernetes.io~empty-dir/work/repo", nil},
		{"deep subPath, slashes trimmed", uidA, "work", "/repo/docs/", a + "/kubernetes.io~empty-dir/work/repo/docs", nil},
		{"csi data is in mount", uidA, "data", "src", a + "/kubernetes.io~csi/data/mount/src", nil},
		{"another Pod's volume", uidA, "other", "", "", errdefs.ErrInvalidArgument},
		{"dotdot", uidA, "work", "../../../../" + uidB, "", errdefs.ErrInvalidArgument},
		{"dotdot inside", uidA, "work", "repo/../repo", "", errdefs.ErrInvalidArgument},
		{"symlink out", uidA, "work", "etc", "", errdefs.ErrPermissionDenied},
		{"symlink inside is not followed either", uidA, "work", "inside", "", errdefs.ErrPermissionDenied},
		{"volume that is a link", uidA, "rootlink", "", "", errdefs.ErrInvalidArgument},
		{"file", uidA, "work", "repo/f", "", errdefs.ErrInvalidArgument},
		{"missing", uidA, "work", "nope", "", errdefs.ErrInvalidArgument},
		{"two plugins", uidA, "twice", "", "", errdefs.ErrInvalidArgument},
		{"NUL in the subPath", uidA, "work", "repo\x00/docs", "", errdefs.ErrInvalidArgument},
		{"subPath longer than PATH_MAX", uidA, "work", strings.Repeat("a/", 2100), "", errdefs.ErrInvalidArgument},
		{"subPath component longer than NAME_MAX", uidA, "work", "repo/" + strings.Repeat("a", 300), "", errdefs.ErrInvalidArgument},
		{"local PersistentVolume", uidA, "pv1", "src", a + "/kubernetes.io~local-volume/pv1/src", nil},
		{"secret", uidA, "creds", "", "", errdefs.ErrPermissionDenied},
		{"service-account token (projected)", uidA, "kube-api-access-x2b9", "", "", errdefs.ErrPermissionDenied},
		{"configmap", uidA, "conf", "", "", errdefs.ErrPermissionDenied},
		{"downward API", uidA, "podinfo", "", "", errdefs.ErrPermissionDenied},
		{"a plugin not known to hold data", uidA, "future", "", "", errdefs.ErrPermissionDenied},
		{"name with a slash", uidA, "work/repo", "", "", errdefs.ErrInvalidArgument},
		{"name dotdot", uidA, "..", "", "", errdefs.ErrInvalidArgument},
		{"name as a node path", uidA, "/etc", "", "", errdefs.ErrInvalidArgument},
		{"pod without volumes here", "99999999-2222-3333-4444-555555555555", "work", "", "", errdefs.ErrInvalidArgument},
		{"malformed pod uid", "../" + uidB, "other", "", "", errdefs.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := OpenVolume(root, tc.uid, tc.vol, tc.sub)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, v.Path)
			st, err := os.Stat(tc.want)
			require.NoError(t, err)
			require.True(t, os.SameFile(st, statOf(t, v.Path)))
		})
	}
}

func statOf(t *testing.T, p string) os.FileInfo {
	st, err := os.Stat(p)
	require.NoError(t, err)
	return st
}
