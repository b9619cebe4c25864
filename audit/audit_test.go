package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoggerEvents(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	extra := filepath.Join(t.TempDir(), "copy.log")
	l, err := Open(state, extra)
	require.NoError(t, err)
	require.NoError(t, l.SessionCreated("s1", "/repo", "docs", allowlist.Scope{Page: "openwiki/a.md"}))
	require.NoError(t, l.Invocation("s1", []string{"grep", "-rn", "x"}, Allowed, "", 1, 1500*time.Microsecond, []string{"timeout"}))
	require.NoError(t, l.Invocation("s1", []string{"sh", "-c", "id"}, Refused, "sh is never allowed", -1, 0, nil))
	require.NoError(t, l.Refusal("s1", "invocation", &allowlist.Refusal{Kind: allowlist.KindCmd, Rule: "sh is never allowed"}))
	cs := &changeset.Set{Changes: []changeset.Change{{Path: "openwiki/a.md", Kind: changeset.Create, AfterSHA256: "ab"}}}
	require.NoError(t, l.ChangeSet("s1", cs))
	require.NoError(t, l.Approval("s1", "openwiki/a.md", "create", "0123456789abcdef", "medium", "", "ab"))
	require.NoError(t, l.Apply("s1", "/repo", false, []string{"openwiki/a.md"}))
	require.NoError(t, l.Close())
	require.NoError(t, l.Close())

	for _, p := range []string{filepath.Join(state, FileName), extra} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
		evs, err := Read(p)
		require.NoError(t, err)
		require.Len(t, evs, 7)
		var kinds []string
		for _, e := range evs {
			kinds = append(kinds, e.Event)
			assert.Equal(t, "s1", e.Session)
			assert.NotEmpty(t, e.User)
			assert.Equal(t, os.Getpid(), e.PID)
			assert.False(t, e.Time.IsZero())
		}
		assert.Equal(t, []string{EventSessionCreated, EventInvocation, EventInvocation, EventRefusal, EventChangeSet, EventApproval, EventApply}, kinds)
		assert.Equal(t, &Capability{Mode: "page", Page: "openwiki/a.md"}, evs[0].Capability)
		require.NotNil(t, evs[1].ExitCode)
		assert.Equal(t, 1, *evs[1].ExitCode)
		assert.InDelta(t, 1.5, *evs[1].DurationMS, 0.001)
		assert.Equal(t, []string{"timeout"}, evs[1].LimitsHit)
		assert.Nil(t, evs[2].ExitCode, "a refused invocation did not run")
		assert.Equal(t, Refused, evs[2].Decision)
		assert.Equal(t, "sh is never allowed", evs[3].Rule)
		d, _ := Digest(cs)
		assert.Equal(t, d, evs[4].ChangeSetSHA256)
		assert.Equal(t, 1, *evs[4].Changes)
		assert.Equal(t, "0123456789abcdef", evs[5].Token)
		assert.Equal(t, []string{"openwiki/a.md"}, evs[6].Files)
		assert.False(t, *evs[6].DryRun)
	}
	st, err := os.Stat(state)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
}

// Concurrent events never interleave within a line, from one Logger or
// from several (separate processes append the same way).
func TestLoggerConcurrent(t *testing.T) {
	state := t.TempDir()
	var loggers []*Logger
	for range 3 {
		l, err := Open(state, "")
		require.NoError(t, err)
		loggers = append(loggers, l)
	}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			argv := []string{"grep", strings.Repeat(fmt.Sprint(i), 5000)}
			assert.NoError(t, loggers[i%3].Invocation(fmt.Sprint(i), argv, Allowed, "", 0, time.Millisecond, nil))
		}()
	}
	wg.Wait()
	for _, l := range loggers {
		require.NoError(t, l.Close())
	}
	evs, err := Read(filepath.Join(state, FileName))
	require.NoError(t, err)
	assert.Len(t, evs, 30)
}

func TestNilLogger(t *testing.T) {
	var l *Logger
	assert.NoError(t, l.Apply("s", "/r", true, nil))
	assert.NoError(t, l.ChangeSet("s", nil))
	assert.NoError(t, l.Refusal("s", "x", errors.New("no")))
	assert.NoError(t, l.Close())
}

func TestOpenRefusesSymlinkedLog(t *testing.T) {
	state, target := t.TempDir(), filepath.Join(t.TempDir(), "elsewhere")
	require.NoError(t, os.Symlink(target, filepath.Join(state, FileName)))
	_, err := Open(state, "")
	require.Error(t, err)
	assert.NoFileExists(t, target)
}

func TestReadRejectsGarbage(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.log")
	require.NoError(t, os.WriteFile(p, []byte(`{"event":"apply","time":"2026-01-01T00:00:00Z","user":"u","uid":0,"pid":1}`+"\nnot json\n"), 0o600))
	evs, err := Read(p)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2")
	assert.Len(t, evs, 1)
}

func TestClosedLogger(t *testing.T) {
	l, err := Open(t.TempDir(), "")
	require.NoError(t, err)
	require.NoError(t, l.Close())
	assert.Error(t, l.Apply("s", "/r", true, nil))
}
