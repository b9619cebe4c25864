#!/usr/bin/env bash
# hack/setup.sh [docker] [image] — make this machine ready for corral
# (Debian/Ubuntu, as root). Idempotent; `make demo`, `make test` and every
# target that needs containerd run it first.
#
# 1. Installs what is missing from the distribution, in one apt-get call
#    (hack/apt.sh: `apt-get update` at most once per boot):
#    always   containerd, runc, crun, runsc (the three OCI runtimes, see
#             docs/runtimes.md), libseccomp-dev, gcc and libc headers (cgo),
#             the tools the default image is assembled from (busybox-static,
#             ripgrep, file, git) and bubblewrap (benchmark baseline);
#    docker   docker.io, for Docker's containerd (`make test-docker`); its
#             service is not started (hack/docker-containerd.sh starts
#             dockerd by hand, with no bridge and no iptables rules);
#    image    buildah and debootstrap, for the top-level Dockerfile built
#             with no registry (`make image-docker`); docker.io to run it;
#    CI=true  all of the above, plus nodejs and npm (the MCP interoperability
#             test must not skip in CI).
#    A newcomer's `make demo` installs only the first line.
# 2. crun on a cgroup "hybrid" host (cgroup v1 hierarchies plus a cgroup2
#    one, as Debian 12 boots without systemd's unified layout) fails until
#    cgroup2 has no controller left: hack/crun-cgroups.sh mounts a v1
#    hierarchy for each leftover controller (hugetlb). A kernel-wide change
#    until reboot; docs/runtimes.md says what it does to the host.
#    CRUN_CGROUPS=0 skips it (crun then fails on such a host).
# 3. Finds a containerd that answers: $CONTAINERD_ADDRESS, else the system
#    socket /run/containerd/containerd.sock; when none answers it starts a
#    private one from hack/containerd-private.toml (root under
#    /var/lib/corral-containerd, sockets under /run/corral-containerd).
# 4. Writes the address it found to build/env as CONTAINERD_ADDRESS=..., for
#    the Makefile and the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/apt.sh

if [ "$(id -u)" != 0 ]; then
	echo "setup: corral needs root (containerd's socket, mounts, apt-get); run as root" >&2
	exit 1
fi

docker=0 image=0
for a in "$@"; do
	case "$a" in
	docker) docker=1 ;;
	image) image=1 docker=1 ;;
	*)
		echo "usage: $0 [docker] [image]" >&2
		exit 2
		;;
	esac
done
if [ "${CI:-}" = true ]; then
	docker=1 image=1
fi

need=()
want() { # want COMMAND PACKAGE: need PACKAGE unless COMMAND is on PATH
	command -v "$1" >/dev/null || need+=("$2")
}
want containerd containerd
want ctr containerd
want runc runc
want crun crun
want runsc runsc
[ -e /usr/include/seccomp.h ] || need+=(libseccomp-dev)
want busybox busybox-static
want rg ripgrep
want file file
want git git
want bwrap bubblewrap
want gcc gcc
# gcc only recommends libc6-dev; cgo (libseccomp) needs its headers.
[ -e /usr/include/stdlib.h ] || need+=(libc6-dev)
want pkg-config pkg-config
if [ "$docker" = 1 ]; then
	want dockerd docker.io
fi
if [ "$image" = 1 ]; then
	want buildah buildah
	want debootstrap debootstrap
fi
# The MCP interoperability test drives corral with npm's MCP client; CI
# must not skip it.
if [ "${CI:-}" = true ]; then
	want node nodejs
	want npm npm
	# The daemon's examples (Python, Node) and its socket-activation test.
	want python3 python3
	want systemd-socket-activate systemd
	# The Kubernetes phase (make kube, hack/kube/cluster.sh).
	want kubectl kubectl
	want openssl openssl
	want curl curl
	want ip iproute2
	want nsenter util-linux
fi
# One apt-get call, each package once.
mapfile -t need < <(printf '%s\n' "${need[@]}" | sed '/^$/d' | sort -u)
apt_install "${need[@]}"

if [ "${CRUN_CGROUPS:-1}" != 0 ] && command -v crun >/dev/null && ! hack/crun-cgroups.sh check 2>/dev/null; then
	hack/crun-cgroups.sh
fi

answers() { [ -S "$1" ] && timeout 5 ctr --address "$1" version >/dev/null 2>&1; }

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
