package sandbox

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSpecMasksMountTable: PID 1's mount table and the host's boot
// parameters are masked, next to the default spec's masks.
func TestSpecMasksMountTable(t *testing.T) {
	s := generate(t, testPlan(t))
	for _, p := range []string{
		"/proc/1/mountinfo", "/proc/1/mounts", "/proc/1/mountstats",
		"/proc/1/task/1/mountinfo", "/proc/1/task/1/mounts", "/proc/1/task/1/mountstats",
		"/proc/cmdline",
		"/proc/kcore", "/proc/keys", // the default spec's, kept
	} {
		assert.Contains(t, s.Linux.MaskedPaths, p)
	}
	seen := map[string]bool{}
	for _, p := range s.Linux.MaskedPaths {
		assert.False(t, seen[p], "%s masked twice", p)
		seen[p] = true
	}
}
