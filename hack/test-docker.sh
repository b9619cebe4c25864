#!/usr/bin/env bash
# hack/test-docker.sh — corral against Docker's containerd (`make test-docker`).
# As root; `hack/setup.sh docker` installed docker.io.
#
# 1. Starts Debian's dockerd by hand with no bridge and no iptables rules
#    (hack/docker-containerd.sh) and takes the address of its containerd.
# 2. Runs the integration subset against it with CONTAINERD_ADDRESS set: the
#    isolation tests, the hostile-case table and the session tests (every
#    Test function of the files below, so a test added there is run here
#    too). The tests work in the containerd namespace corral-test, never in
#    Docker's own (moby).
# 3. While they run, a monitor lists corral-test's containers and
#    `docker ps -a` twice a second: corral's containers must show up in
#    corral-test (else the monitor proves nothing) and never in Docker's
#    list, and Docker's list must not change.
# 4. Checks Docker's containerd holds nothing of corral's but images:
#    no container, task, lease or active snapshot in corral-test, nothing
#    corral-labelled in moby; stops dockerd; checks no mount is left under
#    the tests' state directories or Docker's directories and no shim of
#    corral-test still runs on Docker's containerd.
# Prints one timing line per step on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

NS=corral-test # internal/testutil.Namespace
FILES=(integration/isolation_test.go integration/cases_test.go integration/session_test.go)
RUN=${RUN:-/run/corral-docker}
DATA=${DATA:-/var/lib/corral-docker}
GO=${GO:-go}

t0=$(date +%s)
phase() { echo "test-docker: $1 ($(($(date +%s) - t0)) s)" >&2; }
fail() {
	echo "test-docker: FAIL: $*" >&2
	exit 1
}

tests=()
for f in "${FILES[@]}"; do
	[ -e "$f" ] || fail "$f is gone: update FILES in $0"
	mapfile -t -O "${#tests[@]}" tests < <(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' "$f")
done
[ ${#tests[@]} -gt 0 ] || fail "no tests found in ${FILES[*]}"
pattern="^($(
	IFS='|'
	echo "${tests[*]}"
))\$"

addr=$(hack/docker-containerd.sh start)
DOCKER_HOST=$(hack/docker-containerd.sh docker)
export DOCKER_HOST
phase "dockerd up; its containerd answers at $addr"
dctr() { ctr --address "$addr" "$@"; }

docker ps -a -q --no-trunc | sort >"$RUN/test-docker.before"
mon=$(mktemp -d)
(
	while :; do
		dctr -n "$NS" containers ls -q >>"$mon/corral" 2>/dev/null || true
		docker ps -a -q --no-trunc >>"$mon/docker" 2>/dev/null || true
		sleep 0.5
	done
) &
monpid=$!
trap 'kill "$monpid" 2>/dev/null || true; rm -rf "$mon"; [ -z "${tmp:-}" ] || rm -rf --one-file-system "$tmp"' EXIT

# The tests' state directories and scratch files go under a directory of
# this run's own, so the mount check below sees only this run's.
tmp=$(mktemp -d /var/tmp/corral-test-docker.XXXXXX)
phase "running ${#tests[@]} tests: ${tests[*]}"
rc=0
TMPDIR=$tmp CONTAINERD_ADDRESS=$addr $GO test -count=1 -timeout 30m -run "$pattern" ./integration/ || rc=$?
kill "$monpid" 2>/dev/null || true
wait "$monpid" 2>/dev/null || true
phase "tests done (exit $rc)"
[ "$rc" = 0 ] || fail "the integration subset failed against Docker's containerd"

# What corral made must show up in its own namespace and never in Docker's.
sort -u "$mon/corral" | sed '/^$/d' >"$mon/corral.ids"
sort -u "$mon/docker" | sed '/^$/d' >"$mon/docker.ids"
[ -s "$mon/corral.ids" ] || fail "the monitor never saw a container in $NS: it proves nothing"
seen=$(comm -12 "$mon/corral.ids" "$mon/docker.ids")
[ -z "$seen" ] || fail "docker ps -a listed corral's containers: $seen"
new=$(comm -13 "$RUN/test-docker.before" "$mon/docker.ids")
[ -z "$new" ] || fail "docker ps -a changed while the tests ran: $new"
echo "test-docker: $(wc -l <"$mon/corral.ids") corral containers came and went in $NS; docker ps -a never listed one" >&2

# Nothing of corral's is left in Docker's containerd but images.
left=$(dctr -n "$NS" containers ls -q)
[ -z "$left" ] || fail "containers left in $NS: $left"
left=$(dctr -n "$NS" tasks ls -q)
[ -z "$left" ] || fail "tasks left in $NS: $left"
left=$(dctr -n "$NS" leases ls | awk 'NR > 1 && /dev\.corral-sandbox\./ {print $1}')
[ -z "$left" ] || fail "corral's leases left in $NS: $left"
left=$(dctr -n "$NS" snapshots ls | awk 'NR > 1 && $NF == "Active" {print $1}')
[ -z "$left" ] || fail "active snapshots left in $NS: $left"
left=$(dctr -n moby containers ls -q 'labels."dev.corral-sandbox.owner"')
[ -z "$left" ] || fail "corral-labelled containers in Docker's namespace moby: $left"
phase "Docker's containerd holds no container, task, lease or active snapshot of corral's"

hack/docker-containerd.sh stop
! timeout 5 docker version >/dev/null 2>&1 || fail "dockerd still answers after stop"
phase "dockerd stopped"
left=$(awk '{print $5}' /proc/self/mountinfo | grep -E "^($RUN|$DATA|$tmp)" || true)
[ -z "$left" ] || fail "mounts left: $left"
left=$(pgrep -a -f "containerd-shim.* -namespace $NS .*-address $addr" || true)
[ -z "$left" ] || fail "shims of $NS still run: $left"
phase "no mount under $RUN, $DATA or the tests' state directories; no shim of $NS on Docker's containerd"
