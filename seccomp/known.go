package seccomp

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/opencontainers/runtime-spec/specs-go"
)

// knownActions are the actions a profile may use. SCMP_ACT_TRACE and
// SCMP_ACT_NOTIFY are left out: they need a tracer or a listener, which
// corral does not run.
var knownActions = []specs.LinuxSeccompAction{
	specs.ActAllow,
	specs.ActErrno,
	specs.ActKill,
	specs.ActKillProcess,
	specs.ActKillThread,
	specs.ActLog,
	specs.ActTrap,
}

// knownOperators are all the runtime-spec comparison operators.
var knownOperators = []specs.LinuxSeccompOperator{
	specs.OpEqualTo,
	specs.OpGreaterEqual,
	specs.OpGreaterThan,
	specs.OpLessEqual,
	specs.OpLessThan,
	specs.OpMaskedEqual,
	specs.OpNotEqual,
}

// knownArches are all the runtime-spec architectures; the host's libseccomp
// may support fewer (archSupported).
var knownArches = []specs.Arch{
	specs.ArchAARCH64,
	specs.ArchARM,
	specs.ArchLOONGARCH64,
	specs.ArchM68K,
	specs.ArchMIPS,
	specs.ArchMIPS64,
	specs.ArchMIPS64N32,
	specs.ArchMIPSEL,
	specs.ArchMIPSEL64,
	specs.ArchMIPSEL64N32,
	specs.ArchPARISC,
	specs.ArchPARISC64,
	specs.ArchPPC,
	specs.ArchPPC64,
	specs.ArchPPC64LE,
	specs.ArchRISCV64,
	specs.ArchS390,
	specs.ArchS390X,
	specs.ArchSH,
	specs.ArchSHEB,
	specs.ArchX32,
	specs.ArchX86,
	specs.ArchX86_64,
}

// archAliases maps GOARCH and libseccomp spellings to runtime-spec names.
var archAliases = map[string]specs.Arch{
	"386":         specs.ArchX86,
	"x86":         specs.ArchX86,
	"amd64":       specs.ArchX86_64,
	"x86_64":      specs.ArchX86_64,
	"x86-64":      specs.ArchX86_64,
	"x32":         specs.ArchX32,
	"arm":         specs.ArchARM,
	"arm64":       specs.ArchAARCH64,
	"aarch64":     specs.ArchAARCH64,
	"loong64":     specs.ArchLOONGARCH64,
	"loongarch64": specs.ArchLOONGARCH64,
	"mips":        specs.ArchMIPS,
	"mipsle":      specs.ArchMIPSEL,
	"mipsel":      specs.ArchMIPSEL,
	"mips64":      specs.ArchMIPS64,
	"mips64le":    specs.ArchMIPSEL64,
	"mipsel64":    specs.ArchMIPSEL64,
	"ppc":         specs.ArchPPC,
	"ppc64":       specs.ArchPPC64,
	"ppc64le":     specs.ArchPPC64LE,
	"riscv64":     specs.ArchRISCV64,
	"s390":        specs.ArchS390,
	"s390x":       specs.ArchS390X,
}

// KnownActions returns the actions a profile may use, sorted.
func KnownActions() []string { return names(knownActions) }

// KnownOperators returns the argument comparison operators a profile may
// use, sorted.
func KnownOperators() []string { return names(knownOperators) }

// KnownArchitectures returns the SCMP_ARCH_* names a profile may list,
// sorted. The host's libseccomp may support fewer; Validate says so.
func KnownArchitectures() []string { return names(knownArches) }

func names[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	slices.Sort(out)
	return out
}

// DefaultArchitectures returns the ABIs a filter covers on the target arch
// (spelled as for Validate, "" for runtime.GOARCH) when a profile lists none: on amd64 x86_64 and
// x32, on arm64 aarch64 and 32-bit arm, elsewhere the target alone.
//
// 32-bit x86 is left out on amd64 (Docker and containerd include it): no
// tool of the image is 32-bit, and there sockets and IPC also arrive through
// the socketcall(2) and ipc(2) multiplexers, whose first argument is the
// call number, so conditions on socket(2) could not hold. Its syscalls meet
// the filter's bad-architecture action instead.
func DefaultArchitectures(arch string) ([]specs.Arch, error) {
	a, err := parseArch(arch)
	if err != nil {
		return nil, err
	}
	return defaultArchitectures(a), nil
}

func defaultArchitectures(a specs.Arch) []specs.Arch {
	switch a {
	case specs.ArchX86_64:
		return []specs.Arch{specs.ArchX86_64, specs.ArchX32}
	case specs.ArchAARCH64:
		return []specs.Arch{specs.ArchAARCH64, specs.ArchARM}
	default:
		return []specs.Arch{a}
	}
}

// parseArch accepts a GOARCH, a libseccomp name or an SCMP_ARCH_* name; ""
// means runtime.GOARCH.
func parseArch(arch string) (specs.Arch, error) {
	if arch == "" {
		arch = runtime.GOARCH
	}
	if a, ok := archAliases[strings.ToLower(arch)]; ok {
		return a, nil
	}
	a := specs.Arch(strings.ToUpper(arch))
	if !strings.HasPrefix(string(a), "SCMP_ARCH_") {
		a = "SCMP_ARCH_" + a
	}
	if slices.Contains(knownArches, a) {
		return a, nil
	}
	return "", fmt.Errorf("%w %q", ErrUnknownArchitecture, arch)
}
