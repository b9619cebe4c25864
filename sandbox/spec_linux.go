package sandbox

import (
	"context"
	"fmt"
	"math"
	"path"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// specInput is everything one container's spec is made of.
type specInput struct {
	Namespace string
	ID        string
	Argv      []string
	Limits    profiles.Limits
	Seccomp   *seccomp.Profile
	Mounts    []specs.Mount
}

// DefaultImageSpec is what `corral image build` puts in the default tools
// image: every command of the built-in grammars that the host has.
// With corral-init found (FindInit) the image also holds it and its
// control mount point, so containers can be created before calls arrive;
// with corral found (FindHelper), it holds corral as the file tools'
// helper at /usr/bin/corral.
func DefaultImageSpec() ImageSpec {
	spec := ImageSpec{
		Ref: DefaultImageRef,
		Tools: []string{"ls", "cat", "echo", "head", "tail", "wc", "grep", "find", "sort", "uniq", "cut", "tr",
			"diff", "stat", "sed", "cp", "mv", "mkdir", "touch", "rm"},
		Optional: []string{"rg", "file", "git"},
		Files:    map[string]string{},
	}
	if p := FindInit(); p != "" {
		spec.Files[initPath] = p
	}
	// The file tools' helper (corral itself) reads staged content from the
	// control directory, so the mount point is there with or without init.
	if p := FindHelper(); p != "" {
		spec.Files[helperPath] = p
	}
	if len(spec.Files) > 0 {
		spec.Dirs = append(spec.Dirs, ctlPath)
	}
	return spec
}

// specOpts composes the container's spec, in this fixed order:
//  1. the default spec (namespaces pid, ipc, uts, mount and a new network
//     namespace that has only lo; masked and read-only /proc paths);
//  2. read-only rootfs, args, cwd, the fixed environment, uid/gid 65534,
//     no_new_privs;
//  3. capabilities (all sets empty), then seccomp: the seccomp filter must
//     follow the capability options (runtime-spec config-linux.md#seccomp);
//  4. the repository view, the write scope and /tmp;
//  5. memory (and memory+swap, so no swap), pids and CPU limits, the cgroup
//     path, rlimits and OOM score.
func specOpts(in specInput) []oci.SpecOpts {
	lim := in.Limits
	quota := int64(lim.CPUs * 100000)
	return []oci.SpecOpts{
		oci.WithDefaultSpec(),
		oci.WithRootFSReadonly(),
		oci.WithProcessArgs(in.Argv...),
		oci.WithProcessCwd(mounts.ContainerRoot),
		withFixedEnv(profiles.Env),
		withUser(ContainerUID, ContainerGID),
		oci.WithNoNewPrivileges,
		oci.WithHostname("corral"),
		withoutCapabilities,
		seccomp.WithProfile(in.Seccomp),
		oci.WithMounts(append(append([]specs.Mount(nil), in.Mounts...), specs.Mount{
			Destination: "/tmp", Type: "tmpfs", Source: "tmpfs",
			Options: []string{"nosuid", "nodev", "noexec", fmt.Sprintf("size=%d", lim.TmpBytes), "mode=1777"},
		})),
		oci.WithMemoryLimit(uint64(lim.MemoryBytes)),
		oci.WithMemorySwap(lim.MemoryBytes),
		oci.WithPidsLimit(lim.Pids),
		oci.WithCPUCFS(quota, 100000),
		oci.WithCgroup(path.Join("/", in.Namespace, in.ID)),
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
