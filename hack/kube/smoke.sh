#!/usr/bin/env bash
# Smoke test of the test cluster harness: up, a DaemonSet serving a unix
# socket in a hostPath directory, a uid-1000 Pod without hostNetwork calling
# it, kubectl logs and exec, Pod Security through
# `kubectl apply --dry-run=server --validate=strict`, down with nothing left.
# Prints each phase's time and the cluster's memory; exits non-zero on the
# first failure (the logs are kept in $CORRAL_KUBE_ARTIFACTS, default
# /tmp/<state dir's name>-smoke, e.g. /tmp/corral-kube-smoke, on failure).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cluster=$here/cluster.sh
artifacts=${CORRAL_KUBE_ARTIFACTS:-/tmp/$(basename "${CORRAL_KUBE_STATE:-/var/tmp/corral-kube}")-smoke}
k() { "$cluster" kubectl "$@"; }

declare -a report
phase_start=
phase() { phase_start=$EPOCHREALTIME; echo "== $*" >&2; }
done_phase() {
	local secs
	secs=$(awk -v a="$phase_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
	report+=("$(printf '%-44s %6ss' "$1" "$secs")")
}
fail() {
	echo "FAIL: $*" >&2
	k get pods -A -o wide >&2 || true
	k get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -n 20 >&2 || true
	"$cluster" down --keep-logs "$artifacts" || true
	echo "logs kept in $artifacts" >&2
	exit 1
}
expect() { # DESCRIPTION PATTERN TEXT
	grep -qE -- "$2" <<<"$3" || fail "$1: want /$2/, got: $3"
	echo "ok: $1" >&2
}

# What the host looks like before: the cluster must change none of it.
host_state() {
	ip -o link | sed 's/^[0-9]*: //' | cut -d' ' -f1 | sort
	ip route; ip -6 route
	local s
	for s in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops \
		kernel/keys/root_maxkeys kernel/keys/root_maxbytes; do
		echo "$s=$(cat /proc/sys/$s)"
	done
	ls /run/netns 2>/dev/null || true
}
host_before=$(host_state)

phase "build (cached after the first run)"
bin=$("$here/build.sh" | tail -n1)
done_phase "build.sh"

phase "cluster up"
CORRAL_KUBE_BIN=$bin "$cluster" up || fail "up"
done_phase "cluster up"
eval "$("$cluster" env)"

phase "image import"
"$here/import-image.sh" -name corral.local/kube/echo:1 "$bin/kube-echo" "$bin/kube-pause" >/dev/null ||
	fail "import"
done_phase "import an image (kube-mkimage + ctr import)"

phase "DaemonSet and client Pod"
k apply -f "$here/smoke/echo.yaml" >/dev/null || fail "apply"
k rollout status -n corral-smoke ds/echo --timeout=120s >/dev/null || fail "DaemonSet not ready"
k wait -n corral-smoke --for=condition=Ready pod/client --timeout=120s >/dev/null || fail "client not ready"
done_phase "apply -> DaemonSet and client Pod Ready"

phase "exec, socket, logs"
ip=$(k get pod -n corral-smoke client -o jsonpath='{.status.podIP}')
expect "client Pod has an IP from the stub CNI" '^198\.19\.' "$ip"
uid=$(k get pod -n corral-smoke client -o jsonpath='{.metadata.uid}')
out=$(k exec -n corral-smoke client -- /kube-echo call /run/corral-smoke/echo.sock hello 2>&1) || fail "exec: $out"
expect "client reaches the DaemonSet's socket as uid 1000, identified by Pod UID" \
	"^echo hello uid=1000 pid=[1-9][0-9]* pod=$uid\$" "$out"
out=$(k exec -n corral-smoke client -- /kube-echo -wait 1s call /run/corral-smoke/no-such.sock x 2>&1 || true)
expect "a missing socket fails" "no such file" "$out"
out=$(k logs -n corral-smoke ds/echo -c server 2>&1) || fail "logs: $out"
expect "kubectl logs shows the server's log" "uid=1000 pid=[0-9]+ pod=$uid: \"hello\"" "$out"
for _ in $(seq 50); do
	out=$("$cluster" exec cat /var/lib/corral-smoke/m/mounted 2>&1) && break
	sleep 0.2
done
expect "a Bidirectional mount made in a Pod is seen by the node" "by kube-echo" "$out"
[[ ! -e /var/lib/corral-smoke ]] || fail "the node's /var/lib leaked to the host"
done_phase "exec + unix socket call + logs + propagation"

phase "Pod Security through dry-run"
k apply -f "$here/smoke/baseline.yaml" >/dev/null || fail "namespace"
dry() { k apply --dry-run=server --validate=strict "$@" 2>&1; }
out=$(dry -n corral-baseline -f "$here/smoke/privileged-pod.yaml") && fail "privileged Pod accepted: $out"
expect "baseline namespace refuses a privileged Pod" 'violates PodSecurity "baseline:latest".*privileged' "$out"
out=$(dry -n default -f "$here/smoke/privileged-pod.yaml") && fail "privileged Pod accepted in default: $out"
expect "an unlabelled namespace enforces the configured default (baseline)" 'violates PodSecurity "baseline' "$out"
out=$(dry -n corral-baseline -f "$here/smoke/plain-pod.yaml") || fail "plain Pod refused: $out"
expect "a plain Pod passes baseline (warned about restricted)" 'created \(server dry run\)' "$out"
out=$(dry -n corral-baseline -f "$here/smoke/unknown-field-pod.yaml") && fail "unknown field accepted: $out"
expect "--validate=strict refuses an unknown field" 'unknown field "spec.containers\[0\].comand"' "$out"
done_phase "dry-run checks"

mem=$("$cluster" mem)
pods=$(k get pods -A --no-headers | wc -l)

phase "cluster down"
state=$CORRAL_KUBE_STATE cgroot=$CORRAL_KUBE_CGROUP_ROOT pid=$CORRAL_KUBE_PID
"$cluster" down || fail "down"
done_phase "cluster down"
[[ ! -e $state ]] || fail "state $state left"
[[ ! -e /proc/$pid ]] || fail "node PID 1 left"
left=$(find /sys/fs/cgroup -mindepth 2 -maxdepth 2 -name "${cgroot#/}" 2>/dev/null)
[[ -z $left ]] || fail "cgroups left: $left"
! grep -q "$state" /proc/self/mountinfo || fail "mounts left"
echo "ok: nothing left (state, processes, cgroups, mounts)" >&2
host_after=$(host_state)
[[ $host_after == "$host_before" ]] || fail "the host changed: $(diff <(echo "$host_before") <(echo "$host_after"))"
echo "ok: host links, routes, sysctls and /run/netns unchanged" >&2

echo
echo "smoke test passed"
printf '%s\n' "${report[@]}"
echo "memory: ${mem} MB RSS for all node processes with ${pods} Pods running"
