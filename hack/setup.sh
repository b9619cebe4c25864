#!/usr/bin/env bash
# hack/setup.sh — make this machine ready for corral (Debian/Ubuntu, as root).
#
# 1. Installs what corral needs from the distribution when it is missing:
#    containerd, runc, libseccomp (runtime and headers for cgo), the tools the
#    default image is assembled from, and bubblewrap (benchmark baseline).
# 2. Finds a containerd that answers: $CONTAINERD_ADDRESS, else the system
#    socket /run/containerd/containerd.sock; when none answers it starts a
#    private one from hack/containerd-private.toml (root under
#    /var/lib/corral-containerd, sockets under /run/corral-containerd).
# 3. Writes the address it found to build/env as CONTAINERD_ADDRESS=..., for
#    the Makefile and the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "setup: corral needs root (containerd's socket, mounts, apt-get); run as root" >&2
	exit 1
fi

need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
command -v ctr >/dev/null || need+=(containerd)
[ -e /usr/include/seccomp.h ] || need+=(libseccomp-dev)
command -v busybox >/dev/null || need+=(busybox-static)
command -v rg >/dev/null || need+=(ripgrep)
command -v file >/dev/null || need+=(file)
command -v git >/dev/null || need+=(git)
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v gcc >/dev/null || need+=(gcc)
# gcc only recommends libc6-dev; cgo (libseccomp) needs its headers.
[ -e /usr/include/stdlib.h ] || need+=(libc6-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
# The MCP interoperability test drives corral with npm's MCP client; CI
# must not skip it.
if [ "${CI:-}" = true ]; then
	command -v node >/dev/null || need+=(nodejs)
	command -v npm >/dev/null || need+=(npm)
	# The daemon's examples (Python, Node) and its socket-activation test.
	command -v python3 >/dev/null || need+=(python3)
	command -v systemd-socket-activate >/dev/null || need+=(systemd)
fi
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "setup: missing ${need[*]}; run as root (apt-get install needs it)" >&2
		exit 1
	fi
	echo "setup: installing ${need[*]} from the distribution" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

answers() { timeout 5 ctr --address "$1" version >/dev/null 2>&1; }

addr=""
if [ -n "${CONTAINERD_ADDRESS:-}" ] && answers "$CONTAINERD_ADDRESS"; then
	addr=$CONTAINERD_ADDRESS
elif answers /run/containerd/containerd.sock; then
	addr=/run/containerd/containerd.sock
else
	dir=/run/corral-containerd
	addr=$dir/containerd.sock
	if ! answers "$addr"; then
		mkdir -p "$dir" /var/lib/corral-containerd
		sed -e "s#@DIR@/root#/var/lib/corral-containerd/root#" -e "s#@DIR@#$dir#g" \
			hack/containerd-private.toml >"$dir/config.toml"
		echo "setup: starting a private containerd at $addr (log: $dir/containerd.log)" >&2
		nohup containerd --config "$dir/config.toml" >"$dir/containerd.log" 2>&1 </dev/null &
		for _ in $(seq 1 100); do answers "$addr" && break; sleep 0.1; done
		answers "$addr" || { echo "setup: containerd did not start; see $dir/containerd.log" >&2; tail -20 "$dir/containerd.log" >&2; exit 1; }
	fi
fi
mkdir -p build
echo "CONTAINERD_ADDRESS=$addr" >build/env
echo "setup: containerd answers at $addr" >&2
