package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/initctl"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestMain runs corral-init itself when the tests start this binary as
// it (not as PID 1: the deadline then only exits, see holdDeadline).
func TestMain(m *testing.M) {
	if os.Getenv("CORRAL_INIT_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// runInit runs corral-init on a control file holding req and returns its
// exit code, output and wall time.
func runInit(t *testing.T, req initctl.Request) (int, string, time.Duration) {
	t.Helper()
	data, err := initctl.Encode(req)
	require.NoError(t, err)
	ctl := filepath.Join(t.TempDir(), "ctl")
	require.NoError(t, os.WriteFile(ctl, data, 0o644))
	cmd := exec.Command(os.Args[0], ctl)
	cmd.Env = []string{"CORRAL_INIT_TEST_MAIN=1", "PATH=/usr/bin:/bin"}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, string(out), time.Since(start)
}

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		argv []string
		code int
		out  string
	}{
		{[]string{"true"}, 0, ""},
		{[]string{"sh", "-c", "echo hi; exit 3"}, 3, "hi\n"},
		// A signal N is reported as 128+N, as a shell does.
		{[]string{"sh", "-c", "kill -TERM $$"}, 128 + 15, ""},
		{[]string{"sh", "-c", "kill -KILL $$"}, 128 + 9, ""},
		// Orphans are reaped; the tool's code is what counts.
		{[]string{"sh", "-c", "sleep 0.1 & exit 0"}, 0, ""},
		{[]string{"no-such-tool"}, 127, "corral-init: no-such-tool: command not found\n"},
	} {
		code, out, _ := runInit(t, initctl.Request{Mode: initctl.Exec, Argv: c.argv, DeadlineMS: 10_000})
		require.Equal(t, c.code, code, "%q: %s", c.argv, out)
		require.Equal(t, c.out, out, "%q", c.argv)
	}
}

func TestDeadline(t *testing.T) {
	code, out, took := runInit(t, initctl.Request{Mode: initctl.Exec, Argv: []string{"sleep", "30"}, DeadlineMS: 300})
	require.Equal(t, exitDeadline, code, out)
	require.Contains(t, out, "deadline of 300ms passed")
	require.Less(t, took, 5*time.Second)
}

func TestBadControlFile(t *testing.T) {
	ctl := filepath.Join(t.TempDir(), "ctl")
	require.NoError(t, os.WriteFile(ctl, []byte(`{"version":1,"mode":"exec","argv":["ls"]}`), 0o644))
	cmd := exec.Command(os.Args[0], ctl)
	cmd.Env = []string{"CORRAL_INIT_TEST_MAIN=1"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee))
	require.Equal(t, 125, ee.ExitCode())
	require.True(t, strings.HasPrefix(string(out), "corral-init: control file: version 1"), string(out))
}

// TestDeadlineAsPID1 runs corral-init as PID 1 of a new pid namespace
// (unshare(1), root): at the deadline every process is killed, the
// tool's orphans included, so nothing holds the output open.
func TestDeadlineAsPID1(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and unshare(1)")
	}
	data, err := initctl.Encode(initctl.Request{Mode: initctl.Exec, Argv: []string{"sh", "-c", "sleep 30 & sleep 30 & kill -TERM 1; wait"}, DeadlineMS: 500})
	require.NoError(t, err)
	ctl := filepath.Join(t.TempDir(), "ctl")
	require.NoError(t, os.WriteFile(ctl, data, 0o644))
	cmd := exec.Command(unshare, "--pid", "--fork", "--kill-child", os.Args[0], ctl)
	cmd.Env = []string{"CORRAL_INIT_TEST_MAIN=1", "PATH=/usr/bin:/bin"}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v: %s", err, out)
	// SIGTERM from inside did not end PID 1; the deadline did.
	require.Equal(t, exitDeadline, ee.ExitCode(), string(out))
	require.Contains(t, string(out), "deadline of 500ms passed")
	require.Less(t, time.Since(start), 5*time.Second)
}

// TestFIFORequest: started ahead, corral-init waits on its control FIFO
// without running anything, then runs the request written to it; its
// deadline counts from the request, not from its start.
func TestFIFORequest(t *testing.T) {
	ctl := filepath.Join(t.TempDir(), "ctl")
	require.NoError(t, unix.Mkfifo(ctl, 0o600))
	cmd := exec.Command(os.Args[0], ctl)
	cmd.Env = []string{"CORRAL_INIT_TEST_MAIN=1", "PATH=/usr/bin:/bin"}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Longer than the request's deadline: the wait does not count.
	select {
	case err := <-done:
		t.Fatalf("corral-init ended before its request: %v: %s", err, out.String())
	case <-time.After(3500 * time.Millisecond):
	}
	// A deadline with room for a loaded machine's sh (500 ms was passed
	// at load 20 on two cores), still shorter than the wait above.
	data, err := initctl.Encode(initctl.Request{Mode: initctl.Exec, Argv: []string{"sh", "-c", "sleep 0.1; echo ran"}, DeadlineMS: 3000})
	require.NoError(t, err)
	// What the supervisor does (sandbox's container.send): a writer's
	// open that fails with ENXIO unless a reader waits.
	var fd int
	require.Eventually(t, func() bool {
		fd, err = unix.Open(ctl, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		return err == nil
	}, 5*time.Second, 5*time.Millisecond, "corral-init never opened its FIFO")
	_, err = unix.Write(fd, data)
	require.NoError(t, err)
	require.NoError(t, unix.Close(fd))
	require.NoError(t, <-done, out.String())
	require.Equal(t, "ran\n", out.String())

	// No reader once corral-init is gone: the writer's open fails with
	// ENXIO, which the supervisor takes for "nothing ran".
	_, err = unix.Open(ctl, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	require.ErrorIs(t, err, unix.ENXIO)
}

// TestFIFOShortRequest: a supervisor that dies after opening the FIFO
// (nothing written, or half a request) leaves corral-init an EOF: it
// exits 125 and runs nothing.
func TestFIFOShortRequest(t *testing.T) {
	data, err := initctl.Encode(initctl.Request{Mode: initctl.Exec, Argv: []string{"sh", "-c", "echo ran"}, DeadlineMS: 3000})
	require.NoError(t, err)
	for name, sent := range map[string][]byte{"empty": nil, "truncated": data[:len(data)/2]} {
		t.Run(name, func(t *testing.T) {
			ctl := filepath.Join(t.TempDir(), "ctl")
			require.NoError(t, unix.Mkfifo(ctl, 0o600))
			cmd := exec.Command(os.Args[0], ctl)
			cmd.Env = []string{"CORRAL_INIT_TEST_MAIN=1", "PATH=/usr/bin:/bin"}
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Start())
			var fd int
			require.Eventually(t, func() bool {
				fd, err = unix.Open(ctl, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
				return err == nil
			}, 5*time.Second, 5*time.Millisecond, "corral-init never opened its FIFO")
			if len(sent) > 0 {
				_, err = unix.Write(fd, sent)
				require.NoError(t, err)
			}
			require.NoError(t, unix.Close(fd))
			err := cmd.Wait()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "%v: %s", err, out.String())
			require.Equal(t, 125, ee.ExitCode(), out.String())
			require.NotContains(t, out.String(), "ran")
			require.True(t, strings.HasPrefix(out.String(), "corral-init: "), out.String())
		})
	}
}
