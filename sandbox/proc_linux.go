package sandbox

import (
	"context"
	"slices"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// procMasks are the /proc files every container gets masked (bound over
// with an empty /dev/null by the runtime, runtime-spec config-linux.md
// "Masked Paths") on top of oci.WithDefaultSpec's list:
//
//   - the mount table of PID 1 (mountinfo, mounts, mountstats), as
//     /proc/1 and as its main thread /proc/1/task/1: it names host paths
//     (the state directory under every layer and bind, containerd's
//     snapshot directories). /proc/self, /proc/thread-self and /proc/mounts
//     reach these files while the process reading them is PID 1.
//   - /proc/cmdline, the host kernel's boot parameters.
//
// A mask is a mount on one existing /proc entry, made by the runtime's
// init while it is PID 1 and the only process: it cannot cover a /proc/<pid>
// that appears later (a child of PID 1, a thread's /proc/<tid>), nor follow
// "self" to another pid: the tool, PID 1's child, is kept out of /proc by
// Landlock, which corral-init sets in the tool's process before its exec
// (cmd/corral-init/confine.go). docs/design.md says what a tool can still
// read in /proc and why.
var procMasks = []string{
	"/proc/1/mountinfo",
	"/proc/1/mounts",
	"/proc/1/mountstats",
	"/proc/1/task/1/mountinfo",
	"/proc/1/task/1/mounts",
	"/proc/1/task/1/mountstats",
	"/proc/cmdline",
}

// withProcMasks adds procMasks to the spec's masked paths; it must follow
// oci.WithDefaultSpec, which replaces the list.
func withProcMasks(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	if s.Linux == nil {
		s.Linux = &specs.Linux{}
	}
	for _, p := range procMasks {
		if !slices.Contains(s.Linux.MaskedPaths, p) {
			s.Linux.MaskedPaths = append(s.Linux.MaskedPaths, p)
		}
	}
	return nil
}
