# shellcheck shell=bash
# hack/apt.sh — sourced by the set-up scripts (bash); not run on its own.
#
# apt_install PKG...  installs the packages with apt-get (as root), running
# `apt-get update` at most once per boot of the machine: the first update
# leaves a stamp in /run (a tmpfs, so a reboot forgets it), and later calls
# of any set-up script skip the update. When an install fails after a
# skipped update (a stale package list), it updates once more and retries.
#
# A package that starts a daemon on install (docker.io, on a systemd host)
# is installed with services held back by policy-rc.d(8), and its units are
# disabled afterwards: corral's scripts start dockerd themselves, without a
# bridge or iptables rules (hack/docker-containerd.sh), and a Docker that
# starts at boot with its default bridge would change the host's network.

APT_STAMP=/run/corral-setup/apt-updated

apt_update() {
	echo "apt: apt-get update" >&2
	mkdir -p "$(dirname "$APT_STAMP")"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
	: >"$APT_STAMP"
}

# apt_install PKG... — install what is missing; a no-op with no packages.
apt_install() {
	[ $# -gt 0 ] || return 0
	if [ "$(id -u)" != 0 ]; then
		echo "apt: missing $*; run as root (apt-get install needs it)" >&2
		return 1
	fi
	local updated=0 held=0 made=0 rc=0 p
	if [ ! -e "$APT_STAMP" ]; then
		apt_update
		updated=1
	fi
	# Hold services back while a daemon package is installed.
	for p in "$@"; do
		case "$p" in docker.io) held=1 ;; esac
	done
	if [ "$held" = 1 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 0755 /usr/sbin/policy-rc.d
		made=1
	fi
	echo "apt: installing $* (log: $APT_LOG)" >&2
	_apt_get_install "$@" || rc=$?
	if [ "$rc" != 0 ] && [ "$updated" = 0 ]; then
		apt_update
		rc=0
		_apt_get_install "$@" || rc=$?
	fi
	[ "$made" = 0 ] || rm -f /usr/sbin/policy-rc.d
	[ "$rc" = 0 ] || return "$rc"
	if [ "$held" = 1 ] && [ -d /run/systemd/system ]; then
		echo "apt: disabling docker.service and docker.socket (corral's scripts start dockerd with no bridge and no iptables rules)" >&2
		systemctl disable --now docker.socket docker.service >&2 2>&1 || true
	fi
}

# _apt_get_install PKG...: apt-get install with its chatter (dpkg's
# unpacking lines) in $APT_LOG, shown only when it fails.
APT_LOG=/run/corral-setup/apt.log
_apt_get_install() {
	mkdir -p "$(dirname "$APT_LOG")"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >"$APT_LOG" 2>&1; then
		tail -30 "$APT_LOG" >&2
		return 1
	fi
}
