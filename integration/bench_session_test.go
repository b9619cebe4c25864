package integration

import (
	"fmt"
	"os"
	"testing"

	"github.com/corral-sandbox/corral/sandbox"
)

// BenchmarkSessionWarm measures BenchmarkCompare's session rows alone,
// for before/after comparisons of the session's call path: one ls plus
// the change set in a session whose next container was created ahead
// (an agent's think time between calls), the same back to back (no think
// time: the pool's depth counts), and created on the call (Cold).
func BenchmarkSessionWarm(b *testing.B) {
	if b.N > 1 {
		b.Skip("measures once; run with -benchtime 1x")
	}
	n := 30
	if v := os.Getenv("CORRAL_BENCH_N"); v != "" {
		fmt.Sscan(v, &n)
	}
	demo := demoRepoB(b)
	s := newSessionB(b, demo)
	warm := samples(b, n, execArgv(s, "ls", "-la"), s)
	s.Idle()
	b2b := samples(b, n, execArgv(s, "ls", "-la"))
	cold := newSessionB(b, demo, func(c *sandbox.Config) { c.Cold = true })
	coldD := samples(b, n, execArgv(cold, "ls", "-la"), cold)
	fmt.Printf("BENCH warm p50 %.1f p95 %.1f | back-to-back p50 %.1f p95 %.1f | cold p50 %.1f p95 %.1f (ms, n=%d)\n",
		ms(pct(warm, 0.5)), ms(pct(warm, 0.95)), ms(pct(b2b, 0.5)), ms(pct(b2b, 0.95)), ms(pct(coldD, 0.5)), ms(pct(coldD, 0.95)), n)
}
