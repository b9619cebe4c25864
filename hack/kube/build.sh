#!/usr/bin/env bash
# Builds the test cluster's binaries from Go modules (no release downloads):
#   kubelet, kube-apiserver, kube-controller-manager, kube-scheduler
#     from k8s.io/kubernetes (hack/kube/build/kubernetes/go.mod)
#   etcd from go.etcd.io/etcd/server/v3 (hack/kube/build/etcd/go.mod)
#   corral-cni, the stub CNI plugin (hack/kube/cni), and the small static
#     test programs of hack/kube/cmd (pause, echo server/client).
#
# The binaries land in $CORRAL_KUBE_CACHE/<key>/bin (default
# /var/cache/corral-kube), where <key> hashes both modules' go.mod and go.sum,
# the Go version and this recipe: a rerun with the same inputs links nothing.
# Prints the bin directory on the last line of stdout.
#
# A cold build takes ~15 minutes of 2 cores and ~3 GB of memory per link;
# it runs under nice. Per-binary wall time and peak RSS go to
# <key>/build.log and stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${CORRAL_KUBE_CACHE:-/var/cache/corral-kube}
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false

k8s_version=v1.37.2
# Bump when the flags below change: the key must change with the output.
recipe=1
k8s_ldflags="-s -w
 -X k8s.io/component-base/version.gitVersion=${k8s_version}
 -X k8s.io/component-base/version.gitMajor=1
 -X k8s.io/component-base/version.gitMinor=37
 -X k8s.io/component-base/version.gitTreeState=clean"

key=$( {
	cat "$here"/build/kubernetes/go.mod "$here"/build/kubernetes/go.sum \
		"$here"/build/etcd/go.mod "$here"/build/etcd/go.sum
	go env GOVERSION
	echo "recipe=$recipe $k8s_ldflags"
} | sha256sum | cut -c1-16)
out=$cache/$key
bins=(kubelet kube-apiserver kube-controller-manager kube-scheduler etcd)

# The small programs are rebuilt every run (a second or two, Go's build cache
# makes it cheap) so edits to them are picked up; they live beside the big ones.
small() {
	(cd "$here/cni" && go build -trimpath -ldflags "-s -w" -o "$out/bin/corral-cni" .)
	(cd "$here/cmd" && go build -trimpath -ldflags "-s -w" -o "$out/bin/" ./...)
}

complete=1
for b in "${bins[@]}"; do [[ -x $out/bin/$b ]] || complete=0; done
if [[ $complete == 1 && -e $out/.complete ]]; then
	echo "cached: $out" >&2
	mkdir -p "$out/bin"
	small
	echo "$out/bin"
	exit 0
fi

mkdir -p "$out/bin"
log=$out/build.log
: >"$log"
say() { echo "$*" | tee -a "$log" >&2; }
say "building into $out ($(go env GOVERSION), $(nproc) cores)"

# build NAME DIR PKG [LDFLAGS]: one binary, timed (wall and CPU seconds: wall
# depends on what else the machine runs); peak RSS is the largest single
# process (the compiler or, for the big ones, the linker).
build() {
	local name=$1 dir=$2 pkg=$3 ldflags=${4:-"-s -w"}
	local tf
	tf=$(mktemp)
	(cd "$dir" && nice -n 10 /usr/bin/time -o "$tf" -f '%e %U %S %M' \
		go build -trimpath -ldflags "$ldflags" -o "$out/bin/.$name.tmp" "$pkg")
	mv "$out/bin/.$name.tmp" "$out/bin/$name"
	read -r secs user sys kb <"$tf"
	rm -f "$tf"
	say "$(printf '%-24s %7.1fs wall %7.1fs CPU  peak RSS %5d MB' "$name" "$secs" \
		"$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" $((kb / 1024)))"
}

t0=$(date +%s)
(cd "$here/build/kubernetes" && go mod download)
(cd "$here/build/etcd" && go mod download)
say "modules downloaded in $(($(date +%s) - t0))s"

# kubelet first: it is the longest, and the others reuse most of its packages.
for b in kubelet kube-apiserver kube-controller-manager kube-scheduler; do
	[[ -x $out/bin/$b ]] || build "$b" "$here/build/kubernetes" "k8s.io/kubernetes/cmd/$b" "$k8s_ldflags"
done
[[ -x $out/bin/etcd ]] || build etcd "$here/build/etcd" go.etcd.io/etcd/server/v3 \
	"-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v3.7.3"
touch "$out/.complete"
say "total $(($(date +%s) - t0))s wall; $(du -sh "$out/bin" | cut -f1) of binaries"
small
echo "$out/bin"
