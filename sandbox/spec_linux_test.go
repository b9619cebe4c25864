package sandbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/corral-sandbox/corral/internal/initctl"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testPlan is a write-directory session's container plan, with the binds
// of its layout.
func testPlan(t *testing.T) containerPlan {
	t.Helper()
	sc, err := seccomp.LoadDefault()
	require.NoError(t, err)
	l := &mounts.Layout{Plan: mounts.Plan{WriteDir: "openwiki"}, View: "/state/s/view", Write: "/state/s/write"}
	return containerPlan{
		ID: t.Name(), Namespace: "corral",
		Limits: profiles.Limits{
			MemoryBytes: 512 << 20, Pids: 128, CPUs: 1.5, TmpBytes: 64 << 20,
			Timeout: 30 * time.Second, OutputBytes: 1 << 20,
		},
		Seccomp: sc,
		Binds:   l.Binds(),
		Ctl:     "/state/s/ctl",
		Req:     "/state/s/req/" + t.Name(),
		Init:    "/state/bin/corral-init-abc",
	}
}

// generate builds the spec of plan without a daemon, as containerd's own
// pkg/oci tests do.
func generate(t *testing.T, plan containerPlan) *oci.Spec {
	t.Helper()
	ctx := namespaces.WithNamespace(context.Background(), "corral")
	s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: t.Name()}, specOpts(plan)...)
	require.NoError(t, err)
	return s
}

// TestSpec is the whole spec of one container, checked field by field:
// what isolates it must be there whatever changes around it.
func TestSpec(t *testing.T) {
	plan := testPlan(t)
	s := generate(t, plan)

	// The process: corral-init with its control file, as 65534, with
	// no_new_privs, in the view, with the fixed environment only.
	require.Equal(t, []string{initctl.InitPath, initctl.RequestFile}, s.Process.Args)
	assert.Equal(t, mounts.ContainerRoot, s.Process.Cwd)
	assert.Equal(t, specs.User{UID: 65534, GID: 65534}, s.Process.User)
	assert.True(t, s.Process.NoNewPrivileges)
	assert.Equal(t, profiles.Env, s.Process.Env)
	require.NotNil(t, s.Root)
	assert.True(t, s.Root.Readonly, "read-only root")

	// Every capability set is empty.
	c := s.Process.Capabilities
	require.NotNil(t, c)
	for name, set := range map[string][]string{"bounding": c.Bounding, "effective": c.Effective, "permitted": c.Permitted, "inheritable": c.Inheritable, "ambient": c.Ambient} {
		assert.Empty(t, set, name)
	}

	// Namespaces: a new network namespace (never the host's: no path),
	// and pid, ipc, uts, mount.
	var have []specs.LinuxNamespaceType
	for _, ns := range s.Linux.Namespaces {
		have = append(have, ns.Type)
		assert.Empty(t, ns.Path, "namespace %s joins an existing one", ns.Type)
	}
	for _, want := range []specs.LinuxNamespaceType{specs.NetworkNamespace, specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.MountNamespace} {
		assert.Contains(t, have, want)
	}

	// Seccomp: an allowlist whose default denies with an errno.
	require.NotNil(t, s.Linux.Seccomp)
	assert.Equal(t, specs.ActErrno, s.Linux.Seccomp.DefaultAction)
	assert.NotEmpty(t, s.Linux.Seccomp.Syscalls)

	// Mounts: the default ones, then the plan's in order.
	byDest := map[string]specs.Mount{}
	var order []string
	for _, m := range s.Mounts {
		byDest[m.Destination] = m
		order = append(order, m.Destination)
	}
	want := []struct {
		dest, typ, source string
		opts              []string
		absent            []string
	}{
		{mounts.ContainerRoot, "bind", "/state/s/view", []string{"ro", "nosuid", "nodev", "noexec"}, []string{"rw"}},
		{mounts.ContainerRoot + "/openwiki", "bind", "/state/s/write", []string{"rw", "nosuid", "nodev", "noexec"}, []string{"ro"}},
		{"/tmp", "tmpfs", "tmpfs", []string{"nosuid", "nodev", "noexec", "size=67108864"}, nil},
		{initctl.CtlDir, "bind", "/state/s/ctl", []string{"ro", "nosuid", "nodev", "noexec"}, []string{"rw"}},
		{initctl.ReqDir, "bind", "/state/s/req/" + t.Name(), []string{"ro", "nosuid", "nodev", "noexec"}, []string{"rw", "rbind"}},
		{initctl.InitPath, "bind", "/state/bin/corral-init-abc", []string{"ro", "nosuid", "nodev"}, []string{"rw", "noexec"}},
	}
	for i, w := range want {
		m, ok := byDest[w.dest]
		require.True(t, ok, "no mount at %s", w.dest)
		assert.Equal(t, w.typ, m.Type, w.dest)
		assert.Equal(t, w.source, m.Source, w.dest)
		for _, o := range w.opts {
			assert.Contains(t, m.Options, o, w.dest)
		}
		for _, o := range w.absent {
			assert.NotContains(t, m.Options, o, w.dest)
		}
		if i > 0 {
			assert.Less(t, slices.Index(order, want[i-1].dest), slices.Index(order, w.dest), "%s is mounted after %s", w.dest, want[i-1].dest)
		}
	}
	// No other mount reaches the host's filesystem.
	for _, m := range s.Mounts {
		if m.Type == "bind" {
			assert.Contains(t, []string{mounts.ContainerRoot, mounts.ContainerRoot + "/openwiki", initctl.CtlDir, initctl.ReqDir, initctl.InitPath}, m.Destination, "unexpected bind %v", m)
		}
	}
	// The default spec's masked and read-only /proc paths stay.
	assert.Contains(t, s.Linux.MaskedPaths, "/proc/kcore")
	assert.Contains(t, s.Linux.ReadonlyPaths, "/proc/sys")

	// Resources: memory without swap, pids, a CPU quota, the cgroup.
	r := s.Linux.Resources
	require.NotNil(t, r)
	require.NotNil(t, r.Memory)
	assert.EqualValues(t, 512<<20, *r.Memory.Limit)
	assert.EqualValues(t, 512<<20, *r.Memory.Swap, "memory+swap = memory: no swap")
	require.NotNil(t, r.Pids)
	assert.EqualValues(t, 128, *r.Pids.Limit)
	require.NotNil(t, r.CPU)
	assert.EqualValues(t, 150000, *r.CPU.Quota)
	assert.EqualValues(t, 100000, *r.CPU.Period)
	assert.Equal(t, "/corral/"+t.Name(), s.Linux.CgroupsPath)

	// Rlimits: no core dumps; CPU seconds bounded by the timeout at the
	// quota (30 s × 1.5 + 1); descriptors bounded.
	rl := map[string]specs.POSIXRlimit{}
	for _, l := range s.Process.Rlimits {
		rl[l.Type] = l
	}
	assert.Equal(t, specs.POSIXRlimit{Type: "RLIMIT_CORE"}, rl["RLIMIT_CORE"])
	assert.Equal(t, specs.POSIXRlimit{Type: "RLIMIT_CPU", Hard: 46, Soft: 46}, rl["RLIMIT_CPU"])
	assert.Equal(t, specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}, rl["RLIMIT_NOFILE"])
	require.NotNil(t, s.Process.OOMScoreAdj)
	assert.Equal(t, 1000, *s.Process.OOMScoreAdj)
}

// TestSpecReadOnlySession: a read-only session's container has no
// writable bind at all.
func TestSpecReadOnlySession(t *testing.T) {
	plan := testPlan(t)
	plan.Binds = plan.Binds[:1]
	s := generate(t, plan)
	for _, m := range s.Mounts {
		if m.Type == "bind" {
			assert.NotContains(t, m.Options, "rw", m.Destination)
		}
	}
}
