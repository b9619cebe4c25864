package integration

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// BenchmarkDaemonBackToBack measures calls through the daemon with no
// think time against `ctr run --rm` of the same image, interleaved round
// by round so that all see the same machine (each round a burst of
// back-to-back calls per path): an API exec, a CLI
// `corral session exec ID -- ls` (a whole process through the daemon) and
// an MCP exec of `serve --mcp --session ID` through the daemon, each
// right after the previous call (issue 10's targets: p50 <= 0.25x ctr).
//
//	go test -run '^$' -bench BenchmarkDaemonBackToBack -benchtime 1x ./integration/
func BenchmarkDaemonBackToBack(b *testing.B) {
	if b.N > 1 {
		b.Skip("measures once; run with -benchtime 1x")
	}
	rounds, burst := 8, 4
	if s := os.Getenv("CORRAL_BENCH_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	before := loadAverage()
	lat := measureDaemonLatency(b, rounds, burst) // bench_daemon_test.go
	fmt.Printf("\nload average (1, 5, 15 min) %s before, %s after\n%s", before, loadAverage(), lat.table(rounds, burst))
	for j := range lat.names {
		b.ReportMetric(lat.ratio(j), fmt.Sprintf("x-ctr-%d", j))
	}
}
