package seccomp

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// Spec validates the profile for runtime.GOARCH and converts it to the
// runtime-spec form (config-linux.md#seccomp). The result shares nothing
// with p. Errno actions carry their errno explicitly (EPERM unless the
// profile says otherwise); the architectures are the profile's, or
// DefaultArchitectures(runtime.GOARCH). Errors are Validate's.
func (p *Profile) Spec() (*specs.LinuxSeccomp, error) {
	t, err := p.validate(runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	s := &specs.LinuxSeccomp{
		DefaultAction: p.defaultAction(),
		Architectures: slices.Clone(t.arches),
		Syscalls:      make([]specs.LinuxSyscall, 0, len(p.Rules)),
	}
	if e := p.defaultErrno(); e != 0 {
		s.DefaultErrnoRet = &e
	}
	for _, r := range p.Rules {
		sc := specs.LinuxSyscall{
			Names:  slices.Clone(r.Names),
			Action: r.Action,
		}
		if e := r.errno(); e != 0 {
			sc.ErrnoRet = &e
		}
		for _, a := range r.Args {
			sc.Args = append(sc.Args, specs.LinuxSeccompArg{
				Index:    a.Index,
				Value:    a.Value,
				ValueTwo: a.ValueTwo,
				Op:       a.Op,
			})
		}
		s.Syscalls = append(s.Syscalls, sc)
	}
	return s, nil
}

// WithProfile sets the spec's seccomp filter to p, converted by Spec when the
// option runs; it creates spec.Linux if it is nil. A nil p or an invalid
// profile fails the option (errdefs.ErrInvalidArgument).
//
// Ordering: WithProfile must follow oci.WithDefaultSpec (which replaces the
// whole spec) and the capability options, and nothing after it may clear the
// filter (oci.WithPrivileged, oci.WithSeccompUnconfined).
func WithProfile(p *Profile) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if p == nil {
			return fmt.Errorf("setting seccomp profile: nil profile: %w", errdefs.ErrInvalidArgument)
		}
		sc, err := p.Spec()
		if err != nil {
			return fmt.Errorf("setting seccomp profile: %w", err)
		}
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		s.Linux.Seccomp = sc
		return nil
	}
}

// Syscall is one syscall name and what one rule of a profile does with it.
type Syscall struct {
	// Name is the libseccomp syscall name.
	Name string
	// Action is the rule's action.
	Action specs.LinuxSeccompAction
	// ErrnoRet is the errno an SCMP_ACT_ERRNO rule returns, 0 otherwise.
	ErrnoRet uint
	// Args are the rule's conditions; empty means every call.
	Args []Arg
}

// Allowed reports whether the rule lets the syscall run (SCMP_ACT_ALLOW or
// SCMP_ACT_LOG), possibly only under its conditions.
func (s Syscall) Allowed() bool {
	return s.Action == specs.ActAllow || s.Action == specs.ActLog
}

// Syscalls lists every syscall the profile's rules name, one entry per name
// and rule, sorted by name (rule order within a name). Syscalls no rule names
// get the default action. The result shares nothing with p.
func (p *Profile) Syscalls() []Syscall {
	var out []Syscall
	for _, r := range p.Rules {
		for _, name := range r.Names {
			out = append(out, Syscall{
				Name:     name,
				Action:   r.Action,
				ErrnoRet: r.errno(),
				Args:     slices.Clone(r.Args),
			})
		}
	}
	slices.SortStableFunc(out, func(a, b Syscall) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Names returns the sorted, de-duplicated names of the syscalls the profile
// lets run, with or without argument conditions (see Syscalls for which).
func (p *Profile) Names() []string {
	var out []string
	for _, s := range p.Syscalls() {
		if s.Allowed() {
			out = append(out, s.Name)
		}
	}
	return slices.Compact(out)
}

// BPF compiles a seccomp section (as Spec returns it) for the host into the
// classic BPF program that seccomp(SECCOMP_SET_MODE_FILTER) loads: an array
// of struct sock_filter (8 bytes each, host byte order), as libseccomp's
// seccomp_export_bpf writes it. It builds the filter an OCI runtime builds
// from the same section (runc, crun: the default action and errno, every
// listed architecture, one rule per name with the rule's args ANDed), so a
// runtime that takes a precompiled filter instead (crun's annotation
// run.oci.seccomp_bpf_data, crun(1)) enforces what the section says. An
// unknown action, operator or syscall fails with errdefs.ErrInvalidArgument;
// without libseccomp (no cgo, not Linux) BPF fails with
// errdefs.ErrNotImplemented.
func BPF(s *specs.LinuxSeccomp) ([]byte, error) {
	if s == nil {
		return nil, fmt.Errorf("compiling the seccomp filter: no seccomp section: %w", errdefs.ErrInvalidArgument)
	}
	out, err := bpf(s)
	if err != nil {
		return nil, fmt.Errorf("compiling the seccomp filter: %w", err)
	}
	return out, nil
}
