package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// TestDaemonNodeCaps: a real daemon with --max-sessions 2 and
// --max-memory 100MiB. A profile whose memory limit (512MiB) is above the
// cap is refused at creation; a third session is refused with the
// cap's message; two calls of a 64MiB profile, whose limits together pass
// the cap, run one after the other (the second waits, then runs) and
// neither fails; the containers created ahead of calls do not count.
// Nothing is left.
func TestDaemonNodeCaps(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock, "--max-sessions", "2", "--max-memory", "100MiB", "--queue-wait", "60s")
	c := d.client()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"README.md": "# r\n", "slow.txt": slowLine()})

	docs, err := os.ReadFile(filepath.Join("..", "profiles", "builtin", "docs.yaml"))
	require.NoError(t, err)
	small := strings.NewReplacer("name: docs", "name: small", "memory: 512MiB", "memory: 64MiB", "timeout: 60s", "timeout: 3s").Replace(string(docs))
	require.Contains(t, small, "memory: 64MiB")
	prof := filepath.Join(t.TempDir(), "small.yaml")
	require.NoError(t, os.WriteFile(prof, []byte(small), 0o644))

	_, err = c.CreateSession(ctx, api.CreateSession{Repo: repo, ReadOnly: true})
	requireAPIKind(t, err, api.KindLimit)
	require.Equal(t, `profile "docs": its memory limit of 512MiB per call is above the daemon's --max-memory 100MiB; use a profile with a smaller resources.memory`, err.Error())

	var ids []string
	for range 2 {
		s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo, ReadOnly: true, Profile: prof})
		require.NoError(t, err)
		ids = append(ids, s.ID)
	}
	_, err = c.CreateSession(ctx, api.CreateSession{Repo: repo, ReadOnly: true, Profile: prof})
	requireAPIKind(t, err, api.KindLimit)
	require.Equal(t, "sessions of this host: 2 already, the daemon's --max-sessions; remove one first", err.Error())

	type result struct {
		res *api.ExecResult
		err error
		end time.Time
	}
	first, second := make(chan result, 1), make(chan result, 1)
	run := func(id string, out chan<- result) {
		res, err := c.Exec(ctx, id, slowArgv, nil, nil)
		out <- result{res, err, time.Now()}
	}
	go run(ids[0], first)
	require.Eventually(t, func() bool { return len(runningContainers(t, state)) == 1 }, 60*time.Second, 50*time.Millisecond)
	go run(ids[1], second)
	// The second waits in the queue (a call slot is free, memory is not),
	// while both sessions keep containers created ahead.
	require.Eventually(t, func() bool {
		h, err := c.Health(ctx)
		return err == nil && h.Calls == api.CallsState{Running: 1, Waiting: 1, Cap: h.Calls.Cap, Memory: 64 << 20, MemoryCap: 100 << 20}
	}, 10*time.Second, 20*time.Millisecond)
	require.Len(t, runningContainers(t, state), 1, "one call runs at a time")
	require.Greater(t, len(daemonContainers(t, state)), 1, "containers created ahead exist and do not count")

	r1 := <-first
	require.NoError(t, r1.err)
	r2 := <-second
	require.NoError(t, r2.err, "a call over --max-memory waits; it does not fail")
	require.Contains(t, r1.res.LimitsHit, "timeout")
	require.Contains(t, r2.res.LimitsHit, "timeout")
	require.GreaterOrEqual(t, r2.end.Sub(r1.end), 2*time.Second, "the second ran after the first")

	for _, id := range ids {
		_, err := c.RemoveSession(ctx, id)
		require.NoError(t, err)
	}
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}
