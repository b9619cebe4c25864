//go:build linux && cgo

package seccomp

import (
	"fmt"
	"io"
	"os"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// bpf compiles s with libseccomp the way an OCI runtime compiles the
// spec's seccomp section: a filter with the default action, every listed
// architecture, then per rule and name one rule whose conditions are all
// the rule's args (ANDed; Validate allows one condition per argument, so
// no rule needs splitting), and exports it with seccomp_export_bpf.
func bpf(s *specs.LinuxSeccomp) ([]byte, error) {
	def, err := scmpActionOf(s.DefaultAction, s.DefaultErrnoRet)
	if err != nil {
		return nil, err
	}
	f, err := libseccomp.NewFilter(def)
	if err != nil {
		return nil, fmt.Errorf("creating the filter: %w", err)
	}
	defer f.Release()
	for _, a := range s.Architectures {
		arch, err := scmpArch(a)
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrUnknownArchitecture, a, errdefs.ErrInvalidArgument)
		}
		if err := f.AddArch(arch); err != nil {
			return nil, fmt.Errorf("adding architecture %s: %w", a, err)
		}
	}
	for _, r := range s.Syscalls {
		action, err := scmpActionOf(r.Action, r.ErrnoRet)
		if err != nil {
			return nil, err
		}
		var conds []libseccomp.ScmpCondition
		for _, a := range r.Args {
			op, ok := scmpOps[a.Op]
			if !ok {
				return nil, fmt.Errorf("%w %q: %w", ErrUnknownOperator, a.Op, errdefs.ErrInvalidArgument)
			}
			values := []uint64{a.Value}
			if a.Op == specs.OpMaskedEqual {
				values = append(values, a.ValueTwo)
			}
			c, err := libseccomp.MakeCondition(a.Index, op, values...)
			if err != nil {
				return nil, fmt.Errorf("argument %d: %w", a.Index, err)
			}
			conds = append(conds, c)
		}
		for _, name := range r.Names {
			nr, err := libseccomp.GetSyscallFromName(name)
			if err != nil {
				return nil, fmt.Errorf("%w %q: %w", ErrUnknownSyscall, name, errdefs.ErrInvalidArgument)
			}
			if len(conds) == 0 {
				err = f.AddRule(nr, action)
			} else {
				err = f.AddRuleConditional(nr, action, conds)
			}
			if err != nil {
				return nil, fmt.Errorf("adding the rule for %s: %w", name, err)
			}
		}
	}
	mem, err := unix.MemfdCreate("corral-seccomp-bpf", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("exporting the filter: %w", err)
	}
	file := os.NewFile(uintptr(mem), "corral-seccomp-bpf")
	defer file.Close()
	if err := f.ExportBPF(file); err != nil {
		return nil, fmt.Errorf("exporting the filter: %w", err)
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("exporting the filter: %w", err)
	}
	return io.ReadAll(file)
}

var scmpOps = map[specs.LinuxSeccompOperator]libseccomp.ScmpCompareOp{
	specs.OpNotEqual:     libseccomp.CompareNotEqual,
	specs.OpLessThan:     libseccomp.CompareLess,
	specs.OpLessEqual:    libseccomp.CompareLessOrEqual,
	specs.OpEqualTo:      libseccomp.CompareEqual,
	specs.OpGreaterEqual: libseccomp.CompareGreaterEqual,
	specs.OpGreaterThan:  libseccomp.CompareGreater,
	specs.OpMaskedEqual:  libseccomp.CompareMaskedEqual,
}

// scmpActionOf converts a runtime-spec action to libseccomp's, an errno
// action with its errno (EPERM when nil), as runc and crun read them
// (SCMP_ACT_KILL kills the thread).
func scmpActionOf(a specs.LinuxSeccompAction, errno *uint) (libseccomp.ScmpAction, error) {
	switch a {
	case specs.ActAllow:
		return libseccomp.ActAllow, nil
	case specs.ActErrno:
		e := uint(unix.EPERM)
		if errno != nil {
			e = *errno
		}
		return libseccomp.ActErrno.SetReturnCode(int16(e)), nil
	case specs.ActKill, specs.ActKillThread:
		return libseccomp.ActKillThread, nil
	case specs.ActKillProcess:
		return libseccomp.ActKillProcess, nil
	case specs.ActTrap:
		return libseccomp.ActTrap, nil
	case specs.ActLog:
		return libseccomp.ActLog, nil
	}
	return libseccomp.ActInvalid, fmt.Errorf("%w %q: %w", ErrUnknownAction, a, errdefs.ErrInvalidArgument)
}
