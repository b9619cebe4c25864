package main

import (
	"errors"
	"os"
	"testing"

	"github.com/corral-sandbox/corral/internal/initctl"
	"github.com/corral-sandbox/corral/internal/landlock"
	"github.com/stretchr/testify/require"
)

// TestToolReadsAreConfined runs tools through corral-init's stage (on the
// host, not as PID 1): the mount tables of /proc, which name host paths,
// are refused with EACCES by Landlock however they are reached, and so is
// another process's /proc; the tool's own status, map and environment
// and the rest of / still read, and its children inherit the domain.
// Landlock binds root as well, so the test means the same run as root.
func TestToolReadsAreConfined(t *testing.T) {
	if _, err := landlock.ABI(); errors.Is(err, landlock.ErrUnavailable) {
		if os.Getenv("CI") != "" {
			t.Fatalf("Landlock: %v", err)
		}
		t.Skipf("Landlock: %v", err)
	}
	for _, p := range []string{
		"/proc/self/mountinfo", "/proc/self/mounts", "/proc/self/mountstats",
		"/proc/thread-self/mountinfo", "/proc/mounts", "/proc/1/environ", "/proc/cmdline",
		"/proc/self/cgroup", "/sys/kernel/mm/transparent_hugepage/enabled",
	} {
		code, out, _ := runInit(t, initctl.Request{Mode: initctl.Exec, Argv: []string{"cat", p}, DeadlineMS: 10_000})
		require.Equal(t, 1, code, "%s: %s", p, out)
		require.Equal(t, "cat: "+p+": Permission denied\n", out, p)
	}
	code, out, _ := runInit(t, initctl.Request{Mode: initctl.Exec, Argv: []string{"ls", "/proc"}, DeadlineMS: 10_000})
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "Permission denied")

	code, out, _ = runInit(t, initctl.Request{Mode: initctl.Exec, Argv: []string{"cat", "/proc/self/status", "/proc/self/maps", "/proc/self/environ", "/etc/passwd"}, DeadlineMS: 10_000})
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "NoNewPrivs:\t1\n")
	require.Contains(t, out, "/usr/bin/cat\n")
	require.Contains(t, out, "PATH=/usr/bin:/bin\x00")
	require.Contains(t, out, "root:x:0:0:")

	// A child of the tool inherits the domain; its own /proc files are
	// not the tool's, so they are refused too.
	code, out, _ = runInit(t, initctl.Request{Mode: initctl.Exec, Argv: []string{"sh", "-c", "cat /proc/self/mountinfo; cat /proc/self/status"}, DeadlineMS: 10_000})
	require.Equal(t, 1, code, out)
	require.Equal(t, "cat: /proc/self/mountinfo: Permission denied\ncat: /proc/self/status: Permission denied\n", out)
}
