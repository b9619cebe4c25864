//go:build !linux || !cgo

package seccomp

import (
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
)

func available() error {
	return fmt.Errorf("checking syscall names needs libseccomp (linux, cgo): %w", errdefs.ErrNotImplemented)
}

func archSupported(specs.Arch) error { return available() }

func syscallNumber(string, specs.Arch) (int32, error) { return 0, available() }

func bpf(*specs.LinuxSeccomp) ([]byte, error) { return nil, available() }
