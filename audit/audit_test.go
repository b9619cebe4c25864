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
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoggerEvents(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	extra := filepath.Join(t.TempDir(), "copy.log")
	l, err := Open(state, extra)
	require.NoError(t, err)
	digest, err := DigestJSON(map[string]any{"changes": []string{"openwiki/a.md"}})
	require.NoError(t, err)
	events := []Event{
		&SessionCreated{Repo: "/repo", Profile: "docs", Capability: Capability{Mode: "page", Page: "openwiki/a.md"}},
		Ran([]string{"grep", "-rn", "x"}, 1, 1500*time.Microsecond, []string{"timeout"}),
		&Invocation{Argv: []string{"sh", "-c", "id"}, Decision: Refused, Rule: "sh is never allowed"},
		&Refusal{Stage: "invocation", Rule: "sh is never allowed", Error: "refused (CMD): sh is never allowed"},
		&ChangeSet{SHA256: digest, Changes: 1},
		&Approval{Path: "openwiki/a.md", Kind: "create", Token: "0123456789abcdef", Risk: "medium", AfterSHA256: "ab"},
		&ApplyStarted{Repo: "/repo", TxID: "t1", Files: []string{"openwiki/a.md"}},
		&Apply{Repo: "/repo", TxID: "t1", Files: []string{"openwiki/a.md"}},
		&ApplyRecovered{Repo: "/repo", TxID: "t0", Outcome: "rolled-back"},
	}
	for _, ev := range events {
		require.NoError(t, l.Log("s1", ev))
	}
	require.NoError(t, l.Close())
	require.NoError(t, l.Close())

	for _, p := range []string{filepath.Join(state, FileName), extra} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
		recs, err := Read(p)
		require.NoError(t, err)
		require.Len(t, recs, len(events))
		for i, r := range recs {
			assert.Equal(t, events[i].EventType(), r.Type)
			assert.Equal(t, events[i], r.Event, "the typed event reads back as written")
			assert.Equal(t, "s1", r.Session)
			assert.NotEmpty(t, r.Actor.User)
			assert.Equal(t, os.Getpid(), r.Actor.PID)
			assert.Equal(t, Peer{UID: os.Getuid(), GID: os.Getgid(), PID: os.Getpid()}, r.Peer, "the CLI's peer is itself")
			assert.False(t, r.Time.IsZero())
		}
		inv := recs[1].Event.(*Invocation)
		assert.Equal(t, 1, *inv.ExitCode)
		assert.InDelta(t, 1.5, *inv.DurationMS, 0.001)
		assert.Nil(t, recs[2].Event.(*Invocation).ExitCode, "a refused invocation did not run")
	}
	st, err := os.Stat(state)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
}

// A daemon records its client as the peer; the files are shared.
func TestLoggerWithPeer(t *testing.T) {
	state := t.TempDir()
	l, err := Open(state, "")
	require.NoError(t, err)
	peer := Peer{UID: 1234, GID: 5678, PID: 42}
	require.NoError(t, l.WithPeer(peer).Log("s", &Refusal{Stage: "read", Error: "no"}))
	require.NoError(t, l.Log("s", &Refusal{Stage: "read", Error: "no"}))
	require.NoError(t, l.Close())
	recs, err := Read(filepath.Join(state, FileName))
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, peer, recs[0].Peer)
	assert.Equal(t, os.Getpid(), recs[1].Peer.PID)
	assert.Nil(t, (*Logger)(nil).WithPeer(peer))
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
			assert.NoError(t, loggers[i%3].Log(fmt.Sprint(i), Ran(argv, 0, time.Millisecond, nil)))
		}()
	}
	wg.Wait()
	for _, l := range loggers {
		require.NoError(t, l.Close())
	}
	recs, err := Read(filepath.Join(state, FileName))
	require.NoError(t, err)
	assert.Len(t, recs, 30)
}

func TestNilLogger(t *testing.T) {
	var l *Logger
	assert.NoError(t, l.Log("s", &Apply{Repo: "/r", DryRun: true}))
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
	good := `{"time":"2026-01-01T00:00:00Z","type":"apply","actor":{"user":"u","uid":0,"pid":1},"peer":{"uid":0,"gid":0,"pid":1},"event":{"repo":"/r","dry_run":true,"files":null}}`
	for name, bad := range map[string]string{
		"not json":      "not json",
		"unknown type":  strings.Replace(good, `"type":"apply"`, `"type":"mystery"`, 1),
		"unknown field": strings.Replace(good, `"dry_run":true`, `"dry_run":true,"extra":1`, 1),
		"wrong type":    strings.Replace(good, `"type":"apply"`, `"type":"approval"`, 1),
	} {
		p := filepath.Join(t.TempDir(), "a.log")
		require.NoError(t, os.WriteFile(p, []byte(good+"\n"+bad+"\n"), 0o600))
		recs, err := Read(p)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "line 2", name)
		assert.Len(t, recs, 1, name)
	}
}

func TestClosedLogger(t *testing.T) {
	l, err := Open(t.TempDir(), "")
	require.NoError(t, err)
	require.NoError(t, l.Close())
	assert.Error(t, l.Log("s", &Apply{Repo: "/r", DryRun: true}))
}

func TestFailed(t *testing.T) {
	inv := Failed([]string{"ls"}, errors.New("invocation x: context canceled\nsecond  line\r\n"))
	require.Equal(t, &Invocation{Argv: []string{"ls"}, Decision: Allowed, Error: "invocation x: context canceled second line"}, inv)
	long := Failed([]string{"ls"}, errors.New(strings.Repeat("é", maxFailedError)))
	require.True(t, utf8.ValidString(long.Error), "cut on a rune boundary")
	require.LessOrEqual(t, len(long.Error), maxFailedError)
	require.True(t, strings.HasSuffix(long.Error, "…"))
	require.Equal(t, "(no message)", Failed(nil, errors.New("\n")).Error)
}
