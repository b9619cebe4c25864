package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/initctl"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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

// TestRemoveRequestDir: the request directory of a reaped container goes
// (its control FIFO with it) when its spec's bind at initctl.ReqDir names
// a session's req/<id> under the state directory, and nothing else is
// touched: another container's, or a path outside the state directory.
func TestRemoveRequestDir(t *testing.T) {
	state := t.TempDir()
	e := &Executor{cfg: Config{StateDir: state}}
	mk := func(dir string) string {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, unix.Mkfifo(filepath.Join(dir, "request"), 0o644))
		return dir
	}
	spec := func(src string) *specs.Spec {
		return &specs.Spec{Mounts: []specs.Mount{
			{Destination: initctl.CtlDir, Type: "bind", Source: filepath.Join(state, "sessions", "s", "layout", "ctl")},
			{Destination: initctl.ReqDir, Type: "bind", Source: src},
		}}
	}
	own := mk(filepath.Join(state, "sessions", "s", "layout", "req", "c1"))
	other := mk(filepath.Join(state, "sessions", "s", "layout", "req", "c2"))
	outside := mk(filepath.Join(t.TempDir(), "req", "c3"))

	e.removeRequestDir(spec(own), "c1")
	_, err := os.Lstat(own)
	require.ErrorIs(t, err, fs.ErrNotExist)
	e.removeRequestDir(spec(other), "c1") // not c1's
	require.DirExists(t, other)
	e.removeRequestDir(spec(outside), "c3") // not under the state directory
	require.DirExists(t, outside)
}
