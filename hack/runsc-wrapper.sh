#!/bin/sh
# hack/runsc-wrapper.sh — gVisor's runsc as the runc v2 shim's binary.
#
# Debian 12 ships runsc (0.0~20221219) without containerd-shim-runsc-v1. The
# runc v2 shim (io.containerd.runc.v2) can drive it with
# options.Options{BinaryName: <this file>, Root: <dir>}: the shim calls
# `BINARY --root R --log L --log-format json create|start|kill|delete ...`
# like runc. BinaryName is a path, not a command line, so runsc's own flags
# come from this wrapper:
#   --network=none  without it `start` fails with "cannot run with network
#                   enabled in root network namespace" (the spec's network
#                   namespace has no path); the sandbox then has only lo.
#   --oci-seccomp   apply the spec's linux.seccomp inside the sandbox; without
#                   it runsc ignores the spec's filter (/proc/self/status shows
#                   Seccomp: 0 and AF_INET sockets succeed).
# And one fix: runsc 20221219 refuses to signal a container that was created
# but never started ("cannot signal container in state created"), so the
# shim's kill — and with it task.Delete(WithProcessKill) and every reaper —
# fails and leaves the sandbox, the gofer, the cgroup and the container
# record behind. For such a container `kill` becomes `delete --force`, which
# stops the sandbox; the shim then sees the exit (137) and deletes as usual.
# (runsc built from a 2026 gvisor.dev/gvisor signals created containers and
# needs no fix.)
#
# Install: copy to a root-owned path with mode 0755, set RUNSC below (or in
# the environment of containerd) to the runsc binary, and pass that path as
# BinaryName.
RUNSC=${CORRAL_RUNSC:-/usr/bin/runsc}

root="" sub="" id="" n=0
for a in "$@"; do
	n=$((n + 1))
	case "$a" in
	--root) eval "root=\${$((n + 1))}" ;;
	kill) sub="kill"; break ;;
	create | start | delete | state | ps | exec | pause | resume | events | update | features | checkpoint | restore) break ;;
	esac
done
if [ "$sub" = kill ] && [ -n "$root" ]; then
	# kill [--all] ID SIGNAL: the ID is the next-to-last argument.
	eval "id=\${$(($# - 1))}"
	if "$RUNSC" --root "$root" state "$id" 2>/dev/null | grep -q '"status": *"created"'; then
		exec "$RUNSC" --root "$root" delete --force "$id"
	fi
fi
exec "$RUNSC" --network=none --oci-seccomp "$@"
