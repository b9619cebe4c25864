package sandbox

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/containerd/errdefs"
)

// RuncShim is containerd's runc v2 shim (io.containerd.runc.v2). It runs
// any OCI runtime that takes runc's command line, named by its BinaryName
// option (containerd api/types/runc/options.Options).
const RuncShim = "io.containerd.runc.v2"

// RuntimeInfo is one OCI runtime corral knows by name: how containerd
// reaches it and what it enforces differently from runc. The table is
// Runtimes; the ops commands (doctor, version) read it too.
type RuntimeInfo struct {
	// Name is what --runtime accepts: "runc", "crun" or "runsc".
	Name string `json:"name"`
	// Shim is the containerd runtime type the container is created with.
	Shim string `json:"shim"`
	// Binary is the OCI runtime the shim runs: a command name looked up in
	// PATH when the executor starts, or an absolute path; --runtime-binary
	// replaces it. "" for runc: the shim's own default ("runc" in the
	// shim's PATH).
	Binary string `json:"binary,omitempty"`
	// Package is the Debian 12 package that ships Binary.
	Package string `json:"package"`
	// SpecVersion is the runtime-spec version written into every spec's
	// ociVersion: the one the runtime says it implements. crun 1.8.1
	// refuses a spec whose version it does not know ("unknown version
	// specified" for 1.3.0, containerd v2's default).
	SpecVersion string `json:"spec_version"`
	// Flags are the runtime's own global flags. The runc v2 shim passes
	// none (its BinaryName is a path, not a command line), so a runtime
	// with Flags runs through corral-runsc, corral's wrapper (a static
	// program the shim runs as the runtime's binary), which adds them and
	// turns the kill of a created, never started container into
	// `delete --force` (runsc 20221219 refuses to signal one).
	Flags []string `json:"flags,omitempty"`
	// PidsOverhead is added to the profile's pids limit in the spec: host
	// threads of the runtime itself that count against the container's
	// pids.max (gVisor's Sentry and gofer live in the container's cgroup).
	PidsOverhead int64 `json:"pids_overhead,omitempty"`
	// SeccompAllow are system calls the spec's filter lets through to the
	// runtime's own kernel instead of failing them with an errno.
	SeccompAllow []string `json:"seccomp_allow,omitempty"`
	// SeccompBPF: the runtime takes the filter precompiled, in the
	// annotation SeccompBPFAnnotation, instead of compiling the spec's
	// seccomp section on every create. corral compiles each distinct
	// section once per executor (seccomp.BPF) and keeps the section in the
	// spec as the filter's description.
	SeccompBPF bool `json:"seccomp_bpf,omitempty"`
	// Differences are what the runtime enforces differently from runc, as
	// the integration tests assert it (docs/runtimes.md has the matrix).
	Differences []string `json:"differences,omitempty"`
	// StartAhead: a session's pool starts its containers ahead of the
	// calls, each corral-init then waiting for its request on a FIFO in
	// the control directory (a host FIFO bound into the container), so a
	// call costs the request, the tool and the exit, not the runtime's
	// start. Without it the pool only creates them and each call starts
	// one. runsc 20221219 connects a host FIFO only with --host-fifo=open,
	// which would also connect any FIFO a repository holds, so it does
	// not start ahead.
	StartAhead bool `json:"start_ahead,omitempty"`
}

// Wrapped reports whether the runtime runs through corral's wrapper.
func (r RuntimeInfo) Wrapped() bool { return len(r.Flags) > 0 }

// runtimes is the table: one entry per runtime corral names, runc first
// (the default).
var runtimes = []RuntimeInfo{
	{
		Name: "runc", Shim: RuncShim, Package: "runc", SpecVersion: "1.0.2-dev",
		StartAhead: true,
	},
	{
		Name: "crun", Shim: RuncShim, Binary: "crun", Package: "crun", SpecVersion: "1.0.0",
		StartAhead: true,
		SeccompBPF: true,
		Differences: []string{
			"refuses a cgroup hybrid host while cgroup2 still has a controller (hack/crun-cgroups.sh)",
		},
	},
	{
		Name: "runsc", Shim: RuncShim, Binary: "runsc", Package: "runsc", SpecVersion: "1.0.2-dev",
		// --network=none: without it start fails ("cannot run with network
		// enabled in root network namespace"); the sandbox has only lo.
		// --oci-seccomp: apply the spec's seccomp filter inside the
		// sandbox; without it runsc ignores linux.seccomp.
		Flags: []string{"--network=none", "--oci-seccomp"},
		// Measured: an idle sandbox holds 8-22 host threads, one running
		// rg, grep and git up to 74 (Go's runtime adds threads as
		// goroutines block), so the profiles' 64 killed it.
		PidsOverhead: 256,
		// runsc applies an errno rule with EPERM whatever its errnoRet, so
		// clone3 (ENOSYS in the filter, to make glibc fall back to clone,
		// whose flags the filter can read) failed every thread creation
		// (rg: "failed to spawn thread"). The Sentry answers clone3 itself.
		SeccompAllow: []string{"clone3"},
		Differences: []string{
			"system calls are answered by gVisor's own kernel (the Sentry); the spec's seccomp filter applies inside it",
			"/proc is gVisor's own: the runc masked paths do not exist or are empty",
			"a write to the read-only root fails with EACCES, not EROFS",
			"statx with AT_NO_AUTOMOUNT fails with EINVAL (coreutils stat, ls -l)",
			"the sandbox's own threads count against the pids limit: the spec's limit is the profile's plus PidsOverhead",
			"clone3 reaches gVisor's kernel instead of failing with ENOSYS in the filter (runsc ignores errnoRet)",
		},
	},
}

// SeccompBPFAnnotation is crun's annotation for a precompiled seccomp
// filter: the raw program for seccomp(SECCOMP_SET_MODE_FILTER), base64;
// crun then ignores the spec's seccomp section (crun(1), crun 1.8).
const SeccompBPFAnnotation = "run.oci.seccomp_bpf_data"

// DefaultRuntime is the runtime used unless another is named.
const DefaultRuntime = "runc"

// Runtimes returns the table of runtimes corral knows by name, the
// default first.
func Runtimes() []RuntimeInfo {
	out := make([]RuntimeInfo, len(runtimes))
	for i, r := range runtimes {
		r.Flags = append([]string(nil), r.Flags...)
		r.SeccompAllow = append([]string(nil), r.SeccompAllow...)
		r.Differences = append([]string(nil), r.Differences...)
		out[i] = r
	}
	return out
}

// shimType is containerd's form of a runtime type: io.containerd.<name>.v<N>.
var shimType = regexp.MustCompile(`^io\.containerd\.[a-z0-9_-]+\.v[0-9]+$`)

// LookupRuntime returns the runtime named name: a table name (Runtimes),
// or a containerd shim type io.containerd.<name>.v<N>, which runs with the
// shim's defaults (for RuncShim: runc). "" is DefaultRuntime. Any other
// name fails with errdefs.ErrInvalidArgument naming the accepted ones.
func LookupRuntime(name string) (RuntimeInfo, error) {
	if name == "" {
		name = DefaultRuntime
	}
	for _, r := range Runtimes() {
		if r.Name == name {
			return r, nil
		}
	}
	if shimType.MatchString(name) {
		// The shim's own spec version: containerd's default spec.
		return RuntimeInfo{Name: name, Shim: name}, nil
	}
	return RuntimeInfo{}, fmt.Errorf("%w: unknown runtime %q: want %s, or a containerd shim type io.containerd.<name>.v<N>",
		errdefs.ErrInvalidArgument, name, RuntimeNames())
}

// RuntimeNames lists the table's names for messages: "runc, crun or runsc".
func RuntimeNames() string {
	var names []string
	for _, r := range runtimes {
		names = append(names, r.Name)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
