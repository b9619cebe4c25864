package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
)

// TestCrashSupervisorChild is the supervisor that TestGCAfterSupervisorKill
// kills with SIGKILL mid-invocation. It only runs as that child.
func TestCrashSupervisorChild(t *testing.T) {
	repo := os.Getenv("CORRAL_IT_CRASH_REPO")
	if repo == "" {
		t.Skip("runs only as the child of TestGCAfterSupervisorKill")
	}
	e := testutil.Executor(t)
	s, err := e.NewSession(context.Background(), sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t)})
	require.NoError(t, err)
	fmt.Println("session", s.ID)
	_, _ = testutil.ExecWithoutPolicy(context.Background(), s, []string{"probe", "sleep", "120s"}, os.Stdout, os.Stderr)
	t.Fatal("the parent should have killed this process")
}

func TestGCAfterSupervisorKill(t *testing.T) {
	e := testutil.Executor(t)
	repo := hiddenRepo(t)
	child := exec.Command(os.Args[0], "-test.run", "^TestCrashSupervisorChild$", "-test.count=1")
	child.Env = append(os.Environ(), "CORRAL_IT_CRASH_REPO="+repo, "CORRAL_IT_STATE_DIR="+testutil.StateDir(t))
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	require.NoError(t, child.Start())
	defer child.Process.Kill()

	ctx := e.Context(context.Background())
	filter := fmt.Sprintf("labels.%q==%d", sandbox.LabelPID, child.Process.Pid)
	deadline := time.Now().Add(60 * time.Second)
	// The child's session keeps containers created ahead: the call's is
	// the one running.
	running, childSession := "", ""
	for running == "" {
		cs, err := e.Client().Containers(ctx, filter)
		require.NoError(t, err)
		for _, c := range cs {
			if task, err := c.Task(ctx, nil); err == nil {
				if st, err := task.Status(ctx); err == nil && st.Status == "running" {
					running = c.ID()
					labels, err := c.Labels(ctx)
					require.NoError(t, err)
					childSession = labels[sandbox.LabelSession]
				}
			}
		}
		require.True(t, time.Now().Before(deadline), "the child never started its container")
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	_ = child.Wait()

	sessions := filepath.Join(testutil.StateDir(t), "sessions")
	left, err := mountinfo.GetMounts(mountinfo.PrefixFilter(sessions))
	require.NoError(t, err)
	require.NotEmpty(t, left, "the killed supervisor should have left its host mounts")

	// The crash may also take the FIFOs with it: gc must reap without them.
	fifos, err := filepath.Glob(filepath.Join(testutil.StateDir(t), "fifo", "*", running+"-*"))
	require.NoError(t, err)
	require.NotEmpty(t, fifos, "the child's FIFOs")
	for _, f := range fifos {
		require.NoError(t, os.RemoveAll(filepath.Dir(f)))
	}

	rep, err := e.GC(context.Background(), false)
	require.NoError(t, err)
	require.Contains(t, rep.Containers, running)
	require.NotEmpty(t, rep.Mounts)

	cs, err := e.Client().Containers(ctx, filter)
	require.NoError(t, err)
	require.Empty(t, cs, "containers left after gc")
	ls, err := e.Client().LeasesService().List(ctx, filter)
	require.NoError(t, err)
	require.Empty(t, ls, "leases left after gc")
	for _, m := range left {
		mounted, err := mountinfo.Mounted(m.Mountpoint)
		require.True(t, err != nil || !mounted, "mount %s left after gc", m.Mountpoint)
	}
	_, err = os.Lstat(filepath.Join(sessions, childSession))
	require.True(t, os.IsNotExist(err), "the child's session directory is left after gc")
}
