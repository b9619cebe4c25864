//go:build linux && cgo

package seccomp

import (
	"fmt"
	"strings"

	"github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
)

func available() error { return nil }

// scmpArch converts an SCMP_ARCH_* name to libseccomp's token.
func scmpArch(a specs.Arch) (libseccomp.ScmpArch, error) {
	return libseccomp.GetArchFromString(strings.ToLower(strings.TrimPrefix(string(a), "SCMP_ARCH_")))
}

// archSupported: the host's libseccomp resolves syscalls for a (probing
// with exit(2), which every architecture has).
func archSupported(a specs.Arch) error {
	arch, err := scmpArch(a)
	if err == nil {
		_, err = libseccomp.GetSyscallFromNameByArch("exit", arch)
	}
	if err != nil {
		major, minor, micro := libseccomp.GetLibraryVersion()
		return fmt.Errorf("%w by libseccomp %d.%d.%d", ErrUnknownArchitecture, major, minor, micro)
	}
	return nil
}

// syscallNumber returns the number of name on a: negative for a
// libseccomp pseudo-syscall (a name that is not a syscall of its own on a),
// an error if libseccomp does not know the name.
func syscallNumber(name string, a specs.Arch) (int32, error) {
	arch, err := scmpArch(a)
	if err != nil {
		return 0, err
	}
	nr, err := libseccomp.GetSyscallFromNameByArch(name, arch)
	if err != nil {
		return 0, err
	}
	return int32(nr), nil
}
