package sandbox

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFindShimsSkipsUnprivilegedProcesses (red team): any local user can
// name a process containerd-shim-* with -namespace NS -id corral-*; a
// shim runs as root. findShims is what settleCreate waits on, what
// sweepCgroups spares and what sweepOrphanShims runs the "delete" action
// of (the process's own executable and flags, as root).
func TestFindShimsSkipsUnprivilegedProcesses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a process as another user")
	}
	ns := "redgc-" + strconv.Itoa(os.Getpid())
	start := func(id string, cred *syscall.Credential) {
		cmd := &exec.Cmd{Path: "/bin/sh", Args: []string{"containerd-shim-redgc", "-c", "sleep 60 & wait", "-namespace", ns, "-id", id},
			Dir: "/", SysProcAttr: &syscall.SysProcAttr{Credential: cred, Setpgid: true}}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	}
	start("corral-nobody", &syscall.Credential{Uid: 65534, Gid: 65534})
	start("corral-root", nil)
	var got map[string][]shimProc
	require.Eventually(t, func() bool {
		got = findShims(ns)
		return len(got["corral-root"]) == 1
	}, 5*time.Second, 20*time.Millisecond, "the root process is a shim candidate")
	require.NotContains(t, got, "corral-nobody", "an unprivileged process passes for a shim")
}
