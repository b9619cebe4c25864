package sandbox

import (
	"io"
	"os"
	"sync"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/stretchr/testify/require"
)

// ioTask is a task whose only part in use is its IO.
type ioTask struct {
	containerd.Task
	io cio.IO
}

func (t ioTask) IO() cio.IO { return t.io }

// TestOutputCopiedWaitsOnASlowCaller: the shim's side of a real FIFO set
// writes 200 KiB and closes at once, and the caller's writer is a pipe
// nobody reads for longer than ioWait (`corral run ... | less`): the copy
// waits on the caller, not on the shim, so outputCopied waits too and
// every byte arrives. Before, it closed the FIFOs after ioWait and failed
// with ErrShimSilent, 96 KiB of 200 kept.
func TestOutputCopiedWaitsOnASlowCaller(t *testing.T) {
	over := make(chan struct{})
	once := &sync.Once{}
	out := &cappedWriter{limit: 1 << 20, over: over, once: once}
	errw := &cappedWriter{limit: 1 << 20, over: over, once: once}
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	out.setTarget(pw)
	fifos, err := cio.NewCreator(cio.WithStreams(nil, out, errw), cio.WithFIFODir(t.TempDir()))("c1")
	require.NoError(t, err)
	cfg := fifos.Config()
	const size = 200 << 10
	go func() {
		for _, p := range []string{cfg.Stdout, cfg.Stderr} {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				continue
			}
			if p == cfg.Stdout {
				_, _ = f.Write(make([]byte, size))
			}
			f.Close()
		}
	}()
	read := make(chan int, 1)
	go func() {
		time.Sleep(ioWait + 2*time.Second) // the reader comes back late
		n, _ := io.Copy(io.Discard, pr)
		read <- int(n)
	}()
	c := &container{id: "c1", task: ioTask{io: fifos}, out: out, errw: errw}
	require.NoError(t, c.outputCopied(), "a slow caller is not a silent shim")
	out.setTarget(nil)
	pw.Close()
	got, truncated := out.bytes()
	require.False(t, truncated)
	require.Len(t, got, size)
	require.Equal(t, size, <-read, "the caller got every byte")
}

// TestTimeoutVerdict: a process still there at the kill is a timeout;
// none there, seen before corral-init's own deadline (timeout +
// InitGrace), is a late exit status and no timeout; none there, seen
// after it (a supervisor stalled between its timer and its look), may be
// corral-init's kill, so the exit code decides (neither).
func TestTimeoutVerdict(t *testing.T) {
	timeout := 2 * time.Second
	for _, tc := range []struct {
		ran                  bool
		walked               time.Duration
		timedOut, endedEarly bool
	}{
		{true, timeout, true, false},
		{true, timeout + InitGrace + time.Second, true, false},
		{false, timeout + 10*time.Millisecond, false, true},
		{false, timeout + InitGrace - time.Millisecond, false, true},
		{false, timeout + InitGrace, false, false},
		{false, timeout + InitGrace + time.Second, false, false},
	} {
		to, early := timeoutVerdict(tc.ran, tc.walked, timeout)
		require.Equal(t, tc.timedOut, to, "%+v", tc)
		require.Equal(t, tc.endedEarly, early, "%+v", tc)
	}
}
