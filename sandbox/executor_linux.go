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
	// AuditFile, when set, receives a copy of the audit events, which
	// always go to StateDir/audit.log.
	AuditFile string
	// Log receives progress notes such as "building image on first use".
	// nil discards them.
	Log io.Writer
}

// Executor runs invocations through one containerd connection. It is safe
// for concurrent use. The caller must call Close.
type Executor struct {
	cfg    Config
	oci    *ociRuntime
	client *containerd.Client
	audit  *audit.Logger

	imgOnce sync.Mutex
	img     containerd.Image

	initOnce sync.Mutex
	init     string // see initBinary
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

// New connects to containerd. When nothing answers at the address the
// error (wrapping errdefs.ErrUnavailable) says how to start one.
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
	if !filepath.IsAbs(cfg.StateDir) || strings.ContainsAny(cfg.StateDir, ":,\n") {
		return nil, fmt.Errorf("state directory %q: %w: want an absolute path without ':', ',' or newlines", cfg.StateDir, errdefs.ErrInvalidArgument)
	}
	oci, err := resolveRuntime(cfg.Runtime, cfg.RuntimeBinary, cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	unavailable := func(err error) error {
		if errors.Is(err, os.ErrPermission) || os.Geteuid() != 0 {
			return fmt.Errorf("%w: corral needs root: containerd's socket %s and the session mounts are root's (%v)", errdefs.ErrPermissionDenied, cfg.Address, err)
		}
		if cfg.Address == DefaultAddress {
			if _, serr := os.Stat(privateAddress); serr == nil {
				return fmt.Errorf("%w: no containerd answers at %s (%v); corral's private one is at %s: pass --address %s or export CONTAINERD_ADDRESS (`. build/env && export CONTAINERD_ADDRESS` in corral's source tree)",
					errdefs.ErrUnavailable, cfg.Address, err, privateAddress, privateAddress)
			}
		}
		return fmt.Errorf("%w: no containerd answers at %s (%v); start one (as root: `apt-get install containerd runc && containerd &`, or `make setup` in corral's source tree, which starts a private one) and pass its socket with --address or CONTAINERD_ADDRESS",
			errdefs.ErrUnavailable, cfg.Address, err)
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
	log, err := audit.Open(cfg.StateDir, cfg.AuditFile)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	return &Executor{cfg: cfg, oci: oci, client: client, audit: log}, nil
}

// Close closes the containerd connection and the audit log.
func (e *Executor) Close() error {
	return errors.Join(e.client.Close(), e.audit.Close())
}

// Audit returns the executor's audit log (never nil once New succeeded).
func (e *Executor) Audit() *audit.Logger { return e.audit }

// Client returns the containerd client (for image builds and gc).
func (e *Executor) Client() *containerd.Client { return e.client }

// Config returns the resolved configuration.
func (e *Executor) Config() Config { return e.cfg }

// Context returns ctx in the executor's containerd namespace.
func (e *Executor) Context(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, e.cfg.Namespace)
}

// image returns the tools image, building the default one on first use.
func (e *Executor) image(ctx context.Context) (containerd.Image, error) {
	e.imgOnce.Lock()
	defer e.imgOnce.Unlock()
	if e.img != nil {
		return e.img, nil
	}
	img, err := e.client.GetImage(ctx, e.cfg.Image)
	switch {
	case err == nil:
	case errdefs.IsNotFound(err) && e.cfg.Image == DefaultImageRef:
		fmt.Fprintf(e.cfg.Log, "corral: building image %s on first use\n", e.cfg.Image)
		if _, err := BuildImage(ctx, e.client, DefaultImageSpec()); err != nil {
			return nil, fmt.Errorf("building image %s: %w", e.cfg.Image, err)
		}
		if img, err = e.client.GetImage(ctx, e.cfg.Image); err != nil {
			return nil, err
		}
	case errdefs.IsNotFound(err):
		if img, err = e.client.Pull(ctx, e.cfg.Image, containerd.WithPullUnpack, containerd.WithPullSnapshotter(snapshotter)); err != nil {
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
	e.img = img
	return img, nil
}
