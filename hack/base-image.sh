#!/usr/bin/env bash
# hack/base-image.sh — a Debian 12 base image made on this machine, with no
# registry: debootstrap (minbase) from the machine's own apt mirror, then
# imported into buildah's local storage (containers-storage) as
# localhost/debian:bookworm-minbase. As root.
#
# Idempotent and cached: the rootfs tarball is kept under $CACHE (default
# /var/cache/corral-base) and reused; the import is skipped when the image
# already carries the tarball's sha256 (label dev.corral-sandbox.rootfs).
#
# Usage: hack/base-image.sh [IMAGE]     (prints the image name on stdout)
# Environment: CACHE, MIRROR (default: the first deb.debian.org-style URI of
# /etc/apt/sources.list*), SUITE (default bookworm), REBUILD=1 to redo the
# debootstrap.
set -euo pipefail

IMAGE=${1:-localhost/debian:bookworm-minbase}
SUITE=${SUITE:-bookworm}
CACHE=${CACHE:-/var/cache/corral-base}
TAR=$CACHE/$SUITE-minbase.tar

if [ "$(id -u)" != 0 ]; then
	echo "base-image: needs root (debootstrap, buildah storage)" >&2
	exit 1
fi

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v buildah >/dev/null || need+=(buildah)
# shellcheck source=hack/apt.sh
. "$(dirname "$0")/apt.sh"
apt_install "${need[@]}"

# The mirror the machine already uses (deb822 .sources or one-line .list).
mirror() {
	local m
	m=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -1 || true)
	if [ -z "$m" ]; then
		m=$(grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | grep -E "[[:space:]]${SUITE}[[:space:]]" | awk '{print $2}' | head -1 || true)
	fi
	echo "${m:-http://deb.debian.org/debian}"
}
MIRROR=${MIRROR:-$(mirror)}

mkdir -p "$CACHE"
if [ ! -s "$TAR" ] || [ "${REBUILD:-}" = 1 ]; then
	root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
	trap 'rm -rf "$root"' EXIT
	echo "base-image: debootstrap --variant=minbase $SUITE from $MIRROR" >&2
	start=$(date +%s)
	debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
		{ tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
	# What an image does not need: apt lists, caches, logs, machine identity.
	rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
		"$root"/var/log/* "$root"/tmp/* "$root"/etc/machine-id
	: >"$root/etc/machine-id"
	# Fixed mtimes and sorted names: the same packages give the same tar.
	tar --numeric-owner --sort=name --mtime=@0 --xattrs -C "$root" -cf "$TAR.tmp" .
	mv "$TAR.tmp" "$TAR"
	rm -rf "$root"
	trap - EXIT
	echo "base-image: rootfs $(du -h "$TAR" | cut -f1) in $(($(date +%s) - start)) s" >&2
fi

# The tarball's sha256, computed once per tarball.
if [ ! -s "$TAR.sha256" ] || [ "$TAR" -nt "$TAR.sha256" ]; then
	sha256sum "$TAR" | cut -d' ' -f1 >"$TAR.sha256"
fi
sum=$(cat "$TAR.sha256")
have=$(buildah inspect --type image --format '{{index .ImageAnnotations "dev.corral-sandbox.rootfs"}}{{index .OCIv1.Config.Labels "dev.corral-sandbox.rootfs"}}' "$IMAGE" 2>/dev/null || true)
if [ "$have" != "$sum" ]; then
	echo "base-image: importing $TAR as $IMAGE" >&2
	ctr=$(buildah from --quiet scratch)
	trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
	buildah add --quiet "$ctr" "$TAR" / >/dev/null
	buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--cmd /bin/bash --label "dev.corral-sandbox.rootfs=$sum" --os linux --arch "$(dpkg --print-architecture)" "$ctr"
	buildah commit --quiet --rm "$ctr" "$IMAGE" >/dev/null
	trap - EXIT
fi
echo "$IMAGE"
