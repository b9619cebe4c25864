package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/corral-sandbox/corral/audit"
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

// TestAuditFailed (red team of the failed calls' record): a call canceled
// while its tool ran has its exit all the same (killed, awaited): the
// record keeps the exit code, duration and limits with the error; a call
// that ended before it asked for a container (the session failed closed,
// closed, not ready) is the session's state, recorded where it arose, so
// it writes no invocation (checkRepo's failure wrote a refusal already).
func TestAuditFailed(t *testing.T) {
	state := t.TempDir()
	l, err := audit.Open(state, "")
	require.NoError(t, err)
	s := &Session{ID: "s1", exec: &Executor{audit: l}}
	ctx := context.Background()
	canceled := fmt.Errorf("invocation c1: %w", context.Canceled)
	res := &Result{ExitCode: 137, Duration: 1500 * time.Millisecond, LimitsHit: []string{LimitTimeout}}
	require.Equal(t, canceled, s.auditFailed(ctx, []string{"ls"}, res, canceled))
	require.ErrorIs(t, s.auditFailed(ctx, []string{"ls"}, nil, canceled), context.Canceled)
	before := &beforeCallError{errClosed}
	require.ErrorIs(t, s.auditFailed(ctx, []string{"ls"}, nil, before), errClosed)

	recs, err := audit.Read(filepath.Join(state, audit.FileName))
	require.NoError(t, err)
	require.Len(t, recs, 2, "no record of the call that asked for no container")
	code, ms := 137, 1500.0
	require.Equal(t, &audit.Invocation{Argv: []string{"ls"}, Decision: audit.Allowed, ExitCode: &code, DurationMS: &ms,
		LimitsHit: []string{LimitTimeout}, Error: "invocation c1: context canceled"}, recs[0].Event)
	require.Equal(t, &audit.Invocation{Argv: []string{"ls"}, Decision: audit.Allowed, Error: "invocation c1: context canceled"}, recs[1].Event)
}
