package sandbox

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOverdue: a sweep reaps what a dead owner left, and what a live
// owner left past its deadline; never what a live owner still has time
// for. A reused pid (another start time) is a dead owner.
func TestOverdue(t *testing.T) {
	now := time.Now()
	me := strconv.Itoa(os.Getpid())
	start := processStart(os.Getpid())
	require.NotEmpty(t, start)
	labels := func(pid, start string, deadline time.Time) map[string]string {
		return map[string]string{LabelPID: pid, LabelPIDStart: start, LabelDeadline: strconv.FormatInt(deadline.Unix(), 10)}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		force  bool
		want   bool
	}{
		{"live owner, in time", labels(me, start, now.Add(time.Minute)), false, false},
		{"live owner, deadline passed", labels(me, start, now.Add(-2*time.Second)), false, true},
		{"dead owner, in time", labels("999999999", "", now.Add(time.Minute)), false, true},
		{"pid reused", labels(me, start+"1", now.Add(time.Minute)), false, true},
		{"no pid", map[string]string{}, false, true},
		{"force", labels(me, start, now.Add(time.Minute)), true, true},
	} {
		require.Equal(t, c.want, overdue(c.labels, c.force, now), c.name)
	}
}
