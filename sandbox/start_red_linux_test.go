package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/stretchr/testify/require"
)

// hangTask is a task whose Start waits for its context: a silent shim.
type hangTask struct{ containerd.Task }

func (hangTask) Start(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
func (hangTask) IO() cio.IO                      { return nil }
func (hangTask) Kill(context.Context, syscall.Signal, ...containerd.KillOpts) error {
	return nil
}

// TestStartTaskWithdrawsTheRequest (red team of the bounded start): past
// its bound startTask killed the processes of the container's cgroups
// and said the container was killed, but it can signal only a process
// whose /proc/PID/cgroup names the container's cgroup, which a daemon in
// a cgroup namespace of its own (a daemon Pod on cgroup v2) never sees;
// the start the shim carried out later then ran the tool after the call
// had failed. The request is now withdrawn first (the control file
// removed: a corral-init started later finds none and runs nothing),
// whatever the kill reaches. Here the cgroup lists a process the kill
// cannot match, as such a daemon sees it.
func TestStartTaskWithdrawsTheRequest(t *testing.T) {
	root := t.TempDir()
	d := filepath.Join(root, "pids", "ns", "c1")
	require.NoError(t, os.MkdirAll(d, 0o755))
	other := exec.Command("sleep", "30")
	require.NoError(t, other.Start())
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	require.NoError(t, os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(other.Process.Pid)+"\n"), 0o644))
	ctl := filepath.Join(t.TempDir(), "request")
	require.NoError(t, os.WriteFile(ctl, []byte(`{"argv":["ls"]}`), 0o644))

	e := &Executor{cfg: Config{Namespace: "ns"}, cgroups: cgroups{root: root}}
	r := &runner{e: e}
	// The call ends (its context) while the start hangs.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	statusC := make(chan containerd.ExitStatus, 1)
	statusC <- *containerd.NewExitStatus(137, time.Now(), nil)
	c := &container{id: "c1", task: hangTask{}, ctlFile: ctl, statusC: statusC}
	err := r.startTask(ctx, context.Background(), c)
	require.EqualError(t, err, "invocation c1: context deadline exceeded")
	require.NoFileExists(t, ctl, "the request is still there for a start the shim carries out later")
	require.True(t, c.exited, "the exit the runtime's kill brought is the container's")
}
