package kubepod

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/containerd/errdefs"
)

// A Pod UID as the kubelet writes it in a cgroup path: the cgroupfs driver
// keeps the dashes, the systemd driver turns them into underscores (a dash
// separates the parts of a slice's name).
const uuid = `[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}`

var (
	// cgroupfsPod is a cgroupfs driver's Pod directory: pod<UID>.
	cgroupfsPod = regexp.MustCompile(`^pod(` + uuid + `)$`)
	// systemdPod is a systemd driver's Pod slice:
	// kubepods-pod<UID>.slice, kubepods-besteffort-pod<UID>.slice,
	// kubepods-burstable-pod<UID>.slice.
	systemdPod = regexp.MustCompile(`^kubepods(?:-besteffort|-burstable)?-pod(` + uuid + `)\.slice$`)
)

// UIDFromCgroup returns the Pod UID (lower-case, with dashes) that the
// text of a /proc/PID/cgroup file names, or ErrNoPod.
//
// Each line is "hierarchy-ID:controllers:path" (cgroups(7)); in each path
// the first component that is a Pod's cgroup counts, and only below a
// kubepods component (the kubelet's root cgroup: "kubepods" or
// "kubepods.slice", anywhere in the path) or after the ".." components the
// kernel writes when the process is outside the reader's cgroup namespace
// (a daemon in a private cgroup namespace below kubepods sees another
// Pod's process as "/../../pod<UID>/<container>"). Deeper components are
// never looked at: a container can only nest cgroups below its own. Lines
// that name no Pod ("/" in a hierarchy the kubelet does not use) are
// skipped; two lines that name different Pods are an error.
func UIDFromCgroup(text []byte) (string, error) {
	var found string
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		uid := uidFromPath(parts[2])
		switch {
		case uid == "":
		case found == "":
			found = uid
		case found != uid:
			return "", fmt.Errorf("cgroup names two Pods (%s and %s): %w", found, uid, errdefs.ErrPermissionDenied)
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading the cgroup file: %w", err)
	}
	if found == "" {
		return "", ErrNoPod
	}
	return found, nil
}

// uidFromPath returns the Pod UID of one cgroup path, or "".
func uidFromPath(p string) string {
	underKubepods := strings.HasPrefix(p, "/../")
	for _, c := range strings.Split(p, "/") {
		if !underKubepods {
			underKubepods = c == "kubepods" || c == "kubepods.slice"
			continue
		}
		if m := cgroupfsPod.FindStringSubmatch(c); m != nil {
			return strings.ReplaceAll(m[1], "_", "-")
		}
		if m := systemdPod.FindStringSubmatch(c); m != nil {
			return strings.ReplaceAll(m[1], "_", "-")
		}
	}
	return ""
}
