// Package kubepod tells which Kubernetes Pod a process of the node runs in,
// and finds a Pod's own volumes on the node: what `corral daemon` needs in
// Pod mode (--kubelet-root), where its callers are agent Pods.
//
// Identity comes from the kernel, never from a request: the caller's pid
// (SO_PEERCRED, or better the pidfd of SO_PEERPIDFD, Linux 6.5) → its
// /proc/PID/cgroup → the Pod UID the kubelet put in the cgroup path
// (cgroupfs driver: .../kubepods/[besteffort|burstable/]pod<UID>/<container>;
// systemd driver: kubepods[-<qos>]-pod<UID with '_' for '-'>.slice). Both
// cgroup v1 (one line per hierarchy) and v2 (the single "0::" line) are
// read; the lines must agree. The file is read through a descriptor of
// /proc/PID opened once, and the process is checked to be alive afterwards
// through its pidfd, so a pid reused meanwhile can never lend its Pod.
//
// Volumes: the kubelet keeps Pod UID's volume NAME in
// <kubelet-root>/pods/<UID>/volumes/<plugin>/<NAME> (for CSI volumes the
// data is in .../kubernetes.io~csi/<NAME>/mount). OpenVolume finds exactly
// one such directory, then the caller's subPath beneath it with the
// project's rooted-filesystem primitive (package rootfs: no symbolic link,
// no "..").
package kubepod
