#!/usr/bin/env bash
# hack/corral-image.sh — corral's image (the top-level Dockerfile), built and
# run with no registry. As root, from anywhere.
#
#   build        base image (hack/base-image.sh), `make build`, then
#                buildah bud of ./Dockerfile -> $IMAGE in buildah's storage
#                (--isolation chroot: Debian 12's buildah defaults to crun,
#                which a cgroup-hybrid host refuses unless
#                hack/crun-cgroups.sh ran); prints the image name and, on
#                stderr, its size
#   load         copy $IMAGE into the Docker of hack/docker-containerd.sh
#                (docker-archive + docker load; buildah's docker-daemon:
#                transport failed here with "io: read/write on closed
#                pipe"); skipped when Docker already has the same image id
#   run [ARGS]   run the image in that Docker as a CI job would: its own
#                containerd inside (the image's entry point,
#                with-containerd), containerd's content on a volume, no
#                network; ARGS default to the demo (hack/demo.sh on
#                examples/demo-repo, from a copy of the repository bound at
#                /src)
#   flags        print the docker run flags of a privileged job on this host
#                (one per line), for other scripts and tests
#
# Environment: IMAGE (default localhost/corral:dev), BASE (default
# localhost/debian:bookworm-minbase).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-localhost/corral:dev}
BASE=${BASE:-localhost/debian:bookworm-minbase}

# The job's privileges. --privileged asks for every capability, and fails
# ("unable to apply caps: operation not permitted") on hosts whose bounding
# set lacks one (this VM has no CAP_SYS_RESOURCE); the list below is
# --privileged less that capability, and with the host's devices cgroup
# rule instead of its device nodes. On a host with every capability,
# --privileged does the same.
job_flags() {
	local bnd
	bnd=$((16#$(awk '/^CapBnd:/ {print $2}' /proc/self/status)))
	if (((bnd >> 24) & 1)); then # CAP_SYS_RESOURCE
		JOB_FLAGS=(--privileged)
		return
	fi
	JOB_FLAGS=(--cap-add ALL --cap-drop SYS_RESOURCE
		--security-opt seccomp=unconfined --security-opt apparmor=unconfined
		--security-opt systempaths=unconfined --device-cgroup-rule "a *:* rwm")
}

build() {
	hack/base-image.sh "$BASE" >/dev/null
	make build >&2
	buildah bud --isolation chroot --layers --build-arg "BASE=$BASE" \
		-f Dockerfile -t "$IMAGE" . >&2
	echo "corral-image: $IMAGE is $(buildah images --format '{{.Size}}' "$IMAGE" | head -1)" >&2
	echo "$IMAGE"
}

docker_env() {
	DOCKER_HOST=$(hack/docker-containerd.sh docker)
	export DOCKER_HOST
	hack/docker-containerd.sh start >/dev/null
}

load() {
	docker_env
	local want have
	want=$(buildah inspect --type image --format '{{.FromImageID}}' "$IMAGE")
	have=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
	if [ "$have" = "sha256:$want" ]; then
		return 0
	fi
	tmp=$(mktemp -d /var/tmp/corral-image.XXXXXX)
	trap 'rm -rf "$tmp"' EXIT
	buildah push --quiet "$IMAGE" "docker-archive:$tmp/image.tar:$IMAGE" >&2
	docker load --quiet -i "$tmp/image.tar" >&2
}

run() {
	docker_env
	src=$(mktemp -d /var/tmp/corral-src.XXXXXX)
	trap 'rm -rf "$src"' EXIT
	git archive HEAD | tar -x -C "$src"
	mkdir -p "$src/build"
	if [ $# -eq 0 ]; then
		set -- bash hack/demo.sh /usr/local/bin/corral
	fi
	job_flags
	docker run --rm "${JOB_FLAGS[@]}" --network none \
		-v corral-ci-state:/var/lib/corral-containerd -v "$src:/src" -w /src --tmpfs /run:exec \
		"$IMAGE" "$@"
}

case "${1:-}" in
build) build ;;
load) load ;;
run)
	shift
	run "$@"
	;;
flags)
	job_flags
	printf '%s\n' "${JOB_FLAGS[@]}"
	;;
*)
	echo "usage: $0 build|load|run [CMD...]|flags" >&2
	exit 2
	;;
esac
