#!/usr/bin/env bash
# hack/with-containerd.sh CMD... — run CMD with a containerd that answers at
# $CONTAINERD_ADDRESS, starting a private one (hack/containerd-private.toml)
# when none does. Meant as the entry point of corral's image in a CI job
# (see hack/corral-image.sh run): there the cgroup v1 hierarchies are
# bind-mounted read-only by Docker unless the job is --privileged, so they
# are remounted read-write first (needs CAP_SYS_ADMIN).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
addr=${CONTAINERD_ADDRESS:-/run/corral-containerd/containerd.sock}
answers() { timeout 5 ctr --address "$addr" version >/dev/null 2>&1; }

if ! answers; then
	# Read-only cgroup mounts (a non-privileged job): make them writable.
	while read -r _ target fstype opts _; do
		case "$fstype" in cgroup | cgroup2) ;; *) continue ;; esac
		case ",$opts," in *,ro,*) mount -o remount,bind,rw "$target" ;; esac
	done </proc/mounts
	dir=$(dirname "$addr")
	mkdir -p "$dir" /var/lib/corral-containerd
	sed -e "s#@DIR@/root#/var/lib/corral-containerd/root#" -e "s#@DIR@#$dir#g" \
		"$here/containerd-private.toml" >"$dir/config.toml"
	containerd --config "$dir/config.toml" >"$dir/containerd.log" 2>&1 </dev/null &
	for _ in $(seq 1 100); do answers && break; sleep 0.1; done
	answers || { echo "with-containerd: containerd did not start:" >&2; tail -20 "$dir/containerd.log" >&2; exit 1; }
fi
export CONTAINERD_ADDRESS=$addr
exec "$@"
