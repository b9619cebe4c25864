//go:build kube

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// podCallTarget is the Kubernetes issue's latency target: a call from an
// agent Pod through its node's daemon costs at most this many times the
// same call from the host's CLI through the same daemon (p50 against p50).
const podCallTarget = 1.2

// benchResult is callbench's output (testdata/callbench).
type benchResult struct {
	Runs       int       `json:"runs"`
	Failures   int       `json:"failures"`
	FirstError string    `json:"first_error"`
	P50        float64   `json:"p50_ms"`
	P90        float64   `json:"p90_ms"`
	Max        float64   `json:"max_ms"`
	Took       []float64 `json:"took_ms"`
}

// parseBench reads callbench's JSON object, the last line of out.
func parseBench(t testing.TB, out string) benchResult {
	t.Helper()
	var r benchResult
	if err := json.Unmarshal([]byte(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), &r); err != nil {
		t.Fatalf("callbench output %q: %v", out, err)
	}
	return r
}

// percentile is the p-quantile (0..1) of ms by the nearest rank below,
// as callbench computes its own; ms must not be empty.
func percentile(ms []float64, p float64) float64 {
	s := slices.Sorted(slices.Values(ms))
	return s[int(float64(len(s)-1)*p)]
}

// BenchmarkPodCall measures the same call (corral session exec ID -- cat
// README.md, a whole CLI process each) from an agent Pod and from the
// host, both through the node's daemon, in rounds that alternate which
// side goes first so that the machine's drift falls on both; it prints a
// table with the ratio of the pooled p50s against podCallTarget, met or
// MISSED, and writes it to $CORRAL_BENCH_OUT when that is set. A failed
// call fails the benchmark; a missed target does not (run with -benchtime
// 1x; make kube does).
func BenchmarkPodCall(b *testing.B) {
	if b.N > 1 {
		b.Skip("BenchmarkPodCall measures once; run with -benchtime 1x")
	}
	deploy(b)
	a := newAgent(b, "latency-agent")
	id := a.createSession(b)
	b.Cleanup(func() { _, _ = a.corral(context.Background(), "session", "rm", id) })
	const rounds, n = 6, 20
	call := []string{"session", "exec", id, "--", "cat", "README.md"}
	// Warm both paths once (the tools image is built on the first call).
	a.must(b, call...)

	pod := func() benchResult {
		out, errOut, err := cluster.Kubectl(b.Context(), nil, append([]string{"exec", "-n", agentNS, a.name, "--",
			"/usr/local/bin/callbench", "-n", fmt.Sprint(n), "/usr/local/bin/corral"}, call...)...)
		if err != nil {
			b.Fatal(err, out, errOut)
		}
		return parseBench(b, out)
	}
	host := func() benchResult {
		argv := append([]string{filepath.Join(buildDir, "callbench"), "-n", fmt.Sprint(n), filepath.Join(buildDir, "corral"), "--daemon", sockPath}, call...)
		out, err := onNode(b.Context(), argv...).Output()
		if err != nil {
			b.Fatal(err, string(out))
		}
		return parseBench(b, string(out))
	}
	var podMs, hostMs []float64
	add := func(into *[]float64, r benchResult, side string) {
		if r.Failures != 0 {
			b.Fatalf("%s: %d of %d calls failed, first: %s", side, r.Failures, r.Runs, r.FirstError)
		}
		*into = append(*into, r.Took...)
	}
	start := time.Now()
	for i := range rounds {
		if i%2 == 0 {
			add(&hostMs, host(), "host")
			add(&podMs, pod(), "agent Pod")
		} else {
			add(&podMs, pod(), "agent Pod")
			add(&hostMs, host(), "host")
		}
	}
	took := time.Since(start)

	p50, h50 := percentile(podMs, 0.5), percentile(hostMs, 0.5)
	ratio := p50 / h50
	verdict := "met"
	if ratio > podCallTarget {
		verdict = "MISSED"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n## Kubernetes: a call from an agent Pod (make kube, %s)\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&sb, "%d rounds of %d calls on each side, alternating which goes first, in %s.\n\n", rounds, n, took.Round(time.Second))
	sb.WriteString("| what | p50 | p90 | max | calls |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range []struct {
		what string
		ms   []float64
	}{
		{"agent Pod → daemon: `corral session exec ID -- cat README.md` (whole CLI process)", podMs},
		{"host → daemon: the same call, the same static binary", hostMs},
	} {
		fmt.Fprintf(&sb, "| %s | %.1f ms | %.1f ms | %.1f ms | %d |\n", r.what, percentile(r.ms, 0.5), percentile(r.ms, 0.9), percentile(r.ms, 1), len(r.ms))
	}
	sb.WriteString("\n| target | got | limit | verdict |\n| --- | --- | --- | --- |\n")
	fmt.Fprintf(&sb, "| agent Pod p50 / host p50 | %.2f× | ≤ %.2f× | %s |\n", ratio, podCallTarget, verdict)
	fmt.Print(sb.String())
	if out := os.Getenv("CORRAL_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
