package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestSendToStartedContainer: a request goes through the FIFO to a
// waiting reader, whole; with no reader and the init's exit reported, the
// send fails with errNotStarted (nothing ran) and the exit stays
// readable.
func TestSendToStartedContainer(t *testing.T) {
	ctl := filepath.Join(t.TempDir(), "ctl")
	require.NoError(t, unix.Mkfifo(ctl, 0o600))
	statusC := make(chan containerd.ExitStatus, 1)
	c := &container{id: "c", ctlFile: ctl, statusC: statusC, started: true}

	// Larger than a pipe's buffer: the reader takes it as it comes.
	want := make([]byte, 200<<10)
	for i := range want {
		want[i] = byte(i)
	}
	got := make(chan []byte, 1)
	go func() {
		f, err := os.Open(ctl) // blocks until the writer opens, like corral-init
		if err != nil {
			got <- nil
			return
		}
		data, _ := io.ReadAll(f)
		// Closed before the test goes on: a reader still open would
		// take the next send, which must find none.
		f.Close()
		got <- data
	}()
	require.NoError(t, c.send(context.Background(), want))
	require.Equal(t, want, <-got)

	// No reader: the init is dead.
	statusC <- *containerd.NewExitStatus(137, time.Now(), nil)
	err := c.send(context.Background(), []byte("{}"))
	require.ErrorIs(t, err, errNotStarted)
	st := <-c.statusC
	require.EqualValues(t, 137, st.ExitCode())
}

// TestSendHonoursCancel: a call canceled while its request waits for the
// init to open the FIFO (nobody opens it here) or while it is written (a
// reader that opened but does not read) returns at once with the
// context's error, not after sendWait; canceled before, it opens nothing.
func TestSendHonoursCancel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reader bool // a reader opens the FIFO and reads nothing
		cut    bool // the error says the request was cut
	}{
		{name: "never opened", reader: false},
		{name: "write blocked", reader: true, cut: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctl := filepath.Join(t.TempDir(), "ctl")
			require.NoError(t, unix.Mkfifo(ctl, 0o600))
			c := &container{id: "c", ctlFile: ctl, statusC: make(chan containerd.ExitStatus, 1), started: true}
			if tc.reader {
				fd, err := unix.Open(ctl, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
				require.NoError(t, err)
				t.Cleanup(func() { unix.Close(fd) })
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			start := time.Now()
			err := c.send(ctx, make([]byte, 1<<20)) // more than a pipe holds
			took := time.Since(start)
			t.Logf("send returned %v after the cancel", took-100*time.Millisecond)
			require.ErrorIs(t, err, context.Canceled)
			require.NotErrorIs(t, err, errNotStarted, "a canceled call is not run again")
			require.Equal(t, tc.cut, errors.Is(err, errRequestCut))
			require.Less(t, took, sendWait/2, "not sendWait (%s)", sendWait)
		})
	}
	t.Run("canceled before", func(t *testing.T) {
		ctl := filepath.Join(t.TempDir(), "ctl")
		require.NoError(t, unix.Mkfifo(ctl, 0o600))
		fd, err := unix.Open(ctl, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		defer unix.Close(fd)
		c := &container{id: "c", ctlFile: ctl, statusC: make(chan containerd.ExitStatus, 1), started: true}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, c.send(ctx, []byte("{}")), context.Canceled)
		n, err := unix.Read(fd, make([]byte, 16))
		require.Zero(t, n, "nothing written (%v)", err)
	})
}
