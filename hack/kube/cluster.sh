#!/usr/bin/env bash
# A throw-away single-node Kubernetes for corral's cluster tests, entirely
# inside namespaces of its own: nothing is added to the host's network, mount
# table or sysctls.
#
#   hack/kube/cluster.sh up         build (cached) and start; waits until the
#                                   node is Ready and the default ServiceAccount
#                                   exists; prints phase times
#   hack/kube/cluster.sh down       kill everything, remove cgroups and state
#                                   (--keep-logs DIR copies the logs first)
#   hack/kube/cluster.sh restart    a node reboot: kill every process and mount
#                                   (the /run tmpfs too), keep the disk, start
#   hack/kube/cluster.sh env        shell exports for a running cluster
#   hack/kube/cluster.sh status     components, node, memory
#   hack/kube/cluster.sh kubectl …  kubectl in the cluster's network namespace
#   hack/kube/cluster.sh exec CMD…  run CMD on "the node": in its mount,
#                                   network and PID namespaces (like ssh)
#
# Layout. One process, started with unshare(1), is PID 1 of a new PID
# namespace and lives in a new mount and network namespace; every component
# runs under it, so killing it (down) kills every process of the cluster,
# containers included, and the kernel drops every mount with the namespace.
# In the node's mount namespace (private to the host, shared below itself so
# Pods' mountPropagation works as on a systemd node):
#   /run          a tmpfs: containerd's state and shim sockets (/run/containerd/s
#                 is not configurable), the CRI's socket, runc's root
#   /var/lib      $STATE/node/var/lib: /var/lib/containerd, /var/lib/kubelet
#   /var/log      $STATE/node/var/log: /var/log/pods, /var/log/containers
#   /proc/sys/{vm/overcommit_memory,vm/panic_on_oom,kernel/panic,
#     kernel/panic_on_oops,kernel/keys/root_maxkeys,kernel/keys/root_maxbytes}
#                 regular files: kubelet sets these at start
# so the node has the standard paths a DaemonSet expects. The host reaches
# them through /proc/$PID/root (see env). Network: lo plus a veth pair
# kube0/kube1, both ends in the node's namespace, the node address
# $NODE_IP/30 on kube0; no default route. Pods get their own network
# namespace holding only lo (hack/kube/cni).
#
# Components: containerd (Debian's, CRI on), etcd, kube-apiserver (Node+RBAC,
# PodSecurity defaults enforce=baseline, warn/audit=restricted, kube-system
# exempt), kube-controller-manager, kube-scheduler, kubelet (cgroup v1,
# cgroupfs, cgroupRoot /$CGROUP_ROOT). Certificates: a fresh CA per cluster
# (openssl, ECDSA P-256).
#
# Environment: CORRAL_KUBE_STATE (default /var/tmp/corral-kube; must not lie
# under /run, /var/lib or /var/log), CORRAL_KUBE_BIN (skip build.sh and use
# these binaries), CORRAL_KUBE_IMAGES (extra image archives to import at start,
# space-separated).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE=${CORRAL_KUBE_STATE:-/var/tmp/corral-kube}
CGROUP_ROOT=$(basename "$STATE")
NODE_NAME=corral-node
NODE_IP=198.18.0.1         # RFC 2544 benchmarking range, only inside the node's netns
SERVICE_CIDR=198.18.64.0/20
SERVICE_IP=198.18.64.1     # the "kubernetes" Service
POD_SUBNET=198.19.0.0/16   # reported by the stub CNI; exists nowhere
PAUSE_IMAGE=corral.local/kube/pause:1
ETC=$STATE/etc
PKI=$STATE/pki
LOG=$STATE/log
SYSCTLS=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops
	kernel/keys/root_maxkeys kernel/keys/root_maxbytes)

now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
die() { echo "cluster.sh: $*" >&2; exit 1; }

# nodepid prints the host PID of the node's PID 1 when it is running.
nodepid() {
	local pid
	pid=$(cat "$STATE/pid" 2>/dev/null) || return 1
	[[ -n $pid && -r /proc/$pid/cmdline ]] || return 1
	# Guard against a reused PID: the process must be our node init.
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "cluster.sh _node $STATE" || return 1
	echo "$pid"
}

inns() { # run "$@" in the node's network namespace only (host filesystem)
	local pid
	pid=$(nodepid) || die "not running (state $STATE)"
	nsenter --net="/proc/$pid/ns/net" -- "$@"
}

kctl() { KUBECONFIG=$ETC/admin.kubeconfig inns kubectl "$@"; }

# ---------------------------------------------------------------- certificates
cert() { # NAME SUBJECT [SAN]: a leaf signed by the cluster CA
	local name=$1 subj=$2 san=${3:-}
	local args=(-addext "basicConstraints=critical,CA:FALSE"
		-addext "keyUsage=critical,digitalSignature,keyEncipherment"
		-addext "extendedKeyUsage=serverAuth,clientAuth")
	[[ -n $san ]] && args+=(-addext "subjectAltName=$san")
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
		-subj "$subj" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" "${args[@]}" \
		-keyout "$PKI/$name.key" -out "$PKI/$name.crt" 2>/dev/null
}

gen_pki() {
	mkdir -p "$PKI"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
		-subj "/CN=corral-kube-ca" -addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
		-keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2>/dev/null
	cert apiserver "/CN=kube-apiserver" \
		"IP:$NODE_IP,IP:$SERVICE_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
	cert admin "/O=system:masters/CN=corral-kube-admin"
	cert controller-manager "/CN=system:kube-controller-manager"
	cert scheduler "/CN=system:kube-scheduler"
	cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
	cert kubelet-serving "/CN=$NODE_NAME" "IP:$NODE_IP,DNS:$NODE_NAME"
	openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
	openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	chmod 600 "$PKI"/*.key
}

kubeconfig() { # FILE CERTNAME
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: corral-kube
  cluster:
    server: https://$NODE_IP:6443
    certificate-authority: $PKI/ca.crt
users:
- name: $2
  user:
    client-certificate: $PKI/$2.crt
    client-key: $PKI/$2.key
contexts:
- name: corral-kube
  context:
    cluster: corral-kube
    user: $2
    namespace: default
current-context: corral-kube
EOF
}

# ---------------------------------------------------------------- configs
gen_config() {
	mkdir -p "$ETC" "$STATE/manifests" "$STATE/cni/net.d" "$STATE/cni/bin" "$STATE/images" \
		"$STATE/node/var/lib" "$STATE/node/var/log" "$STATE/node/sysctl" "$STATE/etcd" "$LOG"
	for k in admin controller-manager scheduler kubelet; do
		kubeconfig "$ETC/$k.kubeconfig" "$k"
	done
	install -m 0755 "$BIN/corral-cni" "$STATE/cni/bin/corral-cni"
	install -m 0755 "$BIN/corral-cni" "$STATE/cni/bin/loopback"
	cat >"$STATE/cni/net.d/10-corral-kube.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "corral-kube",
 "plugins": [{"type": "corral-cni", "subnet": "$POD_SUBNET"}]}
EOF

	# containerd 1.6 (config version 2); paths as on a real node, inside the
	# node's mount namespace.
	cat >"$ETC/containerd.toml" <<EOF
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Negative oom_score_adj needs CAP_SYS_RESOURCE, which this machine's root
  # lacks: without this, sandboxes fail with "can't get final child's PID".
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "/run/containerd/runc-k8s"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$STATE/cni/bin"
    conf_dir = "$STATE/cni/net.d"
    max_conf_num = 1
EOF

	cat >"$ETC/admission.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: baseline
      enforce-version: latest
      audit: restricted
      audit-version: latest
      warn: restricted
      warn-version: latest
    exemptions:
      usernames: []
      runtimeClasses: []
      namespaces: [kube-system]
EOF

	cat >"$ETC/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 is deprecated: kubelet refuses it unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
staticPodPath: $STATE/manifests
podLogsDir: /var/log/pods
readOnlyPort: 0
address: 0.0.0.0
port: 10250
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous:
    enabled: false
  x509:
    clientCAFile: $PKI/ca.crt
  webhook:
    enabled: true
authorization:
  mode: Webhook
# The disk is shared with builds: evict only when it is truly full, and never
# collect images (ours cannot be pulled again).
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
  imagefs.inodesFree: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
failSwapOn: false
protectKernelDefaults: false
serializeImagePulls: false
fileCheckFrequency: 5s
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
shutdownGracePeriod: 0s
EOF
}

images() { # the pause image, then the caller's extra archives
	"$BIN/kube-mkimage" -name "$PAUSE_IMAGE" -entrypoint /kube-pause -user 65535:65535 \
		-o "$STATE/images/00-pause.tar" "$BIN/kube-pause"
	local i=1 t
	for t in ${CORRAL_KUBE_IMAGES:-}; do
		cp "$t" "$STATE/images/$((i++))-$(basename "$t")"
	done
}

# cgroups: the kubelet's cgroupRoot must exist in every hierarchy beforehand.
cgroup_dirs() { find /sys/fs/cgroup -mindepth 2 -maxdepth 2 -type d -name "$CGROUP_ROOT"; }
make_cgroups() {
	local h
	for h in /sys/fs/cgroup/*/; do
		[[ -e $h/cgroup.procs ]] || continue
		mkdir -p "$h$CGROUP_ROOT"
		if [[ -e $h/cpuset.cpus ]]; then
			cat "$h/cpuset.cpus" >"$h$CGROUP_ROOT/cpuset.cpus"
			cat "$h/cpuset.mems" >"$h$CGROUP_ROOT/cpuset.mems"
		fi
	done
}
remove_cgroups() { # deepest first; retried while dying tasks leave
	local d
	for _ in $(seq 50); do
		for d in $(cgroup_dirs); do
			find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
		done
		[[ -z $(cgroup_dirs) ]] && return 0
		sleep 0.2
	done
	echo "cluster.sh: cgroups left: $(cgroup_dirs | tr '\n' ' ')" >&2
	return 1
}

# ---------------------------------------------------------------- the node
# _node runs as PID 1 of the node's namespaces (see up).
node_main() {
	log() { echo "$(date +%T.%3N) node: $*"; }
	log "pid namespace init, state $STATE"
	# Pods' Bidirectional/HostToContainer volumes need shared mounts; these
	# peer groups are new (unshare made everything private first), so nothing
	# propagates to the host.
	mount --make-rshared /
	mount -t tmpfs -o mode=0755,size=256m corral-kube-run /run
	mkdir -p /run/containerd
	mount --bind "$STATE/node/var/lib" /var/lib
	mount --bind "$STATE/node/var/log" /var/log
	local s f
	for s in "${SYSCTLS[@]}"; do
		f=$STATE/node/sysctl/${s//\//.}
		cat "/proc/sys/$s" >"$f"
		mount --bind "$f" "/proc/sys/$s"
	done

	ip link set lo up
	ip link add kube0 type veth peer name kube1
	ip addr add "$NODE_IP/30" dev kube0
	ip link set kube1 up
	ip link set kube0 up

	declare -A names
	start() { # NAME CMD...
		local name=$1
		shift
		"$@" >>"$LOG/$name.log" 2>&1 &
		names[$!]=$name
		log "started $name (pid $!)"
	}

	start containerd containerd --config "$ETC/containerd.toml"
	local i
	for i in $(seq 100); do
		ctr --address /run/containerd/containerd.sock version >/dev/null 2>&1 && break
		sleep 0.1
	done
	log "containerd answers"
	for f in "$STATE"/images/*.tar; do
		ctr --address /run/containerd/containerd.sock -n k8s.io images import "$f" >>"$LOG/images.log" 2>&1
	done
	log "images imported"

	start etcd "$BIN/etcd" --name "$NODE_NAME" --data-dir "$STATE/etcd" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster "$NODE_NAME=http://127.0.0.1:2380" --unsafe-no-fsync \
		--log-level warn
	start kube-apiserver "$BIN/kube-apiserver" \
		--etcd-servers http://127.0.0.1:2379 \
		--bind-address 0.0.0.0 --secure-port 6443 --advertise-address "$NODE_IP" \
		--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
		--client-ca-file "$PKI/ca.crt" \
		--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types InternalIP \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$PKI/sa.pub" \
		--service-account-signing-key-file "$PKI/sa.key" \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--authorization-mode Node,RBAC \
		--enable-admission-plugins NodeRestriction \
		--admission-control-config-file "$ETC/admission.yaml" \
		--allow-privileged=true --profiling=false --v=1
	start kubelet "$BIN/kubelet" --config "$ETC/kubelet.yaml" \
		--kubeconfig "$ETC/kubelet.kubeconfig" \
		--hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v=1

	# The controller-manager and the scheduler exit when their RBAC roles
	# are not there yet: start them once the apiserver is ready (its readyz
	# includes the bootstrap roles).
	for i in $(seq 1200); do
		curl -fsS --cacert "$PKI/ca.crt" "https://$NODE_IP:6443/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	log "apiserver ready"
	start kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig "$ETC/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$ETC/controller-manager.kubeconfig" \
		--authorization-kubeconfig "$ETC/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false \
		--service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
		--use-service-account-credentials=true \
		--service-cluster-ip-range "$SERVICE_CIDR" --profiling=false --v=1
	start kube-scheduler "$BIN/kube-scheduler" \
		--kubeconfig "$ETC/scheduler.kubeconfig" \
		--authentication-kubeconfig "$ETC/scheduler.kubeconfig" \
		--authorization-kubeconfig "$ETC/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false --profiling=false --v=1

	# PID 1 reaps everything orphaned to it (containerd's shims among them)
	# and reports components that exit; nothing is restarted.
	local pid rc
	while :; do
		rc=0
		wait -n -p pid || rc=$?
		if [[ -n ${pid:-} && -n ${names[$pid]:-} ]]; then
			log "${names[$pid]} (pid $pid) exited with $rc"
			unset "names[$pid]"
		fi
		if [[ ${#names[@]} == 0 ]]; then
			sleep 1 # only reaping left to do
		fi
	done
}

# ---------------------------------------------------------------- commands
# start_node starts the node's PID 1 (node_main) under unshare and records
# its host PID.
start_node() {
	make_cgroups
	# unshare stays in the host PID namespace as the parent of the node's
	# PID 1; --kill-child ends the node if unshare is killed.
	(
		exec setsid unshare --mount --net --pid --fork --kill-child --mount-proc \
			--propagation private \
			env CORRAL_KUBE_STATE="$STATE" BIN="$BIN" "$here/cluster.sh" _node "$STATE" \
			</dev/null >>"$LOG/node.log" 2>&1
	) &
	local upid=$! pid="" i
	echo "$upid" >"$STATE/unshare.pid"
	for i in $(seq 100); do
		pid=$(awk '{print $1}' "/proc/$upid/task/$upid/children" 2>/dev/null)
		[[ -n $pid ]] && break
		sleep 0.05
	done
	[[ -n $pid ]] || die "the node did not start; see $LOG/node.log"
	echo "$pid" >"$STATE/pid"
	disown "$upid" 2>/dev/null || true
}

# wait_ready waits for the apiserver, the kubelet, a Ready node and the
# default ServiceAccount, printing when each was reached (seconds since $1).
wait_ready() {
	local t=$1 i ok
	# alive fails once a component has exited: nothing restarts them.
	alive() {
		nodepid >/dev/null || return 1
		! grep -q "exited with" "$LOG/node.log"
	}
	ok=0
	for i in $(seq 600); do
		if kctl get --raw /readyz >/dev/null 2>&1; then ok=1; break; fi
		alive || break
		sleep 0.1
	done
	[[ $ok == 1 ]] || { tail -n 20 "$LOG"/*.log >&2; die "apiserver not ready"; }
	echo "apiserver ready in $(since "$t")s" >&2

	# The kubelet's own health first: after a restart the node object may
	# still say Ready from before.
	ok=0
	for i in $(seq 600); do
		if inns curl -fsS http://127.0.0.1:10248/healthz >/dev/null 2>&1 &&
			[[ $(kctl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]; then
			ok=1
			break
		fi
		alive || break
		sleep 0.2
	done
	[[ $ok == 1 ]] || { tail -n 30 "$LOG/kubelet.log" >&2; die "node not Ready"; }
	echo "node Ready in $(since "$t")s" >&2

	ok=0
	for i in $(seq 600); do
		if kctl get serviceaccount default -n default >/dev/null 2>&1; then ok=1; break; fi
		alive || break
		sleep 0.2
	done
	[[ $ok == 1 ]] || { cat "$LOG/node.log" >&2; die "no default ServiceAccount"; }
	echo "default ServiceAccount in $(since "$t")s" >&2
}

cmd_up() {
	case $STATE in /run | /run/* | /var/lib | /var/lib/* | /var/log | /var/log/*)
		die "CORRAL_KUBE_STATE=$STATE lies under a directory the node replaces" ;;
	esac
	[[ $(id -u) == 0 ]] || die "needs root"
	command -v kubectl >/dev/null || { apt-get install -y kubectl >/dev/null || die "kubectl missing"; }
	if nodepid >/dev/null; then die "already running (state $STATE); down first"; fi
	[[ -e $STATE ]] && cleanup

	local t0 t
	t0=$(now)
	t=$t0
	if [[ -z ${CORRAL_KUBE_BIN:-} ]]; then
		BIN=$("$here/build.sh" | tail -n1)
	else
		BIN=$CORRAL_KUBE_BIN
	fi
	echo "binaries ready in $(since "$t")s ($BIN)" >&2
	t=$(now)
	mkdir -p "$STATE"
	echo "$BIN" >"$STATE/bin-dir"
	gen_pki
	gen_config
	images
	echo "certificates, configs, images in $(since "$t")s" >&2
	t=$(now)
	start_node
	wait_ready "$t"
	echo "up in $(since "$t0")s total" >&2
}

# kill_node kills the node's PID 1, and with it every process of its PID
# namespace; the kernel drops the node's mounts with its mount namespace.
kill_node() {
	local pid upid i
	pid=$(nodepid) || return 0
	upid=$(cat "$STATE/unshare.pid" 2>/dev/null || true)
	kill -KILL "$pid"
	# unshare exits once it has reaped the node's PID 1.
	for i in $(seq 200); do
		[[ -e /proc/$pid || ( -n $upid && -e /proc/$upid && $(awk '{print $3}' "/proc/$upid/stat" 2>/dev/null) != Z ) ]] || break
		sleep 0.05
	done
	[[ -e /proc/$pid ]] && die "node PID 1 ($pid) still alive"
	rm -f "$STATE/pid" "$STATE/unshare.pid"
}

# cleanup removes what a stopped cluster left: its cgroups and state.
cleanup() {
	remove_cgroups || true
	rm -rf "$STATE"
}

cmd_down() {
	local keep="" t
	if [[ ${1:-} == --keep-logs ]]; then keep=${2:?--keep-logs DIR}; fi
	[[ -e $STATE ]] || return 0
	t=$(now)
	kill_node
	if [[ -n $keep ]]; then
		mkdir -p "$keep"
		cp -r "$LOG/." "$keep/" 2>/dev/null || true
		cp -r "$STATE/node/var/log/pods" "$keep/pods" 2>/dev/null || true
	fi
	cleanup
	echo "down in $(since "$t")s" >&2
}

# cmd_restart is a node reboot: every process, mount and the /run tmpfs are
# lost; the disk (etcd, /var/lib, /var/log) is kept, as are certificates and
# configuration.
cmd_restart() {
	local t
	nodepid >/dev/null || die "not running (state $STATE)"
	t=$(now)
	kill_node
	remove_cgroups || true
	echo "node killed in $(since "$t")s" >&2
	BIN=$(cat "$STATE/bin-dir")
	mv "$LOG/node.log" "$LOG/node.log.$(date +%s)"
	t=$(now)
	start_node
	wait_ready "$t"
}

cmd_env() {
	local pid
	pid=$(nodepid) || die "not running (state $STATE)"
	cat <<EOF
export CORRAL_KUBE_STATE=$STATE
export CORRAL_KUBE_PID=$pid
export CORRAL_KUBE_BIN=$(cat "$STATE/bin-dir")
export CORRAL_KUBE_NETNS=/proc/$pid/ns/net
export CORRAL_KUBE_ROOT=/proc/$pid/root
export CORRAL_KUBE_CONTAINERD=/proc/$pid/root/run/containerd/containerd.sock
export CORRAL_KUBE_NODE=$NODE_NAME
export CORRAL_KUBE_NODE_IP=$NODE_IP
export CORRAL_KUBE_CGROUP_ROOT=/$CGROUP_ROOT
export KUBECONFIG=$ETC/admin.kubeconfig
# kubectl reaches the apiserver only from the node's network namespace:
#   nsenter --net=\$CORRAL_KUBE_NETNS kubectl ...   or   $here/kubectl.sh ...
EOF
}

# mem prints the resident memory of the node's processes (components and
# containers), in MB.
mem() {
	local pid ns p total=0 rss
	pid=$(nodepid) || return 0
	ns=$(readlink "/proc/$pid/ns/pid")
	for p in /proc/[0-9]*; do
		[[ $(readlink "$p/ns/pid" 2>/dev/null) == "$ns" ]] || continue
		rss=$(awk '/^VmRSS:/ {print $2}' "$p/status" 2>/dev/null || true)
		total=$((total + ${rss:-0}))
	done
	echo $((total / 1024))
}

cmd_status() {
	local pid
	pid=$(nodepid) || { echo "not running (state $STATE)"; return 1; }
	echo "node PID 1: $pid; RSS of all node processes: $(mem) MB"
	kctl get nodes -o wide
	kctl get pods -A -o wide
}

cmd_exec() {
	local pid
	pid=$(nodepid) || die "not running (state $STATE)"
	nsenter -t "$pid" --mount --net --pid --wd=/ -- "$@"
}

case ${1:-} in
up) cmd_up ;;
restart) cmd_restart ;;
down) shift; cmd_down "$@" ;;
env) cmd_env ;;
status) cmd_status ;;
mem) mem ;;
kubectl) shift; kctl "$@" ;;
exec) shift; cmd_exec "$@" ;;
_node) node_main ;;
*) echo "usage: $0 up|down [--keep-logs DIR]|restart|env|status|mem|kubectl ARGS|exec CMD" >&2; exit 2 ;;
esac
