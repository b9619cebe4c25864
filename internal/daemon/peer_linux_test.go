package daemon

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-sandbox/corral/internal/kubepod"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// peerPidfd names the very process that connected (SO_PEERPIDFD), and
// podOf tells a process in no Pod from the rest.
func TestPeerPidfd(t *testing.T) {
	dir, err := os.MkdirTemp("", "corral-peer-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "s"))
	require.NoError(t, err)
	defer l.Close()
	c, err := net.Dial("unix", filepath.Join(dir, "s"))
	require.NoError(t, err)
	defer c.Close()
	sc, err := l.Accept()
	require.NoError(t, err)
	defer sc.Close()
	p, err := peerCred(sc.(*net.UnixConn))
	require.NoError(t, err)
	pidfd, err := peerPidfd(sc.(*net.UnixConn), p.PID)
	require.NoError(t, err)
	defer unix.Close(pidfd)
	pid, err := kubepod.PidOf(pidfd)
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), pid)
	pod, err := podOf(sc, p)
	require.NoError(t, err)
	require.Empty(t, pod, "the test process is in no Pod")
}
