package integration

// Throughput per runtime (issue 11, item 6): 8 sessions doing back-to-back
// calls against 8 `ctr run --rm` loops of the same image on the same
// runtime, in the same run. Kept apart from BenchmarkCompare's latency
// rows: BenchmarkCompare appends throughputSection's table.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

// throughputTarget is the ratio corral's calls/s must reach over ctr run
// --rm's, with the same concurrency and runtime.
const throughputTarget = 2.0

// throughputCallers is the concurrency of both sides.
const throughputCallers = 8

// throughputRow is one runtime's measurement: calls/s of corral's 8
// sessions and of 8 ctr run --rm loops, and corral's peak RSS.
type throughputRow struct {
	runtime     string
	corral, ctr float64
	rssMiB      float64
	load        string // /proc/loadavg's first three fields, after the row
}

func (r throughputRow) ratio() float64 {
	if r.ctr == 0 {
		return 0
	}
	return r.corral / r.ctr
}

// throughputRounds is how many windows each side gets: corral's and
// ctr's windows alternate, so that a change in the machine's load (it is
// shared) falls on both sides alike.
const throughputRounds = 4

// measureThroughput measures one runtime for d per side, each call an
// `ls` of the working directory (corral: the repository's view; ctr: the
// image's root; under runsc an ls of a named path fails, statx with
// AT_NO_AUTOMOUNT): corral in a
// child process (its peak RSS is then corral's alone) and the ctr loops
// in this one, in alternating windows of d/throughputRounds.
func measureThroughput(b testing.TB, rt, repo string, d time.Duration) throughputRow {
	b.Helper()
	row := throughputRow{runtime: rt}
	child := startThroughputChild(b, rt, repo)
	defer child.stop()
	ctr := ctrRunArgs(b, rt)
	w := d / throughputRounds
	var corralCalls, ctrCalls float64
	var corralTime, ctrTime time.Duration
	for i := 0; i < throughputRounds; i++ {
		calls, secs := child.window(w)
		corralCalls += calls
		corralTime += time.Duration(secs * float64(time.Second))
		start := time.Now()
		rate := throughput(throughputCallers, w, func(i int) error {
			args := append(append([]string(nil), ctr...), fmt.Sprintf("bench-ctr-%s-%d-%d", rt, i, time.Now().UnixNano()), "ls")
			return runCmd("ctr", args...)()
		})
		ctrCalls += rate * time.Since(start).Seconds()
		ctrTime += time.Since(start)
	}
	row.corral = corralCalls / corralTime.Seconds()
	row.ctr = ctrCalls / ctrTime.Seconds()
	row.rssMiB = child.stop()
	row.load = loadAverage()
	return row
}

// ctrRunArgs is `ctr run --rm` of the test image on runtime rt, up to the
// container ID: the runc v2 shim with the runtime's binary, and for a
// wrapped runtime (runsc) corral's installed wrapper, so that its flags
// (--network=none) apply as they do to corral's containers.
func ctrRunArgs(b testing.TB, rt string) []string {
	b.Helper()
	args := []string{"--address", testutil.Address(), "-n", testutil.Namespace, "run", "--rm", "--snapshotter", "overlayfs"}
	info, err := sandbox.LookupRuntime(rt)
	require.NoError(b, err)
	switch {
	case info.Wrapped():
		// The child installed it under the state directory.
		found, _ := filepath.Glob(filepath.Join(testutil.StateDir(b), "bin", "corral-runsc-*", "corral-runsc"))
		require.NotEmpty(b, found, "corral-runsc is not installed in the state directory")
		args = append(args, "--runc-binary", found[0])
	case info.Binary != "":
		p, err := exec.LookPath(info.Binary)
		require.NoError(b, err)
		args = append(args, "--runc-binary", p)
	}
	return append(args, testutil.TestImageRef)
}

// throughputSection measures every runtime of runtimeNames and returns
// the markdown table: calls/s with 8 sessions against ctr run --rm with
// the same runtime, the ratio and the 2× target met or missed.
func throughputSection(b *testing.B, repo string, d time.Duration) string {
	b.Helper()
	var rows []throughputRow
	for _, rt := range benchRuntimes(b) {
		rows = append(rows, measureThroughput(b, rt, repo, d))
	}
	return throughputTable(rows, d)
}

func throughputTable(rows []throughputRow, d time.Duration) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n## Throughput per runtime, %d concurrent callers, %s each\n\n", throughputCallers, d)
	fmt.Fprintf(&sb, "| runtime | corral, %d sessions (calls/s) | ctr run --rm, %d loops (calls/s) | ratio | target ≥ %.0f× | corral peak RSS | load after |\n| --- | --- | --- | --- | --- | --- | --- |\n",
		throughputCallers, throughputCallers, throughputTarget)
	for _, r := range rows {
		verdict := "met"
		if r.ratio() < throughputTarget {
			verdict = "MISSED"
		}
		fmt.Fprintf(&sb, "| %s | %.1f | %.1f | %.2f× | %s | %.1f MiB | %s |\n", r.runtime, r.corral, r.ctr, r.ratio(), verdict, r.rssMiB, r.load)
	}
	return sb.String()
}

// benchRuntimes are the runtimes measured: runtimeNames' rule
// ($CORRAL_IT_RUNTIMES narrows), skipping a runtime whose binary is
// missing.
func benchRuntimes(b testing.TB) []string {
	b.Helper()
	var names []string
	for _, r := range sandbox.Runtimes() {
		if env := os.Getenv("CORRAL_IT_RUNTIMES"); env != "" && !strings.Contains(","+env+",", ","+r.Name+",") {
			continue
		}
		if r.Binary != "" {
			if _, err := exec.LookPath(r.Binary); err != nil {
				fmt.Fprintf(os.Stderr, "throughput: %s not installed, no row\n", r.Binary)
				continue
			}
		}
		names = append(names, r.Name)
	}
	return names
}

// BenchmarkThroughput prints the throughput rows alone (BenchmarkCompare
// includes them): go test -run '^$' -bench '^BenchmarkThroughput$'
// -benchtime 1x ./integration/; CORRAL_BENCH_DUR sets each side's time
// (default 10s).
func BenchmarkThroughput(b *testing.B) {
	if b.N > 1 {
		b.Skip("BenchmarkThroughput measures once; run with -benchtime 1x")
	}
	testutil.Executor(b)
	d := 10 * time.Second
	if v := os.Getenv("CORRAL_BENCH_DUR"); v != "" {
		var err error
		d, err = time.ParseDuration(v)
		require.NoError(b, err)
	}
	fmt.Print(throughputSection(b, demoRepoB(b), d))
}

// TestThroughputChild is the supervisor process of a throughput row: 8
// sessions on runtime $CORRAL_BENCH_RUNTIME, one caller each. For each
// line "run DURATION" on stdin it runs the callers for that long, waits
// for the sessions' clean-up and refill, and prints "THROUGHPUT calls
// seconds"; at the end of stdin it prints "RSS MiB"
// (its peak). It runs only as that child.
func TestThroughputChild(t *testing.T) {
	repo := os.Getenv("CORRAL_BENCH_CHILD_REPO")
	if repo == "" {
		t.Skip("runs only as the child of a throughput benchmark")
	}
	rt := os.Getenv("CORRAL_BENCH_RUNTIME")
	var sessions []*sandbox.Session
	for i := 0; i < throughputCallers; i++ {
		s := newSessionB(t, repo, func(c *sandbox.Config) { c.Runtime = rt })
		require.NoError(t, execArgv(s, "ls")())
		s.Idle()
		sessions = append(sessions, s)
	}
	fmt.Println("READY")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		d, err := time.ParseDuration(strings.TrimPrefix(in.Text(), "run "))
		require.NoError(t, err)
		start := time.Now()
		rate := throughput(throughputCallers, d, func(i int) error { return execArgv(sessions[i], "ls")() })
		calls := rate * time.Since(start).Seconds()
		// The window's clean-up and refill are its own cost, counted in
		// its time, not left to overlap the other side's window.
		for _, s := range sessions {
			s.Idle()
		}
		fmt.Printf("THROUGHPUT %.3f %.3f\n", calls, time.Since(start).Seconds())
	}
	fmt.Printf("RSS %.1f\n", maxRSSMiB())
}

// throughputProc is a running TestThroughputChild.
type throughputProc struct {
	b       testing.TB
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Scanner
	log     strings.Builder
	stopped bool
	rss     float64
}

func startThroughputChild(b testing.TB, rt, repo string) *throughputProc {
	b.Helper()
	p := &throughputProc{b: b}
	p.cmd = exec.Command(os.Args[0], "-test.run", "^TestThroughputChild$", "-test.count=1", "-test.v")
	p.cmd.Env = append(os.Environ(), "CORRAL_BENCH_CHILD_REPO="+repo, "CORRAL_BENCH_RUNTIME="+rt,
		"CORRAL_IT_STATE_DIR="+testutil.StateDir(b))
	p.cmd.Stderr = os.Stderr
	var err error
	p.in, err = p.cmd.StdinPipe()
	require.NoError(b, err)
	out, err := p.cmd.StdoutPipe()
	require.NoError(b, err)
	p.out = bufio.NewScanner(out)
	require.NoError(b, p.cmd.Start())
	p.expect("READY")
	return p
}

// expect reads the child's output up to a line starting with prefix and
// returns the rest of that line.
func (p *throughputProc) expect(prefix string) string {
	for p.out.Scan() {
		l := p.out.Text()
		p.log.WriteString(l + "\n")
		if strings.HasPrefix(l, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(l, prefix))
		}
	}
	p.b.Fatalf("throughput child: no %q in its output:\n%s", prefix, p.log.String())
	return ""
}

// window runs the child's callers for d and returns how many calls they
// made and the window's seconds (its clean-up included).
func (p *throughputProc) window(d time.Duration) (calls, secs float64) {
	_, err := fmt.Fprintf(p.in, "run %s\n", d)
	require.NoError(p.b, err)
	_, err = fmt.Sscan(p.expect("THROUGHPUT "), &calls, &secs)
	require.NoError(p.b, err)
	require.NotZero(p.b, calls, p.log.String())
	return calls, secs
}

// stop ends the child (its sessions close) and returns its peak RSS in
// MiB.
func (p *throughputProc) stop() float64 {
	if p.stopped {
		return p.rss
	}
	p.stopped = true
	p.in.Close()
	fmt.Sscan(p.expect("RSS "), &p.rss)
	for p.out.Scan() {
		p.log.WriteString(p.out.Text() + "\n")
	}
	require.NoError(p.b, p.cmd.Wait(), p.log.String())
	return p.rss
}
