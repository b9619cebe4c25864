package sandbox

import (
	"context"
	"fmt"
	"math"
	"path"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/corral-sandbox/corral/internal/initctl"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// containerPlan is everything one container is made of, decided before
// any of it is created; specOpts turns it into the spec.
type containerPlan struct {
	// ID is the container's id, and the leaf of its cgroup path.
	ID string
	// Namespace is the containerd namespace, the parent of the cgroup.
	Namespace string
	// Limits are the profile's resource limits.
	Limits profiles.Limits
	// Seccomp is the filter, applied after the capabilities.
	Seccomp *seccomp.Profile
	// Binds are the session layout's container mounts (mounts.Layout.Binds:
	// the view, the write area or the page), in order.
	Binds []specs.Mount
	// Ctl is the host's control directory of the session (staged
	// file-tool content), bound read-only at initctl.CtlDir.
	Ctl string
	// Req is the host's request directory of this container alone (its
	// control file), bound read-only at initctl.ReqDir: no container sees
	// another's control file, so no tool can read (and so steal) the
	// request a container started ahead waits for on its FIFO.
	Req string
	// Init is the host's corral-init (a content-addressed copy), bound
	// read-only at initctl.InitPath.
	Init string
}

// args is the container's process: corral-init and its control file.
func (p containerPlan) args() []string {
	return []string{initctl.InitPath, initctl.RequestFile}
}

// mounts is the container's mount list in order: the layout's binds
// (the view at mounts.ContainerRoot first, the write area or page over
// it), /tmp, the control directory, the container's request directory
// and corral-init. All are nosuid and
// nodev; everything but corral-init is noexec.
func (p containerPlan) mounts() []specs.Mount {
	ms := append([]specs.Mount(nil), p.Binds...)
	return append(ms,
		specs.Mount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs",
			Options: []string{"nosuid", "nodev", "noexec", fmt.Sprintf("size=%d", p.Limits.TmpBytes), "mode=1777"}},
		specs.Mount{Destination: initctl.CtlDir, Type: "bind", Source: p.Ctl,
			Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec", "rprivate"}},
		specs.Mount{Destination: initctl.ReqDir, Type: "bind", Source: p.Req,
			Options: []string{"bind", "ro", "nosuid", "nodev", "noexec", "rprivate"}},
		specs.Mount{Destination: initctl.InitPath, Type: "bind", Source: p.Init,
			Options: []string{"bind", "ro", "nosuid", "nodev", "rprivate"}},
	)
}

// specOpts composes the container's spec from the whole plan, the one
// place it is made, in this fixed order:
//  1. the default spec (namespaces pid, ipc, uts, mount and a new network
//     namespace that has only lo; masked and read-only /proc paths), and
//     procMasks;
//  2. read-only rootfs, the process (corral-init and its control file),
//     cwd, the fixed environment, uid/gid 65534, no_new_privs;
//  3. capabilities (all sets empty), then seccomp: the seccomp filter must
//     follow the capability options (runtime-spec config-linux.md#seccomp);
//  4. every mount (see containerPlan.mounts);
//  5. memory (and memory+swap, so no swap), pids and CPU limits, the cgroup
//     path, rlimits and OOM score.
func specOpts(p containerPlan) []oci.SpecOpts {
	lim := p.Limits
	quota := int64(lim.CPUs * 100000)
	return []oci.SpecOpts{
		oci.WithDefaultSpec(),
		withProcMasks,
		oci.WithRootFSReadonly(),
		oci.WithProcessArgs(p.args()...),
		oci.WithProcessCwd(mounts.ContainerRoot),
		withFixedEnv(profiles.Env),
		withUser(ContainerUID, ContainerGID),
		oci.WithNoNewPrivileges,
		oci.WithHostname("corral"),
		withoutCapabilities,
		seccomp.WithProfile(p.Seccomp),
		oci.WithMounts(p.mounts()),
		oci.WithMemoryLimit(uint64(lim.MemoryBytes)),
		oci.WithMemorySwap(lim.MemoryBytes),
		oci.WithPidsLimit(lim.Pids),
		oci.WithCPUCFS(quota, 100000),
		oci.WithCgroup(path.Join("/", p.Namespace, p.ID)),
		oci.WithRlimit(&specs.POSIXRlimit{Type: "RLIMIT_CORE", Hard: 0, Soft: 0}),
		// A process cannot use more CPU seconds than the wall-clock
		// timeout allows at the CPU quota; this limit kills a busy loop
		// even when the supervisor that enforces the timeout has died.
		oci.WithRlimit(&specs.POSIXRlimit{Type: "RLIMIT_CPU", Hard: cpuSeconds(lim), Soft: cpuSeconds(lim)}),
		oci.WithRlimit(&specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}),
		withOOMScoreAdj(1000),
	}
}

// withFixedEnv replaces the whole environment: nothing of the supervisor's
// own environment reaches the container, and callers cannot add to it.
func withFixedEnv(env []string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Process.Env = append([]string(nil), env...)
		return nil
	}
}

func withUser(uid, gid uint32) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Process.User = specs.User{UID: uid, GID: gid}
		return nil
	}
}

// withoutCapabilities empties every capability set, ambient included.
func withoutCapabilities(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	s.Process.Capabilities = &specs.LinuxCapabilities{
		Bounding: []string{}, Effective: []string{}, Permitted: []string{}, Inheritable: []string{}, Ambient: []string{},
	}
	return nil
}

func withOOMScoreAdj(adj int) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Process.OOMScoreAdj = &adj
		return nil
	}
}

// cpuSeconds is RLIMIT_CPU for the limits: the timeout at the CPU quota,
// rounded up, plus one second.
func cpuSeconds(lim profiles.Limits) uint64 {
	return uint64(math.Ceil(lim.Timeout.Seconds()*max(lim.CPUs, 1))) + 1
}
