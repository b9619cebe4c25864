package integration

// The daemon's rows of `make bench` (BenchmarkCompare): calls through
// `corral daemon` next to `ctr run --rm` of the same image measured in
// the same run, and 8 sessions x 50 calls at once through the API (issue
// 10's targets). Kept apart from bench_test.go's rows so that each set
// can change alone.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// daemonLatency is one path's calls through the daemon, and the ctr run
// --rm samples of the same rounds.
type daemonLatency struct {
	names []string          // [0] is ctr run --rm
	got   [][]time.Duration // per name
}

// measureDaemonLatency starts a daemon (pool depth: the profile's, 2 by
// default) and times, round by round so that all see the same machine,
// one `ctr run --rm` of the test image and then a burst of burst
// back-to-back calls of each path on one session: an API exec, a whole
// CLI process `corral session exec ID -- ls` through the daemon, and an
// MCP exec of `serve --mcp --session ID` through the daemon.
func measureDaemonLatency(b testing.TB, rounds, burst int) daemonLatency {
	b.Helper()
	ctx := context.Background()
	repo := daemonBenchRepo(b)
	dir, err := os.MkdirTemp("", "corral-bench-b2b-")
	require.NoError(b, err)
	defer os.RemoveAll(dir)
	d := startDaemon(b, dir+"/state", dir+"/corral.sock")
	defer d.stop(true)
	c := client.New(d.sock)
	defer c.Close()
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
	require.NoError(b, err)
	defer c.DiscardSession(ctx, s.ID)

	addr, image := testutil.Address(), testutil.TestImageRef
	ctrRun := func() error {
		return runCmd("ctr", "--address", addr, "-n", testutil.Namespace, "run", "--rm", "--snapshotter", "overlayfs",
			image, fmt.Sprintf("bench-b2b-%d", time.Now().UnixNano()), "ls", "/")()
	}
	apiExec := func() error {
		r, err := c.Exec(ctx, s.ID, []string{"ls"}, nil, nil)
		if err == nil && r.ExitCode != 0 {
			err = fmt.Errorf("ls exited %d: %s", r.ExitCode, r.Stderr)
		}
		return err
	}
	cliExec := runCmd(testutil.CorralPath(), "--daemon", d.sock, "session", "exec", "--quiet", s.ID, "--", "ls")

	// An MCP server on the daemon's session, driven by the Go SDK's client.
	srv := exec.Command(testutil.CorralPath(), "--daemon", d.sock, "serve", "--mcp", "--session", s.ID)
	srv.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+addr)
	srvErr := &lockedBuffer{}
	srv.Stderr = srvErr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "corral-bench", Version: "1.0.0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: srv}, nil)
	require.NoError(b, err, srvErr.String())
	defer cs.Close()
	mcpExec := func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"argv": []string{"ls"}}})
		if err == nil && res.IsError {
			err = fmt.Errorf("mcp exec: %s", resultText(res))
		}
		return err
	}

	out := daemonLatency{names: []string{"ctr run --rm (same image)", "API exec ls via daemon (back to back)",
		"CLI session exec -- ls via daemon (whole process, back to back)", "MCP exec ls via daemon (back to back)"}}
	fns := []func() error{ctrRun, apiExec, cliExec, mcpExec}
	// Warm-up: the image, the daemon's session and the server.
	for _, fn := range fns {
		require.NoError(b, fn())
	}
	out.got = make([][]time.Duration, len(fns))
	for i := 0; i < rounds; i++ {
		for j, fn := range fns {
			n := burst
			if j == 0 {
				n = 1
			}
			for k := 0; k < n; k++ {
				t0 := time.Now()
				require.NoError(b, fn(), out.names[j])
				out.got[j] = append(out.got[j], time.Since(t0))
			}
		}
	}
	return out
}

// ratio is path j's p50 over ctr run --rm's p50.
func (l daemonLatency) ratio(j int) float64 {
	return float64(pct(l.got[j], 0.5)) / float64(pct(l.got[0], 0.5))
}

// table is the latency rows in markdown.
func (l daemonLatency) table(rounds, burst int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "| path (%d rounds: 1 ctr run --rm, then %d back-to-back calls of each path) | p50 (ms) | p95 (ms) | p50 / ctr run --rm p50 |\n| --- | --- | --- | --- |\n", rounds, burst)
	for j, name := range l.names {
		fmt.Fprintf(&sb, "| %s | %.1f | %.1f | %.2f× |\n", name, ms(pct(l.got[j], 0.5)), ms(pct(l.got[j], 0.95)), l.ratio(j))
	}
	return sb.String()
}

// daemonLoad is the outcome of sessions x calls through the daemon's
// API at once.
type daemonLoad struct {
	sessions, calls int
	rate            float64 // calls/s through the daemon
	failures        int64
	leftovers       int     // containers of the daemon's state dir after the sessions were removed
	ctrRate         float64 // ctr run --rm/s, the same number of loops, the same run
	firstErr        error
}

// measureDaemonLoad runs sessions callers, each making calls back-to-back
// execs in its own session of one daemon, then removes the sessions and
// counts the containers left; then the same number of ctr run --rm loops
// for as long, for comparison.
func measureDaemonLoad(b testing.TB, sessions, calls int) daemonLoad {
	b.Helper()
	ctx := context.Background()
	e := testutil.Executor(b)
	repo := daemonBenchRepo(b)
	dir, err := os.MkdirTemp("", "corral-bench-load-")
	require.NoError(b, err)
	defer os.RemoveAll(dir)
	state := dir + "/state"
	d := startDaemon(b, state, dir+"/corral.sock")
	defer d.stop(true)
	c := client.New(d.sock)
	defer c.Close()
	ids := make([]string, sessions)
	for i := range ids {
		s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
		require.NoError(b, err)
		ids[i] = s.ID
	}
	out := daemonLoad{sessions: sessions, calls: calls}
	var errOnce sync.Once
	var failures atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < calls; k++ {
				r, err := c.Exec(ctx, id, []string{"ls"}, nil, nil)
				if err == nil && r.ExitCode != 0 {
					err = fmt.Errorf("ls exited %d: %s", r.ExitCode, r.Stderr)
				}
				if err != nil {
					failures.Add(1)
					errOnce.Do(func() { out.firstErr = err })
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	out.rate, out.failures = float64(sessions*calls)/took.Seconds(), failures.Load()
	for _, id := range ids {
		_, err := c.RemoveSession(ctx, id)
		require.NoError(b, err)
	}
	list, err := e.Client().Containers(e.Context(ctx), fmt.Sprintf("labels.%q==%q", sandbox.LabelStateDir, state))
	require.NoError(b, err)
	out.leftovers = len(list)

	addr, image := testutil.Address(), testutil.TestImageRef
	out.ctrRate = throughput(sessions, took, func(i int) error {
		return runCmd("ctr", "--address", addr, "-n", testutil.Namespace, "run", "--rm", "--snapshotter", "overlayfs",
			image, fmt.Sprintf("bench-load-%d-%d", i, time.Now().UnixNano()), "ls", "/")()
	})
	return out
}

// daemonSection is `make bench`'s section for the daemon: the latency
// rows and the load row, and issue 10's targets met or missed.
func daemonSection(b testing.TB) string {
	b.Helper()
	rounds, burst := 8, 4
	before := loadAverage()
	lat := measureDaemonLatency(b, rounds, burst)
	load := measureDaemonLoad(b, 8, 50)
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n## Through the daemon (pool depth 2); load average (1, 5, 15 min) %s before, %s after\n\n", before, loadAverage())
	sb.WriteString(lat.table(rounds, burst))
	fmt.Fprintf(&sb, "\n| load | calls/s | failures | containers left | ctr run --rm/s, %d loops as long |\n| --- | --- | --- | --- | --- |\n", load.sessions)
	fmt.Fprintf(&sb, "| %d sessions × %d calls at once, API | %.1f | %d | %d | %.1f |\n", load.sessions, load.calls, load.rate, load.failures, load.leftovers, load.ctrRate)
	if load.firstErr != nil {
		fmt.Fprintf(&sb, "\nfirst failure: %v\n", load.firstErr)
	}
	fmt.Fprintf(&sb, "\n| target | measured | limit | verdict |\n| --- | --- | --- | --- |\n")
	for _, t := range []target{
		{"API exec p50 / ctr run --rm p50", lat.ratio(1), 0.25, "×"},
		{"CLI session exec via daemon p50 / ctr run --rm p50", lat.ratio(2), 0.25, "×"},
		{"MCP exec via daemon p50 / ctr run --rm p50", lat.ratio(3), 0.25, "×"},
		{"failures, 8 × 50 through the daemon", float64(load.failures), 0, ""},
		{"containers left after 8 × 50", float64(load.leftovers), 0, ""},
	} {
		fmt.Fprintln(&sb, t.String())
	}
	return sb.String()
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// BenchmarkDaemon prints the daemon's section of `make bench` alone.
//
//	go test -run '^$' -bench '^BenchmarkDaemon$' -benchtime 1x ./integration/
func BenchmarkDaemon(b *testing.B) {
	if b.N > 1 {
		b.Skip("measures once; run with -benchtime 1x")
	}
	fmt.Print(daemonSection(b))
}
