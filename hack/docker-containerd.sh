#!/usr/bin/env bash
# hack/docker-containerd.sh — run Debian's Docker (docker.io, 20.10) by hand,
# without touching the host network, so that corral can be tested against
# Docker's containerd. As root.
#
#   start    start dockerd (idempotent) and print its containerd's address
#   stop     stop dockerd (and with it the containerd it manages)
#   address  print the containerd address (the socket dockerd's managed
#            containerd listens on); exit 1 when it does not answer
#   docker   print the DOCKER_HOST value for the docker CLI
#
# dockerd runs with its own --data-root and --exec-root (under $DATA and
# $RUN), no bridge, no iptables/ip6tables rules, no ip_forward or masquerade
# change, and no userland proxy. When nothing listens at
# /run/containerd/containerd.sock dockerd starts a containerd of its own
# ("managed") whose socket is $RUN/containerd/containerd.sock; when the system
# containerd answers there, dockerd uses that one instead and `address`
# prints it. Either way Docker's own objects live in the containerd
# namespace "moby"; corral keeps to its own namespace ("corral").
set -euo pipefail

DATA=${DATA:-/var/lib/corral-docker}
RUN=${RUN:-/run/corral-docker}
SOCK=$RUN/docker.sock
PIDFILE=$RUN/dockerd.pid

if [ "$(id -u)" != 0 ]; then
	echo "docker-containerd: needs root" >&2
	exit 1
fi

answers() { timeout 5 ctr --address "$1" version >/dev/null 2>&1; }
docker_answers() { timeout 5 docker -H "unix://$SOCK" version >/dev/null 2>&1; }

address() {
	local a
	for a in "$RUN/containerd/containerd.sock" /run/containerd/containerd.sock; do
		if answers "$a"; then
			echo "$a"
			return 0
		fi
	done
	return 1
}

start() {
	if ! command -v dockerd >/dev/null; then
		# shellcheck source=hack/apt.sh
		. "$(dirname "$0")/apt.sh"
		apt_install docker.io
	fi
	mkdir -p "$DATA" "$RUN"
	if ! docker_answers; then
		# dockerd binds its data root onto itself at start (to make it
		# shared) and unmounts it at a clean stop; one that died left the
		# bind, which the next dockerd would take as the host's and never
		# remove. No dockerd answers here, so it is a leftover.
		while awk '{print $5}' /proc/self/mountinfo | grep -qx "$DATA"; do
			umount "$DATA" || umount -l "$DATA"
		done
		echo "docker-containerd: starting dockerd (log: $RUN/dockerd.log)" >&2
		# --config-file: an empty file, so /etc/docker/daemon.json (if any)
		# cannot add a bridge, iptables rules or a registry mirror.
		[ -e "$RUN/daemon.json" ] || echo '{}' >"$RUN/daemon.json"
		nohup dockerd \
			--config-file "$RUN/daemon.json" \
			--data-root "$DATA" --exec-root "$RUN" --pidfile "$PIDFILE" \
			-H "unix://$SOCK" \
			--bridge=none --iptables=false --ip6tables=false \
			--ip-forward=false --ip-masq=false --userland-proxy=false \
			>"$RUN/dockerd.log" 2>&1 </dev/null &
		for _ in $(seq 1 300); do docker_answers && break; sleep 0.1; done
		docker_answers || { echo "docker-containerd: dockerd did not start; see $RUN/dockerd.log" >&2; tail -20 "$RUN/dockerd.log" >&2; exit 1; }
	fi
	for _ in $(seq 1 100); do address >/dev/null && break; sleep 0.1; done
	address || { echo "docker-containerd: no containerd answers for dockerd" >&2; exit 1; }
}

stop() {
	if [ -s "$PIDFILE" ]; then
		pid=$(cat "$PIDFILE")
		if kill "$pid" 2>/dev/null; then
			for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		fi
	fi
	# dockerd stops the containerd it manages; wait for its socket to go.
	for _ in $(seq 1 100); do answers "$RUN/containerd/containerd.sock" || break; sleep 0.1; done
	# libnetwork binds network namespaces under $RUN/netns (the host's own as
	# "default", once a container used --network host) and leaves them when
	# dockerd exits; with dockerd gone nothing uses them.
	if ! docker_answers; then
		{ awk '{print $5}' /proc/self/mountinfo | grep "^$RUN/netns/" || true; } | while read -r m; do
			umount "$m" || umount -l "$m"
		done
	fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
address) address ;;
docker) echo "unix://$SOCK" ;;
*)
	echo "usage: $0 start|stop|address|docker" >&2
	exit 2
	;;
esac
