package kubepod

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The test process is in no Pod: Identify says so, through its own pidfd.
func TestIdentifySelfNoPod(t *testing.T) {
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	require.NoError(t, err)
	defer unix.Close(pidfd)
	pid, err := PidOf(pidfd)
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), pid)
	_, err = Identify("/proc", pidfd)
	require.ErrorIs(t, err, ErrNoPod)
}

// A caller that exited is never identified, even if its pid were reused.
func TestIdentifyGone(t *testing.T) {
	cmd := exec.Command("true")
	require.NoError(t, cmd.Start())
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	require.NoError(t, err)
	defer unix.Close(pidfd)
	require.NoError(t, cmd.Wait())
	_, err = Identify("/proc", pidfd)
	require.ErrorIs(t, err, ErrGone)
}

// BenchmarkIdentify is what Pod mode adds to each connection.
func BenchmarkIdentify(b *testing.B) {
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	require.NoError(b, err)
	defer unix.Close(pidfd)
	for b.Loop() {
		if _, err := Identify("/proc", pidfd); !errors.Is(err, ErrNoPod) {
			b.Fatal(err)
		}
	}
}
