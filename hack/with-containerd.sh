#!/usr/bin/env bash
# hack/with-containerd.sh [CMD...] — run CMD with a containerd that answers
# at $CONTAINERD_ADDRESS, starting a private one (hack/containerd-private.toml)
# when none does; with no CMD, start it and return. The entry point of
# corral's image (/usr/local/bin/with-containerd, see the Dockerfile), so
# `docker run --privileged IMAGE corral run ...` and a CI job's script lines
# find a containerd.
#
# Inside a job container, three things are fixed up first (needs root and
# CAP_SYS_ADMIN, i.e. a privileged job):
#   - cgroup v1 hierarchies that Docker bind-mounted read-only (a job that
#     is not --privileged) are remounted read-write;
#   - containerd's root and corral's state directory get a tmpfs when they
#     would lie on overlayfs (the job's own root filesystem): containerd's
#     overlayfs snapshotter cannot put its upper directories there, and
#     corral's view (an overlay over the repository) would stack a second
#     overlay on it. A volume mounted at /var/lib (or at each directory)
#     is used as it is.
# When containerd cannot start (no privileges), CMD still runs with a
# warning: `corral --help` needs no containerd, and corral names the
# missing daemon itself.
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
addr=${CONTAINERD_ADDRESS:-/run/corral-containerd/containerd.sock}
root=${CORRAL_CONTAINERD_ROOT:-/var/lib/corral-containerd}
state=${CORRAL_STATE_DIR:-/var/lib/corral}
answers() { [ -S "$addr" ] && timeout 5 ctr --address "$addr" version >/dev/null 2>&1; }

# tmpfs_if_overlay DIR: mount a tmpfs at DIR when DIR is on overlayfs.
tmpfs_if_overlay() {
	mkdir -p "$1" || return 1
	if [ "$(stat -f -c %T "$1")" = overlayfs ]; then
		mount -t tmpfs -o mode=0711 tmpfs "$1" || return 1
	fi
}

start() {
	# Read-only cgroup mounts (a non-privileged job): make them writable.
	while read -r _ target fstype opts _; do
		case "$fstype" in cgroup | cgroup2) ;; *) continue ;; esac
		case ",$opts," in *,ro,*) mount -o remount,bind,rw "$target" || return 1 ;; esac
	done </proc/mounts
	tmpfs_if_overlay "$root" || return 1
	tmpfs_if_overlay "$state" || return 1
	dir=$(dirname "$addr")
	mkdir -p "$dir" || return 1
	sed -e "s#@DIR@/root#$root/root#" -e "s#@DIR@#$dir#g" \
		"$here/containerd-private.toml" >"$dir/config.toml" || return 1
	containerd --config "$dir/config.toml" >"$dir/containerd.log" 2>&1 </dev/null &
	for _ in $(seq 1 100); do answers && return 0; sleep 0.1; done
	echo "with-containerd: containerd did not start:" >&2
	tail -20 "$dir/containerd.log" >&2
	return 1
}

if ! answers; then
	if ! (start); then
		echo "with-containerd: no containerd at $addr; a job needs --privileged (or the capabilities and devices of hack/corral-image.sh run) to start its own" >&2
		[ $# -gt 0 ] || exit 1
	fi
fi
export CONTAINERD_ADDRESS=$addr
[ $# -gt 0 ] || exit 0
exec "$@"
