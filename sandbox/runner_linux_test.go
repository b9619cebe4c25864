package sandbox

import (
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
	require.NoError(t, c.send(want))
	require.Equal(t, want, <-got)

	// No reader: the init is dead.
	statusC <- *containerd.NewExitStatus(137, time.Now(), nil)
	err := c.send([]byte("{}"))
	require.ErrorIs(t, err, errNotStarted)
	st := <-c.statusC
	require.EqualValues(t, 137, st.ExitCode())
}
