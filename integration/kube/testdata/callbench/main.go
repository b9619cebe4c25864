// Command callbench runs a command N times in a row and prints how long
// each run took: one JSON object {"runs","failures","p50_ms","p90_ms",
// "max_ms","took_ms","first_error"} on stdout, took_ms every run's time
// in milliseconds, sorted. The kube tests run it in an agent Pod
// and on the host with the same corral command, so that both figures
// include the same process start and the same call.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"
)

func main() {
	n := flag.Int("n", 20, "runs")
	flag.Parse()
	argv := flag.Args()
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "usage: callbench [-n N] CMD [ARG...]")
		os.Exit(2)
	}
	var took []time.Duration
	failures, first := 0, ""
	for range *n {
		start := time.Now()
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		took = append(took, time.Since(start))
		if err != nil {
			failures++
			if first == "" {
				first = fmt.Sprintf("%v: %s", err, out)
			}
		}
	}
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	all := make([]float64, len(took))
	for i, d := range took {
		all[i] = ms(d)
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{
		"runs": *n, "failures": failures, "first_error": first,
		"p50_ms": ms(took[len(took)/2]), "p90_ms": ms(took[len(took)*9/10]), "max_ms": ms(took[len(took)-1]),
		"took_ms": all,
	})
}
