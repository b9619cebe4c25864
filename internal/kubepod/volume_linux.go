package kubepod

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/rootfs"
	"golang.org/x/sys/unix"
)

var (
	// podUID is a Pod UID as Identify returns it.
	podUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	// volumeName is a Pod volume's name: a DNS-1123 label (Kubernetes
	// validates spec.volumes[].name so).
	volumeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
)

// csiPlugin is the kubelet's directory of CSI volumes, whose data is in
// NAME/mount (NAME/vol_data.json beside it is the kubelet's).
const csiPlugin = "kubernetes.io~csi"

// repoPlugins are the kubelet's volume plugin directories whose volumes a
// Pod may name as its repository: volumes that hold data the Pod works on
// (emptyDir; CSI, which includes generic ephemeral volumes and most
// PersistentVolumes; local and NFS PersistentVolumes). Every other plugin
// is refused, fail closed: a Secret, ConfigMap, projected (the
// service-account token) or downward API volume holds the Pod's
// credentials and configuration, which the Pod's agent could otherwise
// read through its tool calls even where only another container of the
// Pod (a sidecar) mounts them, and an unknown plugin's layout is not
// known to be the volume's data.
var repoPlugins = map[string]string{
	"kubernetes.io~empty-dir":    "emptyDir",
	csiPlugin:                    "CSI",
	"kubernetes.io~local-volume": "local PersistentVolume",
	"kubernetes.io~nfs":          "NFS",
}

// RepoVolumeTypes names the volume types a Pod may name as its
// repository (for messages and documentation).
const RepoVolumeTypes = "emptyDir, CSI (generic ephemeral and most PersistentVolumes), local and NFS PersistentVolumes"

// Volume is an opened directory of a Pod's volume.
type Volume struct {
	// Path is the directory's path on the node, every symbolic link
	// resolved (as the kernel resolved it at the open).
	Path string
	// Stat is the directory's status when opened: the caller pins to
	// its device and inode.
	Stat unix.Stat_t
}

// PodDir returns the kubelet's directory of Pod uid:
// <kubeletRoot>/pods/<uid>.
func PodDir(kubeletRoot, uid string) string { return filepath.Join(kubeletRoot, "pods", uid) }

// OpenVolume finds Pod uid's volume name in the kubelet's tree under
// kubeletRoot (trusted: the daemon's configuration) and the directory
// unsafeSubPath beneath it, and returns it. uid must be the caller's own
// Pod, from Identify; name and unsafeSubPath come from the request.
//
// The volume is <kubeletRoot>/pods/<uid>/volumes/<plugin>/<name> for
// exactly one plugin directory (…/kubernetes.io~csi/<name>/mount for CSI);
// a hostPath volume has no directory there and is never found, so a
// request can reach no node path. unsafeSubPath is resolved beneath the
// volume with rootfs.NoSymlinks (no symbolic link, no escape) after "..",
// "." and empty components are refused outright; the result must be a
// directory. Errors wrap errdefs.ErrInvalidArgument (a malformed name or
// subPath, no such volume or directory) or errdefs.ErrPermissionDenied (a
// symbolic link or an escape on the way).
func OpenVolume(kubeletRoot, uid, name, unsafeSubPath string) (Volume, error) {
	if !podUID.MatchString(uid) {
		return Volume{}, fmt.Errorf("pod uid %q: %w: not a Pod UID", uid, errdefs.ErrInvalidArgument)
	}
	if !volumeName.MatchString(name) {
		return Volume{}, fmt.Errorf("volume %q: %w: want a volume's name in the Pod's spec (a DNS-1123 label)", name, errdefs.ErrInvalidArgument)
	}
	if len(unsafeSubPath) > unix.PathMax || strings.IndexByte(unsafeSubPath, 0) >= 0 {
		return Volume{}, fmt.Errorf("volume %q subPath: %w: a NUL byte, or longer than %d bytes", name, errdefs.ErrInvalidArgument, unix.PathMax)
	}
	sub := strings.Trim(unsafeSubPath, "/")
	if sub != "" {
		for _, c := range strings.Split(sub, "/") {
			if len(c) > unix.NAME_MAX {
				return Volume{}, fmt.Errorf("volume %q subPath: %w: a component longer than %d bytes", name, errdefs.ErrInvalidArgument, unix.NAME_MAX)
			}
			if c == "" || c == "." || c == ".." {
				return Volume{}, fmt.Errorf("volume %q subPath %q: %w: want a relative path without \"..\", \".\" or empty components", name, unsafeSubPath, errdefs.ErrInvalidArgument)
			}
		}
	}
	root, err := rootfs.OpenRoot(filepath.Join(PodDir(kubeletRoot, uid), "volumes"))
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return Volume{}, fmt.Errorf("volume %q: %w: the calling Pod has no volumes on this node", name, errdefs.ErrInvalidArgument)
		}
		return Volume{}, fmt.Errorf("opening the Pod's volumes: %w", err)
	}
	defer root.Close()
	plugins, err := root.ReadDir(1024)
	if err != nil {
		return Volume{}, fmt.Errorf("listing the Pod's volumes: %w", err)
	}
	var found, plugin []string
	for _, p := range plugins {
		if !p.IsDir() {
			continue
		}
		st, err := root.Lstat(p.Name()+"/"+name, rootfs.NoSymlinks)
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		dir := p.Name() + "/" + name
		if p.Name() == csiPlugin {
			dir += "/mount"
		}
		found = append(found, dir)
		plugin = append(plugin, p.Name())
	}
	switch len(found) {
	case 0:
		return Volume{}, fmt.Errorf("volume %q: %w: the calling Pod has no such volume on this node (hostPath volumes are not offered)", name, errdefs.ErrInvalidArgument)
	case 1:
	default:
		return Volume{}, fmt.Errorf("volume %q: %w: found under %d volume plugins (%s)", name, errdefs.ErrInvalidArgument, len(found), strings.Join(found, ", "))
	}
	if _, ok := repoPlugins[plugin[0]]; !ok {
		return Volume{}, fmt.Errorf("volume %q: %w: a %s volume is never a repository (a Pod's Secrets, ConfigMaps, service-account token and downward API stay out of tool calls); only %s",
			name, errdefs.ErrPermissionDenied, strings.TrimPrefix(plugin[0], "kubernetes.io~"), RepoVolumeTypes)
	}
	vol, err := root.OpenDir(found[0], rootfs.NoSymlinks)
	if err != nil {
		return Volume{}, resolveError(name, "", err)
	}
	defer vol.Close()
	dir := vol
	if sub != "" {
		if dir, err = vol.OpenDir(sub, rootfs.NoSymlinks); err != nil {
			return Volume{}, resolveError(name, sub, err)
		}
		defer dir.Close()
	}
	st, err := dir.Fstat()
	if err != nil {
		return Volume{}, err
	}
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(dir.Fd()))
	if err != nil {
		return Volume{}, err
	}
	return Volume{Path: real, Stat: st}, nil
}

func resolveError(name, sub string, err error) error {
	what := fmt.Sprintf("volume %q", name)
	if sub != "" {
		what += fmt.Sprintf(" subPath %q", sub)
	}
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%s: %w: a symbolic link on the way (not followed)", what, errdefs.ErrPermissionDenied)
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%s: %w: it does not exist", what, errdefs.ErrInvalidArgument)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%s: %w: not a directory", what, errdefs.ErrInvalidArgument)
	}
	return fmt.Errorf("%s: %w", what, err)
}
