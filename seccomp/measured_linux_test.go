//go:build linux && cgo

package seccomp

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// deniedAlthoughMeasured are calls a tool makes that the built-in profile
// denies on purpose, with why that is safe.
var deniedAlthoughMeasured = map[string]string{
	"symlinkat": "cp -r copies a link as a link; it now fails there with EPERM, and the collector rejects links anyway",
	"socket":    "glibc's nscd probe (ls -l, stat, find -user); it falls back to /etc/passwd",
	"connect":   "glibc's nscd probe, after socket",
	"clone3":    "answered ENOSYS: glibc and Go fall back to clone(2), which is allowed",
}

// allowedUnmeasured are calls the built-in profile allows that no measured
// run made (testdata/measure.sh), with why each stays. default.yaml says
// the same next to each name.
var allowedUnmeasured = map[string]string{
	// The same operation under another name.
	"faccessat": "access on arm64", "open": "openat under musl on x86_64",
	"stat": "newfstatat under musl", "lstat": "newfstatat under musl",
	"readv": "musl's stdio", "writev": "musl's stdio",
	"rename": "renameat2 under musl", "renameat": "renameat2 on arm64 libcs",
	"rmdir": "unlinkat under musl", "ppoll": "poll on arm64",
	// Runtimes.
	"mremap":           "glibc's realloc of a large block",
	"map_shadow_stack": "newer glibc's thread shadow stacks",
	"clock_gettime":    "vDSO fallback", "clock_getres": "vDSO fallback", "gettimeofday": "vDSO fallback",
	"restart_syscall": "the kernel restarts an interrupted sleep",
	"kill":            "corral-init kills what is left at the deadline",
	// corral-init as PID 1 starting the tool as its child (Go's os/exec).
	"waitid": "reaping the tool with a pidfd", "pidfd_open": "os/exec", "pidfd_send_signal": "os/exec",
}

// TestDefaultIsMeasured keeps default.yaml and testdata/measured.txt (the
// output of testdata/measure.sh) together: every call a tool made is
// allowed or denied on purpose, and every allowed call was made by a tool
// or has its reason above.
func TestDefaultIsMeasured(t *testing.T) {
	f, err := os.Open("testdata/measured.txt")
	require.NoError(t, err)
	defer f.Close()
	measured := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, tools, ok := strings.Cut(sc.Text(), " ")
		require.True(t, ok, "malformed line %q", sc.Text())
		measured[name] = tools
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, measured)

	allowed := Default().Names()
	for name, tools := range measured {
		if _, ok := deniedAlthoughMeasured[name]; ok {
			require.NotContains(t, allowed, name, "%s is listed as denied on purpose", name)
			continue
		}
		require.Contains(t, allowed, name, "%s (made by %s) is denied", name, tools)
	}
	for _, name := range allowed {
		if _, ok := measured[name]; ok {
			continue
		}
		if isCompat32(name) {
			continue
		}
		require.Contains(t, allowedUnmeasured, name, "%s is allowed but no tool was measured making it", name)
	}
	for name := range allowedUnmeasured {
		require.NotContains(t, measured, name, "%s was measured: drop its reason", name)
	}
}

// isCompat32 reports the 32-bit ARM names of allowed calls (their own rule
// in default.yaml); on a 64-bit host no run makes them.
func isCompat32(name string) bool {
	return slices.Contains([]string{
		"_llseek", "fcntl64", "fstat64", "fstatat64", "lstat64", "stat64", "statfs64", "fstatfs64", "mmap2",
		"getuid32", "geteuid32", "getgid32", "getegid32", "clock_gettime64", "clock_getres_time64",
		"clock_nanosleep_time64", "futex_time64", "ppoll_time64", "utimensat_time64", "sigreturn",
	}, name)
}
