package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/audit"
	"github.com/opencontainers/image-spec/identity"
)

// Config is the Executor's long-lived configuration, from the trusted
// launcher (flags, environment of the launcher), never from the agent.
type Config struct {
	// Address of containerd's socket; "" means $CONTAINERD_ADDRESS, else
	// DefaultAddress.
	Address string
	// Namespace in containerd; "" means DefaultNamespace.
	Namespace string
	// StateDir holds sessions, FIFOs and the shim's runc root; "" means
	// DefaultStateDir. It may not contain ':' or ',' (overlay options).
	StateDir string
	// Runtime names the OCI runtime: a name of the runtime table
	// (Runtimes: runc, crun, runsc) or a containerd shim type
	// io.containerd.<name>.v<N>; "" means DefaultRuntime.
	Runtime string
	// RuntimeBinary replaces the runtime's binary (a path, or a command
	// name in PATH) for the runc v2 shim; "" means the table's.
	RuntimeBinary string
	// Image is the tools image; "" means DefaultImageRef, which is built
	// from host binaries on first use.
	Image string
	// Cold creates every container on the call's critical path instead of
	// ahead of it: for one-call processes (the CLI), where a container
	// created ahead would be thrown away, and for comparisons.
	Cold bool
	// MaxWarm caps the containers created ahead of calls across all the
	// executor's sessions (each session keeps its profile's pool_depth
	// under it, and grows past it on bursts up to its pool_max_depth and
	// half of MaxWarm, leaving a quarter of MaxWarm to the other
	// sessions' pool_depth; the sessions of one SessionConfig.WarmOwner
	// grow only while they hold, together and floors included, less than
	// half of MaxWarm); 0 means DefaultMaxWarm. Unused when Cold.
	MaxWarm int
	// PoolIdle is how long after its last call a session's pool keeps
	// the depth bursts grew it to before it shrinks back to pool_depth;
	// 0 means DefaultPoolIdle.
	PoolIdle time.Duration
	// ReapCgroup is a cgroup, a path from the cgroup root such as
	// DefaultReapCgroup, with 1/16 of a default cgroup's CPU share: a
	// container's shim moves there when the container is destroyed, so
	// that the runtime's delete (run by the shim) and the shim's exit,
	// work no call waits for, yield the CPU to calls and to the pools'
	// refills. "" leaves the shims where containerd starts them; so does
	// a host where corral cannot set a cgroup's CPU share.
	ReapCgroup string
	// InPod says the executor runs in a Kubernetes Pod on the node whose
	// containerd it drives, with the node's PID namespace (hostPID) and
	// privileges: its own /sys/fs/cgroup is the Pod's cgroup, so the
	// node's cgroup hierarchies (the containers' limits hit, the kill of
	// a call's processes, the removal of what runtimes leave, the reap
	// cgroup) are reached through the node's init, /proc/1/root. New
	// fails when pid 1 is not the node's init or its hierarchies are not
	// cgroup roots (a container's view).
	InPod bool
	// AuditFile, when set, receives a copy of the audit events, which
	// always go to StateDir/audit.log.
	AuditFile string
	// Log receives progress notes such as "building image on first use".
	// nil discards them.
	Log io.Writer
	// SharedMounts makes each session's host mounts propagate to the
	// state directory's peers (mounts.Plan.Shared): for a daemon in a
	// Pod, whose mounts containerd on the node must see. Off, they stay
	// private to this mount namespace.
	SharedMounts bool
}

// Executor runs invocations through one containerd connection, made on
// first need: sessions, their change sets, listing, pruning and removing
// persistent sessions need none (their writes are on a host tmpfs). It is
// safe for concurrent use. The caller must call Close.
type Executor struct {
	cfg   Config
	oci   *ociRuntime
	audit *audit.Logger
	// warm is the executor-wide cap on containers created ahead.
	warm *warmCap
	// cgroups is where the node's cgroup hierarchies are (Config.InPod).
	cgroups cgroups

	// connMu guards the connection and what is resolved once through it.
	connMu sync.Mutex
	client *containerd.Client
	img    containerd.Image
	// imgParent is img's chain ID (runtimeParts.parent).
	imgParent string

	// reapOnce says once that the reap cgroup cannot be used.
	reapOnce sync.Once

	initOnce sync.Mutex
	init     string // see initBinary

	// swept is what the sweeps at start (New, Connect) removed, until
	// GC or Prune reports it.
	sweptMu sync.Mutex
	swept   GCReport
}

// noteSwept keeps r for the next GC or Prune report.
func (e *Executor) noteSwept(r *GCReport) {
	if r == nil {
		return
	}
	e.sweptMu.Lock()
	e.swept.add(r)
	e.sweptMu.Unlock()
}

// takeSwept returns what the sweeps at start removed, once.
func (e *Executor) takeSwept() GCReport {
	e.sweptMu.Lock()
	defer e.sweptMu.Unlock()
	r := e.swept
	e.swept = GCReport{}
	return r
}

// privateAddress is where hack/setup.sh starts a private containerd.
const privateAddress = "/run/corral-containerd/containerd.sock"

// ResolveAddress applies the address rule: the flag, else
// $CONTAINERD_ADDRESS, else DefaultAddress.
func ResolveAddress(flag string) string {
	if flag != "" {
		return flag
	}
	if a := os.Getenv("CONTAINERD_ADDRESS"); a != "" {
		return a
	}
	return DefaultAddress
}

// New validates cfg, opens the audit log and sweeps the state directory's
// sessions without containerd (Sweep): ephemeral sessions of dead
// processes go, and expired persistent ones are pruned, their change
// sets kept as patch files. It does not connect to containerd: the first
// call that needs it does (see Connect), and sweeps what dead processes
// left there.
func New(ctx context.Context, cfg Config) (*Executor, error) {
	cfg.Address = ResolveAddress(cfg.Address)
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	if cfg.Runtime == "" {
		cfg.Runtime = DefaultRuntime
	}
	if cfg.Image == "" {
		cfg.Image = DefaultImageRef
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.MaxWarm <= 0 {
		cfg.MaxWarm = DefaultMaxWarm
	}
	if !filepath.IsAbs(cfg.StateDir) || strings.ContainsAny(cfg.StateDir, ":,\n") {
		return nil, fmt.Errorf("state directory %q: %w: want an absolute path without ':', ',' or newlines", cfg.StateDir, errdefs.ErrInvalidArgument)
	}
	if err := checkReapCgroup(cfg.ReapCgroup); err != nil {
		return nil, err
	}
	cg, err := resolveCgroups(cfg.InPod)
	if err != nil {
		// Not the node's init, or not reachable: this process's own
		// /sys/fs/cgroup, as before Pod mode reached the node's. Where
		// that is a hierarchy's root (corral on the node itself) it is
		// the node's; in a Pod it is the Pod's own cgroup, where limits
		// hit, the direct kill of a call and gc's cgroup sweep find
		// nothing: they fail safe, and the log says why.
		cg = cgroups{root: hostCgroupRoot}
		if cerr := cg.checkRoots(); cerr != nil {
			fmt.Fprintf(cfg.Log, "corral: %s; this process's /sys/fs/cgroup is not the node's (%s): limits hit, the kill of a call's processes and gc's cgroup sweep see nothing (run the Pod privileged, with hostPID)\n", oneLine(err), oneLine(cerr))
		}
	}
	oci, err := resolveRuntime(cfg.Runtime, cfg.RuntimeBinary, cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("%w: creating state directory %s: corral needs root (the session mounts are root's)", errdefs.ErrPermissionDenied, cfg.StateDir)
		}
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	log, err := audit.Open(cfg.StateDir, cfg.AuditFile)
	if err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	e := &Executor{cfg: cfg, oci: oci, audit: log, warm: newWarmCap(cfg.MaxWarm), cgroups: cg}
	r, err := e.Sweep(ctx)
	e.noteSwept(r)
	if err != nil {
		fmt.Fprintf(cfg.Log, "corral: sweeping the state directory: %v\n", oneLine(err))
	}
	return e, nil
}

// Connect connects to containerd unless connected, and then sweeps what
// dead processes of this state directory left there (SweepContainers).
// When nothing answers at the address the error (wrapping
// errdefs.ErrUnavailable) says how to start one.
func (e *Executor) Connect(ctx context.Context) (*containerd.Client, error) {
	e.connMu.Lock()
	defer e.connMu.Unlock()
	return e.connectLocked(ctx)
}

func (e *Executor) connectLocked(ctx context.Context) (*containerd.Client, error) {
	if e.client != nil {
		return e.client, nil
	}
	cfg := e.cfg
	unavailable := func(err error) error {
		if errors.Is(err, os.ErrPermission) || os.Geteuid() != 0 {
			return fmt.Errorf("%w: corral needs root: containerd's socket %s and the session mounts are root's (%v)", errdefs.ErrPermissionDenied, cfg.Address, oneLine(err))
		}
		if cfg.Address == DefaultAddress {
			if _, serr := os.Stat(privateAddress); serr == nil {
				return fmt.Errorf("%w: no containerd answers at %s (%v); corral's private one is at %s: pass --address %s or export CONTAINERD_ADDRESS (`. build/env && export CONTAINERD_ADDRESS` in corral's source tree)",
					errdefs.ErrUnavailable, cfg.Address, oneLine(err), privateAddress, privateAddress)
			}
		}
		return fmt.Errorf("%w: no containerd answers at %s (%v); start one (as root: `apt-get install containerd runc && containerd &`, or `make setup` in corral's source tree, which starts a private one) and pass its socket with --address or CONTAINERD_ADDRESS",
			errdefs.ErrUnavailable, cfg.Address, oneLine(err))
	}
	if _, err := os.Stat(cfg.Address); err != nil {
		return nil, unavailable(err)
	}
	client, err := containerd.New(cfg.Address, containerd.WithDefaultNamespace(cfg.Namespace), containerd.WithTimeout(5*time.Second))
	if err != nil {
		return nil, unavailable(err)
	}
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := client.Version(vctx); err != nil {
		client.Close()
		return nil, unavailable(err)
	}
	e.client = client
	r, err := e.sweepContainers(ctx, false, strayCgroupWait)
	e.noteSwept(r)
	if err != nil {
		fmt.Fprintf(cfg.Log, "corral: sweeping containers of dead corral processes: %v\n", oneLine(err))
	}
	return client, nil
}

// Close closes the containerd connection, if one was made, and the audit
// log.
func (e *Executor) Close() error {
	e.connMu.Lock()
	defer e.connMu.Unlock()
	var err error
	if e.client != nil {
		err = e.client.Close()
	}
	return errors.Join(err, e.audit.Close())
}

// Audit returns the executor's audit log (never nil once New succeeded).
func (e *Executor) Audit() *audit.Logger { return e.audit }

// Client returns the containerd client, connecting first if needed (for
// image builds and tests); nil when containerd cannot be reached (Connect
// returns why).
func (e *Executor) Client() *containerd.Client {
	c, err := e.Connect(context.Background())
	if err != nil {
		return nil
	}
	return c
}

// Config returns the resolved configuration.
func (e *Executor) Config() Config { return e.cfg }

// Warm returns the executor's containers created ahead, now (all its
// sessions' pools together).
func (e *Executor) Warm() WarmState { return e.warm.state() }

// Context returns ctx in the executor's containerd namespace.
func (e *Executor) Context(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, e.cfg.Namespace)
}

// runtimeParts are what every container of the executor is made from,
// resolved once: the connection, the tools image (its snapshot is every
// container's root; any image works) and corral-init.
type runtimeParts struct {
	client *containerd.Client
	image  containerd.Image
	// parent is the image's chain ID: the snapshot of its unpacked
	// layers, every container's snapshot's parent.
	parent string
	init   string
}

// runtime connects if needed and resolves the image (building the
// default one on first use) and corral-init, once per executor.
func (e *Executor) runtime(ctx context.Context) (runtimeParts, error) {
	e.connMu.Lock()
	defer e.connMu.Unlock()
	client, err := e.connectLocked(ctx)
	if err != nil {
		return runtimeParts{}, err
	}
	init, err := e.initBinary()
	if err != nil {
		return runtimeParts{}, err
	}
	if e.img == nil {
		img, err := e.image(e.Context(ctx), client)
		if err != nil {
			return runtimeParts{}, e.wrapContainerd("resolving the tools image", err)
		}
		diffIDs, err := img.RootFS(e.Context(ctx))
		if err != nil {
			return runtimeParts{}, e.wrapContainerd("reading the tools image's layers", err)
		}
		e.img, e.imgParent = img, identity.ChainID(diffIDs).String()
	}
	return runtimeParts{client: client, image: e.img, parent: e.imgParent, init: init}, nil
}

// image returns the tools image, building the default one on first use.
func (e *Executor) image(ctx context.Context, client *containerd.Client) (containerd.Image, error) {
	img, err := client.GetImage(ctx, e.cfg.Image)
	switch {
	case err == nil:
	case errdefs.IsNotFound(err) && e.cfg.Image == DefaultImageRef:
		fmt.Fprintf(e.cfg.Log, "corral: building image %s on first use\n", e.cfg.Image)
		if _, err := BuildImage(ctx, client, DefaultImageSpec()); err != nil {
			return nil, fmt.Errorf("building image %s: %w", e.cfg.Image, err)
		}
		if img, err = client.GetImage(ctx, e.cfg.Image); err != nil {
			return nil, err
		}
	case errdefs.IsNotFound(err):
		if img, err = client.Pull(ctx, e.cfg.Image, containerd.WithPullUnpack, containerd.WithPullSnapshotter(snapshotter)); err != nil {
			return nil, fmt.Errorf("image %s is not in containerd and could not be pulled: %w", e.cfg.Image, err)
		}
	default:
		return nil, fmt.Errorf("getting image %s: %w", e.cfg.Image, err)
	}
	if ok, err := img.IsUnpacked(ctx, snapshotter); err != nil || !ok {
		if err := img.Unpack(ctx, snapshotter); err != nil {
			return nil, fmt.Errorf("unpacking image %s: %w", e.cfg.Image, err)
		}
	}
	return img, nil
}

// fifoDir holds the containers' stdio FIFOs (cio.WithFIFODir).
func (e *Executor) fifoDir() string { return filepath.Join(e.cfg.StateDir, "fifo") }
