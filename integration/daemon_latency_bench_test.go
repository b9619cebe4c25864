package integration

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// BenchmarkDaemonBackToBack measures calls through the daemon with no
// think time against `ctr run --rm` of the same image, interleaved round
// by round so that all see the same machine: per path, one ctr run --rm,
// a wait until the session's pool is full again (the session at rest),
// then 20 calls, each right after the previous one: an API exec, a CLI
// `corral session exec ID -- ls` (a whole process through the daemon) and
// an MCP exec of `serve --mcp --session ID` through the daemon (issue
// 10's targets: 20 back-to-back MCP exec calls, and CLI session exec
// through the daemon, p50 <= 0.25x ctr). CORRAL_BENCH_ROUNDS (default 4)
// and CORRAL_BENCH_BURST (default 20) change the rounds and the calls per
// burst; CORRAL_BENCH_POOL_MAX_DEPTH=2 fixes the session's pool depth at
// the docs profile's pool_depth (pools that do not grow, for comparison);
// CORRAL_BENCH_DAEMON_FLAGS adds flags to the daemon's command line
// (--reap-cgroup= leaves every shim in containerd's cgroup).
//
//	go test -run '^$' -bench BenchmarkDaemonBackToBack -benchtime 1x ./integration/
func BenchmarkDaemonBackToBack(b *testing.B) {
	if b.N > 1 {
		b.Skip("measures once; run with -benchtime 1x")
	}
	rounds, burst := 4, 20
	if s := os.Getenv("CORRAL_BENCH_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("CORRAL_BENCH_BURST"); s != "" {
		burst, _ = strconv.Atoi(s)
	}
	before := loadAverage()
	lat := measureDaemonLatency(b, rounds, burst) // bench_daemon_test.go
	fmt.Printf("\nload average (1, 5, 15 min) %s before, %s after\n%s", before, loadAverage(), lat.table(rounds, burst))
	for j := range lat.names {
		b.ReportMetric(lat.ratio(j), fmt.Sprintf("x-ctr-%d", j))
	}
}
