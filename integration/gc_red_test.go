package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/testhook"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
)

// TestGCRunsNoFakeShim (red team): a process whose command line looks
// like a shim of corral's namespace (argv0 containerd-shim-*, -namespace
// NS -id corral-*), whose working directory holds a config.json with one
// mount source beneath the state directory, was taken by
// sweepOrphanShims for an orphan task, and gc (root) ran that process's
// executable with its own flags and "delete" (removeOrphan: the shim's
// delete action): `bash -c SCRIPT ... delete` ran SCRIPT as root. Two
// such processes: an unprivileged one (uid 65534), and a root one
// running a copy of bash named containerd-shim-runc-v2 (what a root
// process in another mount namespace can show: its own file under a
// shim's name). gc runs neither and reports neither.
func TestGCRunsNoFakeShim(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	copied := filepath.Join(t.TempDir(), "containerd-shim-runc-v2")
	data, err := os.ReadFile(bash)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(copied, data, 0o755))
	for _, tc := range []struct {
		name, path, argv0 string
		cred              *syscall.Credential
	}{
		{"unprivileged", bash, "containerd-shim-redgc", &syscall.Credential{Uid: 65534, Gid: 65534}},
		{"root running its own file", copied, copied, nil},
	} {
		t.Run(tc.name, func(t *testing.T) { testGCRunsNoFakeShim(t, tc.path, tc.argv0, tc.cred) })
	}
}

func testGCRunsNoFakeShim(t *testing.T, path, argv0 string, cred *syscall.Credential) {
	e := testutil.ExecutorWith(t, func(cfg *sandbox.Config) { cfg.StateDir = t.TempDir() })
	ctx := e.Context(context.Background())
	_, err := e.Connect(ctx)
	require.NoError(t, err)

	dir, err := os.MkdirTemp("", "corral-redgc-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	spec, err := json.Marshal(&specs.Spec{Version: specs.Version, Mounts: []specs.Mount{
		{Destination: "/x", Type: "bind", Source: filepath.Join(e.Config().StateDir, "anything")},
	}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), spec, 0o644))
	marker := filepath.Join(t.TempDir(), "ran")
	require.NoError(t, os.Chmod(filepath.Dir(marker), 0o777))
	// Run with "delete" last (gc's shim delete action), it says so.
	script := fmt.Sprintf(`case "$*" in *delete) id > %s; exit 0;; esac; sleep 120 & wait`, marker)
	id := "corral-redgc-" + strconv.Itoa(os.Getpid())
	fake := &exec.Cmd{
		Path:        path,
		Args:        []string{argv0, "-c", script, "-namespace", e.Config().Namespace, "-id", id},
		Dir:         dir,
		SysProcAttr: &syscall.SysProcAttr{Credential: cred, Setpgid: true},
	}
	require.NoError(t, fake.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-fake.Process.Pid, syscall.SIGKILL)
		_ = fake.Wait()
		_ = e.Client().ContainerService().Delete(ctx, id)
	})
	time.Sleep(300 * time.Millisecond) // bash has set up its sleep

	rep, err := e.GC(context.Background(), false)
	t.Logf("gc: %+v, err %v", rep, err)
	out, rerr := os.ReadFile(marker)
	require.True(t, os.IsNotExist(rerr), "gc ran the fake shim's command: %s", out)
	require.NotContains(t, rep.Containers, id, "gc reported a fake shim as an orphan task")
	require.NoError(t, syscall.Kill(fake.Process.Pid, 0), "gc killed the fake shim")
	_, err = os.Stat(filepath.Join(dir, "config.json"))
	require.NoError(t, err, "gc removed the fake shim's working directory")
}

// TestGCListsAgainAfterOnlyALeaseWasOverdue (red team): the rounds'
// reason is a dead owner's NewContainer landing after the listing; its
// lease (made first) is what the first round finds overdue, often with
// no overdue container at all (a supervisor killed while making its
// first container). TestGCReapsWhatLandsAfterItsListing always has an
// overdue container in the first round, so it passes whether or not an
// overdue lease makes another round. Here the first round finds only a
// lease; the record lands at the end of it.
func TestGCListsAgainAfterOnlyALeaseWasOverdue(t *testing.T) {
	e := testutil.ExecutorWith(t, func(cfg *sandbox.Config) { cfg.StateDir = t.TempDir() })
	ctx := e.Context(context.Background())
	_, err := e.Connect(ctx)
	require.NoError(t, err)
	pid, labels := deadOwner(t, e)
	lease, late := "corral-gc-lease-"+strconv.Itoa(pid), "corral-gc-late-"+strconv.Itoa(pid)
	livec := "corral-gc-live-" + strconv.Itoa(os.Getpid())
	liveLabels := map[string]string{}
	for k, v := range labels {
		liveLabels[k] = v
	}
	liveLabels[sandbox.LabelPID], liveLabels[sandbox.LabelPIDStart] = strconv.Itoa(os.Getpid()), ""
	t.Cleanup(func() { _ = e.Client().LeasesService().Delete(ctx, leases.Lease{ID: livec}) })
	_, err = e.Client().LeasesService().Create(ctx, leases.WithID(lease), leases.WithLabels(labels))
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Client().LeasesService().Delete(ctx, leases.Lease{ID: lease}) })
	landed := false
	testhook.SetPoint(sandbox.HookSweepListed, func() error {
		if !landed {
			landed = true
			if err := makeRecord(t, ctx, e, late, labels); err != nil {
				return err
			}
			// A live owner's record and lease landing between the rounds.
			if err := makeRecord(t, ctx, e, livec, liveLabels); err != nil {
				return err
			}
			_, err := e.Client().LeasesService().Create(ctx, leases.WithID(livec), leases.WithLabels(liveLabels))
			return err
		}
		return nil
	})
	t.Cleanup(func() { testhook.SetPoint(sandbox.HookSweepListed, nil) })

	rep, err := e.GC(context.Background(), false)
	require.NoError(t, err)
	require.True(t, landed)
	require.Contains(t, rep.Leases, lease)
	_, err = e.Client().LoadContainer(ctx, late)
	require.True(t, errdefs.IsNotFound(err), "%s (landed after a round that found only a lease) left after gc: %v", late, err)
	require.Contains(t, rep.Containers, late)
	_, err = e.Client().LoadContainer(ctx, livec)
	require.NoError(t, err, "a live owner's record that landed between the rounds")
	ls, err := e.Client().LeasesService().List(ctx, fmt.Sprintf("id==%q", livec))
	require.NoError(t, err)
	require.Len(t, ls, 1, "a live owner's lease that landed between the rounds")
}
