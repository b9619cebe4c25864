#!/usr/bin/env bash
# Imports images into the test cluster's containerd, namespace k8s.io (the
# CRI's), where Pods find them without a registry. Either archives:
#
#   hack/kube/import-image.sh IMAGE.tar...
#
# (OCI layout or docker-save archives, e.g. from kube-mkimage or `ctr images
# export`), or an image made on the fly from files, with kube-mkimage's flags:
#
#   hack/kube/import-image.sh -name corral.local/corral:dev -entrypoint /corral \
#       build/corral build/corral-init=/.corral/init
#
# Give Pods `imagePullPolicy: Never` (or IfNotPresent with a tag other than
# :latest): nothing can be pulled.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
eval "$("$here/cluster.sh" env)"
ctr=(ctr --address "$CORRAL_KUBE_CONTAINERD" -n k8s.io)

if [[ ${1:-} == -* ]]; then
	tmp=$(mktemp --suffix=.tar)
	trap 'rm -f "$tmp"' EXIT
	"$CORRAL_KUBE_BIN/kube-mkimage" -o "$tmp" "$@"
	set -- "$tmp"
fi
[[ $# -gt 0 ]] || { sed -n '2,15p' "$0" >&2; exit 2; }
for tar in "$@"; do
	"${ctr[@]}" images import "$tar"
done
