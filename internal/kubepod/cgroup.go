package kubepod

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
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

// qosClass is a kubelet QoS cgroup between kubepods and a Pod's (the
// guaranteed class has none): cgroupfs driver, then systemd driver.
var qosClass = map[string]bool{
	"besteffort": true, "burstable": true,
	"kubepods-besteffort.slice": true, "kubepods-burstable.slice": true,
}

func isKubepods(c string) bool { return c == "kubepods" || c == "kubepods.slice" }

// UIDFromCgroup returns the Pod UID (lower-case, with dashes) that the
// text of a /proc/PID/cgroup file names, or ErrNoPod. roots are the
// cgroups the kubelet's kubepods cgroup may be a child of (its
// --cgroup-root, as KubeletCgroupRoots learns it); none means "/", the
// kubelet's default.
//
// Each line is "hierarchy-ID:controllers:path" (cgroups(7)), and a path
// names a Pod only where the kubelet puts one, never anywhere a Pod-like
// name appears: whoever may create cgroups somewhere (a node user in its
// systemd-delegated user@UID.service, a container with a writable
// cgroupfs) could otherwise make .../kubepods/pod<UID> or pod<UID> of
// another Pod and be taken for it. The layouts:
//
//   - ROOT/kubepods[/QOS]/pod<UID>/… for a path as seen from the node's
//     cgroup namespace: "kubepods" (or "kubepods.slice") must be a child of
//     one of roots, an optional QoS class (besteffort, burstable, or the
//     systemd driver's kubepods-<qos>.slice) follows, and the next
//     component must be the Pod's;
//   - /../…/../[kubepods/][QOS/]pod<UID>/… for a process outside the
//     reader's cgroup namespace (a daemon Pod in a private cgroup namespace
//     sees another Pod's process as "/../../pod<UID>/<container>"): after
//     the ".." the Pod's component must come at once, or after a QoS class,
//     or after kubepods and a QoS class — the shortest way from one Pod's
//     cgroup to another's never leaves kubepods, and no caller can create
//     a cgroup along it.
//
// Deeper components are never looked at: a container can only nest
// cgroups below its own. Lines that name no Pod ("/" in a hierarchy the
// kubelet does not use) are skipped; two lines that name different Pods
// are an error, and so is a line with a component like a Pod's or
// kubepods that is not where the kubelet puts them (a forgery, or a
// layout not known here): fail closed, since a root process in no Pod
// is the daemon's admin.
func UIDFromCgroup(text []byte, roots ...string) (string, error) {
	if len(roots) == 0 {
		roots = []string{"/"}
	}
	var found string
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		uid := uidFromPath(parts[2], roots)
		switch {
		case uid == "" && looksLikePod(parts[2]):
			// Fail closed: not "in no Pod", which a root process is an
			// admin as.
			return "", fmt.Errorf("cgroup %q looks like a Kubernetes Pod's but is not where the kubelet puts Pods (below %s): %w", parts[2], strings.Join(roots, ", "), errdefs.ErrPermissionDenied)
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
func uidFromPath(p string, roots []string) string {
	cs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	i := 0
	if cs[0] == ".." {
		for i < len(cs) && cs[i] == ".." {
			i++
		}
		if i < len(cs) && isKubepods(cs[i]) {
			i++
		}
	} else {
		k := slices.IndexFunc(cs, isKubepods)
		if k < 0 || !slices.Contains(roots, "/"+strings.Join(cs[:k], "/")) {
			return ""
		}
		i = k + 1
	}
	if i < len(cs) && qosClass[cs[i]] {
		i++
	}
	if i >= len(cs) {
		return ""
	}
	if m := cgroupfsPod.FindStringSubmatch(cs[i]); m != nil {
		return strings.ReplaceAll(m[1], "_", "-")
	}
	if m := systemdPod.FindStringSubmatch(cs[i]); m != nil {
		return strings.ReplaceAll(m[1], "_", "-")
	}
	return ""
}

// podLike is a cgroup path component that names, or looks as if it named,
// a Pod or the kubelet's Pods' cgroup.
var podLike = regexp.MustCompile(`kubepods|pod` + uuid)

// looksLikePod reports whether a cgroup path has a component like a
// Pod's or the kubelet's (uidFromPath found none where the kubelet puts
// them: a forgery, or a layout this package does not know).
func looksLikePod(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if podLike.MatchString(strings.ToLower(c)) {
			return true
		}
	}
	return false
}

// KubeletCgroupRoots returns the cgroups the kubelet's kubepods cgroup is
// a child of, learned from the text of the reading process's own
// /proc/self/cgroup when it runs in a Pod (the corral daemon's DaemonSet
// Pod: the kubelet's --cgroup-root, "/" by default, "/corral-kube" in
// hack/kube's cluster); "/" when it shows none (not in a Pod, or in a
// private cgroup namespace, where every Pod is seen through ".." and no
// root is needed).
func KubeletCgroupRoots(self []byte) []string {
	var roots []string
	for _, line := range strings.Split(string(self), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || strings.HasPrefix(parts[2], "/..") {
			continue
		}
		cs := strings.Split(strings.TrimPrefix(parts[2], "/"), "/")
		k := slices.IndexFunc(cs, isKubepods)
		if k < 0 || uidFromPath(parts[2], []string{"/" + strings.Join(cs[:k], "/")}) == "" {
			continue
		}
		if r := "/" + strings.Join(cs[:k], "/"); !slices.Contains(roots, r) {
			roots = append(roots, r)
		}
	}
	if len(roots) == 0 {
		return []string{"/"}
	}
	return roots
}
