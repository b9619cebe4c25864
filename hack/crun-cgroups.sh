#!/usr/bin/env bash
# hack/crun-cgroups.sh — let crun (Debian 12's 1.8.1) run on a cgroup
# "hybrid" host. As root. Idempotent.
#
# A hybrid host mounts cgroup v1 hierarchies under /sys/fs/cgroup (a tmpfs)
# plus a cgroup2 hierarchy at /sys/fs/cgroup/unified. crun refuses such a host
# with "cgroups in hybrid mode not supported, drop all controllers from
# cgroupv2" while the cgroup2 hierarchy still has a controller: a controller
# that no v1 hierarchy is bound to stays on cgroup2 (cgroups(7), "Cgroups
# version 2"). Mounting a v1 hierarchy for each such controller (on the
# machines measured: hugetlb only) moves it off cgroup2, which is also what
# systemd's hybrid layout does. runc keeps working (it then also creates the
# container's hugetlb cgroup); nothing on the host used hugetlb on cgroup2.
#
# Note: the binding is kernel-wide and outlives an unmount while the v1
# hierarchy has child cgroups (runc and crun leave an empty directory named
# after the containerd namespace), so there is no "undo" short of removing
# those directories and unmounting.
#
# Usage: hack/crun-cgroups.sh [check]   (check: exit 1 when crun would fail)
set -euo pipefail

v2=/sys/fs/cgroup/unified/cgroup.controllers
hybrid() { [ "$(stat -f -c %T /sys/fs/cgroup)" = tmpfs ] && [ -r "$v2" ]; }

if ! hybrid; then
	echo "crun-cgroups: not a hybrid cgroup host; nothing to do" >&2
	exit 0
fi
left=$(cat "$v2")
if [ "${1:-}" = check ]; then
	if [ -n "$left" ]; then
		echo "crun-cgroups: cgroup2 still has controllers ($left): crun will fail; run hack/crun-cgroups.sh as root" >&2
		exit 1
	fi
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "crun-cgroups: needs root (mount)" >&2
	exit 1
fi
for c in $left; do
	d=/sys/fs/cgroup/$c
	mkdir -p "$d"
	mountpoint -q "$d" || mount -t cgroup -o "$c" cgroup "$d"
	echo "crun-cgroups: mounted cgroup v1 $c at $d" >&2
done
left=$(cat "$v2")
if [ -n "$left" ]; then
	echo "crun-cgroups: cgroup2 still lists: $left" >&2
	exit 1
fi
