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
