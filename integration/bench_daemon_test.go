package integration

// The daemon's rows of `make bench` (BenchmarkCompare): calls through
// `corral daemon` next to `ctr run --rm` of the same image measured in
// the same run, and 8 sessions x 50 calls at once through the API (issue
// 10's targets). Kept apart from bench_test.go's rows so that each set
// can change alone.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/profiles"
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
	// waits are the times spent waiting for the session's pool to be full
	// again before each burst; how says what was polled.
	waits []time.Duration
	how   string
	// hits and misses per name: the calls that found a container ready
	// and that found none, from the daemon's health (-1: not reported).
	hits, misses []int
}

// measureDaemonLatency starts a daemon (the default profile: pool_depth
// 2 and what the pool learns) and times, round by round so that all see
// the same machine, for each path in turn: one `ctr run --rm` of the
// test image, a wait until the session's pool is full again (the session
// at rest; waitPoolFull), then burst calls of the path with no think
// time. The paths: an API exec, a whole CLI process `corral session
// exec ID -- ls` through the daemon (burst processes one after the
// other), and an MCP exec of `serve --mcp --session ID` through the
// daemon.
func measureDaemonLatency(b testing.TB, rounds, burst int) daemonLatency {
	b.Helper()
	ctx := context.Background()
	e := testutil.Executor(b)
	repo := daemonBenchRepo(b)
	dir, err := os.MkdirTemp("", "corral-bench-b2b-")
	require.NoError(b, err)
	defer os.RemoveAll(dir)
	state := dir + "/state"
	d := startDaemon(b, state, dir+"/corral.sock", strings.Fields(os.Getenv("CORRAL_BENCH_DAEMON_FLAGS"))...)
	defer d.stop(true)
	c := client.New(d.sock)
	defer c.Close()
	// CORRAL_BENCH_POOL_MAX_DEPTH=N: the docs profile with pool_max_depth
	// N (N = 2, its pool_depth: a fixed depth, as before pools grew).
	var profile string
	if n := os.Getenv("CORRAL_BENCH_POOL_MAX_DEPTH"); n != "" {
		data, err := os.ReadFile(filepath.Join("..", "profiles", "builtin", "docs.yaml"))
		require.NoError(b, err)
		profile = filepath.Join(dir, "docs-bench.yaml")
		text := strings.Replace(string(data), "name: docs", "name: docs-bench", 1) + "\npool_max_depth: " + n + "\n"
		require.NoError(b, os.WriteFile(profile, []byte(text), 0o644))
	}
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo, Profile: profile})
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

	out := daemonLatency{names: []string{"ctr run --rm (same image), once before each burst",
		fmt.Sprintf("API exec ls, %d back-to-back calls (session at rest)", burst),
		fmt.Sprintf("CLI session exec -- ls, %d sequential processes (session at rest)", burst),
		fmt.Sprintf("MCP exec ls, %d back-to-back calls (session at rest)", burst)}}
	fns := []func() error{ctrRun, apiExec, cliExec, mcpExec}
	// Warm-up: the image, the daemon's session and the server.
	for _, fn := range fns {
		require.NoError(b, fn())
	}
	out.got = make([][]time.Duration, len(fns))
	out.hits, out.misses = make([]int, len(fns)), make([]int, len(fns))
	for i := 0; i < rounds; i++ {
		for j := 1; j < len(fns); j++ {
			t0 := time.Now()
			require.NoError(b, ctrRun(), out.names[0])
			out.got[0] = append(out.got[0], time.Since(t0))
			waited, how, w0 := waitPoolFull(b, e, d.sock, state)
			out.waits, out.how = append(out.waits, waited), how
			for k := 0; k < burst; k++ {
				t0 := time.Now()
				require.NoError(b, fns[j](), out.names[j])
				out.got[j] = append(out.got[j], time.Since(t0))
			}
			if w1 := daemonWarm(b, d.sock); w0 != nil && w1 != nil && out.hits[j] >= 0 {
				out.hits[j] += w1.Hits - w0.Hits
				out.misses[j] += w1.Misses - w0.Misses
			} else {
				out.hits[j], out.misses[j] = -1, -1
			}
		}
	}
	out.hits[0], out.misses[0] = -1, -1
	return out
}

// warmFigures are the daemon's health warm figures the bench reads
// (decoded here, not through api.Health, so that the bench builds and
// runs against a daemon from before they were added: nil then).
type warmFigures struct {
	Ready, Wanted, Filling, Hits, Misses int
}

// daemonWarm reads the daemon's health warm figures over sock; nil when
// the daemon reports none.
func daemonWarm(b testing.TB, sock string) *warmFigures {
	b.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	var h struct {
		Warm *warmFigures `json:"warm"`
	}
	resp, err := hc.Get("http://corral/v1/health")
	require.NoError(b, err)
	defer resp.Body.Close()
	require.NoError(b, json.NewDecoder(resp.Body).Decode(&h))
	return h.Warm
}

// poolFullWait bounds waitPoolFull.
const poolFullWait = 60 * time.Second

// waitPoolFull waits until the pool of the daemon's one session is full
// again: the daemon's health says no pool is filling and as many
// containers are ready as the pools want (or, capped, that no pool fills
// on two polls in a row). A daemon whose health has no warm figures (one
// from before they were added, with its fixed pool_depth) is waited for
// until containerd holds exactly profiles.DefaultPoolDepth containers of
// its state directory (used ones are destroyed in the background, so at
// rest only the ready ones remain). It fails after poolFullWait; it says
// how long it waited, what it polled, and the warm figures it read (nil
// for a daemon without them).
func waitPoolFull(b testing.TB, e *sandbox.Executor, sock, state string) (time.Duration, string, *warmFigures) {
	b.Helper()
	start := time.Now()
	idle := 0
	for {
		if w := daemonWarm(b, sock); w != nil {
			if w.Filling == 0 {
				idle++
			} else {
				idle = 0
			}
			if w.Filling == 0 && (w.Ready >= w.Wanted || idle >= 2) {
				return time.Since(start), "the daemon's health: warm.filling 0 and warm.ready = warm.wanted", w
			}
		} else {
			list, err := e.Client().Containers(e.Context(context.Background()), fmt.Sprintf("labels.%q==%q", sandbox.LabelStateDir, state))
			require.NoError(b, err)
			if len(list) == profiles.DefaultPoolDepth {
				return time.Since(start), fmt.Sprintf("containerd: %d containers of the state directory (health has no warm figures)", profiles.DefaultPoolDepth), nil
			}
		}
		require.Less(b, time.Since(start), poolFullWait, "the session's pool was not full again")
		time.Sleep(50 * time.Millisecond)
	}
}

// ratio is path j's p50 over ctr run --rm's p50.
func (l daemonLatency) ratio(j int) float64 {
	return float64(pct(l.got[j], 0.5)) / float64(pct(l.got[0], 0.5))
}

// table is the latency rows in markdown.
func (l daemonLatency) table(rounds, burst int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "| path (%d rounds; per path: 1 ctr run --rm, the pool full again, then %d calls with no think time) | p50 (ms) | p95 (ms) | p50 / ctr run --rm p50 | calls that found a container ready |\n| --- | --- | --- | --- | --- |\n", rounds, burst)
	for j, name := range l.names {
		ready := "—"
		if l.hits[j] >= 0 {
			ready = fmt.Sprintf("%d of %d", l.hits[j], l.hits[j]+l.misses[j])
		}
		fmt.Fprintf(&sb, "| %s | %.1f | %.1f | %.2f× | %s |\n", name, ms(pct(l.got[j], 0.5)), ms(pct(l.got[j], 0.95)), l.ratio(j), ready)
	}
	fmt.Fprintf(&sb, "\nwaiting for the pool to be full before each burst: p50 %.0f ms, max %.0f ms (polled %s)\n", ms(pct(l.waits, 0.5)), ms(pct(l.waits, 1)), l.how)
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
	d := startDaemon(b, state, dir+"/corral.sock", strings.Fields(os.Getenv("CORRAL_BENCH_DAEMON_FLAGS"))...)
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
	rounds, burst := 4, 20
	before := loadAverage()
	lat := measureDaemonLatency(b, rounds, burst)
	load := measureDaemonLoad(b, 8, 50)
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n## Through the daemon (pool_depth 2, growing on bursts); load average (1, 5, 15 min) %s before, %s after\n\n", before, loadAverage())
	sb.WriteString(lat.table(rounds, burst))
	fmt.Fprintf(&sb, "\n| load | calls/s | failures | containers left | ctr run --rm/s, %d loops as long |\n| --- | --- | --- | --- | --- |\n", load.sessions)
	fmt.Fprintf(&sb, "| %d sessions × %d calls at once, API | %.1f | %d | %d | %.1f |\n", load.sessions, load.calls, load.rate, load.failures, load.leftovers, load.ctrRate)
	if load.firstErr != nil {
		fmt.Fprintf(&sb, "\nfirst failure: %v\n", load.firstErr)
	}
	fmt.Fprintf(&sb, "\n| target | measured | limit | verdict |\n| --- | --- | --- | --- |\n")
	for _, t := range []target{
		{"API exec, 20 back-to-back, p50 / ctr run --rm p50", lat.ratio(1), 0.25, "×"},
		{"CLI session exec via daemon, 20 sequential, p50 / ctr run --rm p50", lat.ratio(2), 0.25, "×"},
		{"MCP exec, 20 back-to-back, p50 / ctr run --rm p50", lat.ratio(3), 0.25, "×"},
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
