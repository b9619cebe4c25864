#!/usr/bin/env bash
# hack/build-runsc.sh — build gVisor's runsc (and its containerd shim) from
# the Go module proxy, pinned, for hosts whose distribution runsc is too old
# (Debian 12's 0.0~20221219 fails coreutils 9.1's statx(AT_NO_AUTOMOUNT)
# with EINVAL, has no openat2, and cannot signal a created container).
#
# gvisor.dev/gvisor has no release tags on the proxy; the "go" branch is
# served as pseudo-versions (`go list -m gvisor.dev/gvisor@latest`), while
# branch names (@go, @master) are refused. Pin one here.
#
# Usage: hack/build-runsc.sh [OUTDIR]   (default build/gvisor; idempotent)
# Prints the path of runsc. Takes ~12 min and ~1.5 GB of module cache on 2
# busy cores; the binaries are ~100 MB (runsc) and ~44 MB (shim).
#
# The shim (containerd-shim-runsc-v1, used as runtime name by absolute path
# on containerd 1.6) needs CAP_SYS_RESOURCE: it sets its own oom_score_adj
# to -999 and fails to start without it ("failed to set OOM Score on shim:
# ... permission denied"). runsc itself runs under the runc v2 shim with
# corral's wrapper (`corral --runtime runsc --runtime-binary <this runsc>`,
# docs/runtimes.md). With --network=none it
# keeps one empty network namespace, bind-mounted at <--root>/null-netns and
# shared by its sandboxes: unmount it before removing that directory.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${GVISOR_VERSION:-v0.0.0-20260905035102-160fafc42237}
OUT=${1:-build/gvisor}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if [ -x "$OUT/runsc" ] && [ "$(cat "$OUT/VERSION" 2>/dev/null)" = "$VERSION" ]; then
	echo "$OUT/runsc"
	exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat >go.mod <<EOF
module corral.local/build-runsc

go 1.26
EOF
echo "build-runsc: gvisor.dev/gvisor@$VERSION" >&2
go get "gvisor.dev/gvisor/runsc@$VERSION" "gvisor.dev/gvisor/shim@$VERSION" >&2
CGO_ENABLED=0 go build -trimpath -o "$OUT/runsc" gvisor.dev/gvisor/runsc
CGO_ENABLED=0 go build -trimpath -o "$OUT/containerd-shim-runsc-v1" gvisor.dev/gvisor/shim
echo "$VERSION" >"$OUT/VERSION"
echo "$OUT/runsc"
