package sandbox

// LabelPrefix is the reverse-DNS prefix of every label corral sets on
// containers, snapshots, leases and images. Untrusted values are never
// copied into it.
const LabelPrefix = "dev.corral-sandbox."

const (
	// LabelOwner marks everything corral created ("corral").
	LabelOwner = LabelPrefix + "owner"
	// LabelSession is the session id of a container or lease.
	LabelSession = LabelPrefix + "session"
	// LabelStateDir is the state directory of the supervisor that made it,
	// so that gc of one state directory leaves another's alone.
	LabelStateDir = LabelPrefix + "state-dir"
	// LabelPID is the pid of the supervisor that created a container or
	// lease, and LabelPIDStart that process's start time (field 22 of
	// /proc/PID/stat, clock ticks since boot), so a reused pid is not
	// taken for the supervisor: sweeps leave alone what a live supervisor
	// owns.
	LabelPID      = LabelPrefix + "pid"
	LabelPIDStart = LabelPrefix + "pid-start"
	// LabelDeadline is the Unix time (seconds) after which a container
	// or lease is overdue whoever owns it: created ahead, handed to a
	// call by maxWarmAge less the call's slack, then run for at most the
	// timeout, corral-init's grace and that slack (maxWarmAge).
	LabelDeadline = LabelPrefix + "deadline"
)

// DefaultNamespace is the containerd namespace corral works in.
const DefaultNamespace = "corral"

// DefaultAddress is containerd's default socket.
const DefaultAddress = "/run/containerd/containerd.sock"

// DefaultStateDir holds sessions, the runc state root and FIFOs.
const DefaultStateDir = "/var/lib/corral"

const snapshotter = "overlayfs"

// ContainerUID and ContainerGID are the user every tool runs as.
const (
	ContainerUID = 65534
	ContainerGID = 65534
)
