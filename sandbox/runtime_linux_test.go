package sandbox

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
)

func TestLookupRuntime(t *testing.T) {
	for _, name := range []string{"", "runc", "crun", "runsc"} {
		r, err := LookupRuntime(name)
		require.NoError(t, err, name)
		require.Equal(t, RuncShim, r.Shim, name)
		require.NotEmpty(t, r.SpecVersion, name)
	}
	r, err := LookupRuntime("io.containerd.runsc.v1")
	require.NoError(t, err)
	require.Equal(t, "io.containerd.runsc.v1", r.Shim)
	require.Empty(t, r.SpecVersion, "a shim type keeps containerd's spec version")

	for _, bad := range []string{"gvisor", "io.containerd.runc", "RUNC", "/usr/bin/crun"} {
		_, err := LookupRuntime(bad)
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument, bad)
		require.ErrorContains(t, err, "want runc, crun or runsc", bad)
	}
}

func TestResolveRuntime(t *testing.T) {
	state := t.TempDir()
	r, err := resolveRuntime("runc", "", state)
	require.NoError(t, err)
	require.Empty(t, r.binary, "runc is the shim's default binary")
	require.Equal(t, filepath.Join(state, "runc"), r.root)

	r, err = resolveRuntime("crun", "/bin/true", state)
	require.NoError(t, err)
	require.Equal(t, "/bin/true", r.binary)
	require.Equal(t, filepath.Join(state, "crun"), r.root)

	r, err = resolveRuntime(RuncShim, "true", state)
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(r.binary))
	require.Equal(t, filepath.Join(state, "true"), r.root, "a shim type's root is named after its binary")

	_, err = resolveRuntime("crun", "/nonexistent/crun", state)
	require.ErrorIs(t, err, errdefs.ErrNotFound)
	require.ErrorContains(t, err, "--runtime-binary")

	_, err = resolveRuntime("io.containerd.runsc.v1", "/bin/true", state)
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
}

func TestRuntimeSpec(t *testing.T) {
	for _, name := range []string{"runc", "crun", "runsc"} {
		info, err := LookupRuntime(name)
		require.NoError(t, err)
		r := &ociRuntime{info: info}
		plan := testPlan(t)
		s, err := oci.GenerateSpec(namespaces.WithNamespace(context.Background(), "corral"), nil, &containers.Container{ID: t.Name()}, r.spec(specOpts(plan))...)
		require.NoError(t, err)
		require.Equal(t, info.SpecVersion, s.Version, name)
		require.Equal(t, plan.Limits.Pids+info.PidsOverhead, *s.Linux.Resources.Pids.Limit, name)
		var allowed, errno []string
		for _, rule := range s.Linux.Seccomp.Syscalls {
			if rule.Action == specs.ActAllow && len(rule.Args) == 0 {
				allowed = append(allowed, rule.Names...)
			}
			if rule.Action == specs.ActErrno {
				errno = append(errno, rule.Names...)
			}
		}
		for _, n := range info.SeccompAllow {
			require.Contains(t, allowed, n, name)
			require.NotContains(t, errno, n, name)
		}
		if name != "runsc" {
			require.Contains(t, errno, "clone3", name)
		}
	}
}

// TestRuntimeSpecSeccompBPF: crun's spec carries the final seccomp
// section compiled (seccomp.BPF, base64) in SeccompBPFAnnotation, next to
// the section itself; runc's and runsc's carry no annotation. The program
// is compiled once per distinct section.
func TestRuntimeSpecSeccompBPF(t *testing.T) {
	ctx := namespaces.WithNamespace(context.Background(), "corral")
	for _, name := range []string{"runc", "crun", "runsc"} {
		info, err := LookupRuntime(name)
		require.NoError(t, err)
		r := &ociRuntime{info: info}
		s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: t.Name()}, r.spec(specOpts(testPlan(t)))...)
		require.NoError(t, err)
		require.NotNil(t, s.Linux.Seccomp, name)
		data, ok := s.Annotations[SeccompBPFAnnotation]
		if name != "crun" {
			require.False(t, ok, name)
			continue
		}
		require.True(t, info.SeccompBPF)
		prog, err := base64.StdEncoding.DecodeString(data)
		require.NoError(t, err)
		want, err := seccomp.BPF(s.Linux.Seccomp)
		require.NoError(t, err)
		require.Equal(t, want, prog, "the annotation is the spec's own section compiled")

		// A second container of the same profile reuses the program; a
		// different section gets its own.
		s2, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: t.Name() + "-2"}, r.spec(specOpts(testPlan(t)))...)
		require.NoError(t, err)
		require.Equal(t, data, s2.Annotations[SeccompBPFAnnotation])
		require.Len(t, r.bpf, 1)
		other := testPlan(t)
		other.Seccomp = seccomp.Default()
		other.Seccomp.Rules = other.Seccomp.Rules[1:]
		s3, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: t.Name() + "-3"}, r.spec(specOpts(other))...)
		require.NoError(t, err)
		require.NotEqual(t, data, s3.Annotations[SeccompBPFAnnotation])
		require.Len(t, r.bpf, 2)
	}
}

func TestInstallWrapper(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin", "w")
	require.NoError(t, installWrapper(dir, []byte("prog"), []byte("{}")))
	require.True(t, sameContent(filepath.Join(dir, "corral-runsc"), []byte("prog")))
	require.True(t, sameContent(filepath.Join(dir, "corral-runsc.json"), []byte("{}")))
	// Idempotent; a damaged copy is replaced.
	require.NoError(t, installWrapper(dir, []byte("prog"), []byte("{}")))
	require.NoError(t, installWrapper(dir, []byte("prog"), []byte(`{"x":1}`)))
	require.True(t, sameContent(filepath.Join(dir, "corral-runsc.json"), []byte(`{"x":1}`)))
}
