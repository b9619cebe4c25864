package integration

// Benchmarks, not timed tests: nothing here fails on a slow machine.
// `make bench` runs BenchmarkCompare, which measures corral and its
// baselines (ctr run --rm, runc run, bwrap) side by side in one run and
// prints one table with the ratios and each target met or missed.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/opencontainers/image-spec/identity"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
)

// samples times fn n times (after one warm-up) and returns the durations.
// Each idle (may be nil) runs untimed after each call: a session's
// background work, which an agent's think time between calls covers.
func samples(b testing.TB, n int, fn func() error, idle ...*sandbox.Session) []time.Duration {
	b.Helper()
	settle := func() {
		for _, s := range idle {
			s.Idle()
		}
	}
	require.NoError(b, fn())
	settle()
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		require.NoError(b, fn())
		out = append(out, time.Since(start))
		settle()
	}
	return out
}

func pct(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := int(p * float64(len(s)-1))
	return s[idx]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func runCmd(name string, args ...string) func() error {
	return func() error {
		cmd := exec.Command(name, args...)
		cmd.Stdout = io.Discard
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.String())
		}
		return nil
	}
}

// execLs runs one allowlisted invocation and collects the change set, as
// an agent's tool call does.
func execArgv(s *sandbox.Session, argv ...string) func() error {
	return func() error {
		r, err := s.Exec(context.Background(), argv, nil, nil)
		if err != nil {
			return err
		}
		if r.ExitCode != 0 {
			return fmt.Errorf("%v exited %d: %s", argv, r.ExitCode, r.Stderr)
		}
		_, err = s.Changes()
		return err
	}
}

// benchRepo makes a repository of n small files in nested directories.
func benchRepo(b testing.TB, n int) string {
	b.Helper()
	dir := b.TempDir()
	require.NoError(b, os.Chmod(dir, 0o755))
	for i := 0; i < n; i++ {
		d := filepath.Join(dir, fmt.Sprintf("d%03d", i%100), fmt.Sprintf("e%03d", (i/100)%100))
		require.NoError(b, os.MkdirAll(d, 0o755))
		require.NoError(b, os.WriteFile(filepath.Join(d, fmt.Sprintf("f%06d.txt", i)), []byte("hello\n"), 0o644))
	}
	require.NoError(b, os.WriteFile(filepath.Join(dir, ".openwikiignore"), []byte("secrets/\n*.key\nd001/\n"), 0o644))
	require.NoError(b, os.MkdirAll(filepath.Join(dir, "openwiki"), 0o755))
	return dir
}

// rootfsDir mounts a read-only view of the test image's rootfs for the
// baselines that take a plain directory (runc run, ctr run --rootfs).
func rootfsDir(b testing.TB, e *sandbox.Executor) string {
	b.Helper()
	ctx := e.Context(context.Background())
	img, err := e.Client().GetImage(ctx, testutil.TestImageRef)
	require.NoError(b, err)
	diffIDs, err := img.RootFS(ctx)
	require.NoError(b, err)
	sn := e.Client().SnapshotService("overlayfs")
	key := fmt.Sprintf("bench-rootfs-%d", time.Now().UnixNano())
	ms, err := sn.View(ctx, key, identity.ChainID(diffIDs).String())
	require.NoError(b, err)
	dir := b.TempDir()
	require.NoError(b, mount.All(ms, dir))
	b.Cleanup(func() {
		_ = mount.UnmountAll(dir, 0)
		_ = sn.Remove(ctx, key)
	})
	return dir
}

// runcBundle writes a bundle whose rootfs is rootfs and whose only extra
// mount is a plain read-only bind of repo at /workspace; no seccomp.
func runcBundle(b testing.TB, rootfs, repo string, argv ...string) string {
	b.Helper()
	bundle := b.TempDir()
	ctx := context.Background()
	spec, err := oci.GenerateSpec(namespaces.WithNamespace(ctx, "bench"), nil, &containers.Container{ID: "bench"},
		oci.WithProcessArgs(argv...), oci.WithProcessCwd("/workspace"), oci.WithRootFSReadonly(), oci.WithEnv([]string{"PATH=/usr/bin:/bin"}),
		oci.WithMounts([]specs.Mount{{Destination: "/workspace", Type: "bind", Source: repo, Options: []string{"rbind", "ro"}}}))
	require.NoError(b, err)
	spec.Root.Path = rootfs
	data, err := json.Marshal(spec)
	require.NoError(b, err)
	require.NoError(b, os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644))
	return bundle
}

func bwrapArgs(repo string, argv ...string) []string {
	a := []string{"--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
		"--proc", "/proc", "--dev", "/dev", "--ro-bind", repo, "/workspace", "--chdir", "/workspace"}
	return append(a, argv...)
}

type row struct {
	name  string
	p50   time.Duration
	p95   time.Duration
	n     int
	extra string
}

type target struct {
	what  string
	got   float64
	limit float64
	unit  string
}

func (t target) String() string {
	verdict := "met"
	if t.got > t.limit {
		verdict = "MISSED"
	}
	return fmt.Sprintf("| %s | %.2f%s | ≤ %.2f%s | %s |", t.what, t.got, t.unit, t.limit, t.unit, verdict)
}

func goSrcCopy(b testing.TB) string {
	b.Helper()
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	require.NoError(b, err)
	dst := b.TempDir()
	require.NoError(b, runCmd("cp", "-a", filepath.Join(strings.TrimSpace(string(goroot)), "src")+"/.", dst)())
	require.NoError(b, os.Chmod(dst, 0o755))
	return dst
}

// BenchmarkCompare prints the comparison table (issue 6's targets).
func BenchmarkCompare(b *testing.B) {
	if b.N > 1 {
		b.Skip("BenchmarkCompare measures once; run with -benchtime 1x")
	}
	e := testutil.Executor(b)
	n := 30
	if v := os.Getenv("CORRAL_BENCH_N"); v != "" {
		fmt.Sscan(v, &n)
	}
	demo := demoRepoB(b)
	addr := testutil.Address()
	ctrImage := testutil.TestImageRef
	rootfs := rootfsDir(b, e)
	corralBin, err := filepath.Abs("../build/corral")
	require.NoError(b, err)

	var rows []row
	add := func(name string, d []time.Duration, extra string) row {
		r := row{name: name, p50: pct(d, 0.5), p95: pct(d, 0.95), n: len(d), extra: extra}
		rows = append(rows, r)
		return r
	}

	// One ls invocation in an existing session (full policy + change set).
	s := newSessionB(b, demo)
	corralLs := add("corral session exec ls (Go API, warm, + change set)", samples(b, n, execArgv(s, "ls", "-la"), s), "")
	cold := newSessionB(b, demo, func(c *sandbox.Config) { c.Cold = true })
	add("corral session exec ls (Go API, created on the call)", samples(b, n, execArgv(cold, "ls", "-la"), cold), "")
	var cliLs row
	if _, err := os.Stat(corralBin); err == nil {
		cliLs = add("corral run -- ls (whole CLI process)", samples(b, n, runCmd(corralBin, "--address", addr, "--namespace", testutil.Namespace,
			"--state-dir", testutil.StateDir(b), "--image", ctrImage, "run", "--repo", demo, "--", "ls", "-la")), "")
	}
	ctrLs := add("ctr run --rm (same image, snapshot)", samples(b, n, func() error {
		return runCmd("ctr", "--address", addr, "-n", testutil.Namespace, "run", "--rm", "--snapshotter", "overlayfs",
			ctrImage, fmt.Sprintf("bench-ctr-%d", time.Now().UnixNano()), "ls", "-la", "/")()
	}), "")
	runcRoot := b.TempDir()
	bundle := runcBundle(b, rootfs, demo, "ls", "-la")
	runcLs := add("runc run (bundle, plain ro bind, no seccomp)", samples(b, n, func() error {
		return runCmd("runc", "--root", runcRoot, "run", "--bundle", bundle, fmt.Sprintf("bench-%d", time.Now().UnixNano()))()
	}), "")
	var bwrapLs row
	if _, err := exec.LookPath("bwrap"); err == nil {
		bwrapLs = add("bwrap --unshare-all", samples(b, n, runCmd("bwrap", bwrapArgs(demo, "ls", "-la")...)), "")
	}

	// grep -rn over a copy of GOROOT/src.
	gosrc := goSrcCopy(b)
	gs := newSessionB(b, gosrc)
	grepArgv := []string{"grep", "-rn", "func Fprintf", "."}
	gn := max(n/3, 10)
	corralGrep := add("corral grep -rn GOROOT/src", samples(b, gn, func() error {
		r, err := gs.Exec(context.Background(), grepArgv, nil, nil)
		if err == nil && r.ExitCode != 0 {
			err = fmt.Errorf("grep exited %d: %s", r.ExitCode, r.Stderr)
		}
		return err
	}, gs), "")
	gbundle := runcBundle(b, rootfs, gosrc, grepArgv...)
	runcGrep := add("runc run grep -rn GOROOT/src (plain ro bind)", samples(b, gn, func() error {
		return runCmd("runc", "--root", runcRoot, "run", "--bundle", gbundle, fmt.Sprintf("bench-%d", time.Now().UnixNano()))()
	}), "")

	// Flat in repository size.
	small, large := benchRepo(b, 1000), benchRepo(b, 100000)
	ss, sl := newSessionB(b, small), newSessionB(b, large)
	s1k := add("corral ls, 1,000-file repo", samples(b, n, execArgv(ss, "ls"), ss), "")
	s100k := add("corral ls, 100,000-file repo", samples(b, n, execArgv(sl, "ls"), sl), "")

	// Session set-up on 100,000 files vs git's walk of the same rules.
	// NewSession computes the hidden set; the host mounts (the whiteout
	// layer's mirror) are made on the session's first call, not here:
	// mounts' BenchmarkPrepare100k measures them.
	setup := add("session set-up (hidden set; mounts come with the first call), 100k files", samples(b, 5, func() error {
		ss, err := e.NewSession(context.Background(), sandbox.SessionConfig{Repo: large, Profile: benchProfile(b)})
		if err != nil {
			return err
		}
		return ss.Close()
	}), "")
	gitCopy := b.TempDir()
	require.NoError(b, runCmd("cp", "-a", large+"/.", gitCopy)())
	require.NoError(b, runCmd("git", "-C", gitCopy, "init", "-q")())
	gitWalk := add("git ls-files --others --ignored (same rules)", samples(b, 5, runCmd("git", "-C", gitCopy, "ls-files", "--others", "--ignored", "--exclude-per-directory=.openwikiignore")), "")

	// Collecting a change set of 10 files.
	cs := newSessionB(b, large)
	var script strings.Builder
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&script, "echo page %d > openwiki/p%d.md; ", i, i)
	}
	r, err := testutil.ExecWithoutPolicy(context.Background(), cs, []string{"busybox", "sh", "-c", script.String()}, nil, nil)
	require.NoError(b, err)
	require.Equal(b, 0, r.ExitCode)
	collect := add("collect a 10-file change set (100k-file repo)", samples(b, n, func() error {
		c, err := cs.Changes()
		if err == nil && len(c.Changes) != 10 {
			err = fmt.Errorf("want 10 changes, got %d", len(c.Changes))
		}
		return err
	}), "")

	// 8 concurrent sessions vs 8 parallel ctr run --rm loops, per
	// runtime (bench_throughput_test.go), the default first.
	dur := 10 * time.Second
	tput := measureThroughput(b, sandbox.DefaultRuntime, demo, dur)
	var others []throughputRow
	for _, rt := range benchRuntimes(b) {
		if rt != sandbox.DefaultRuntime {
			others = append(others, measureThroughput(b, rt, demo, dur))
		}
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "\n## Latency (ms), %s, %d cores, n=%d per row\n\n| path | p50 | p95 | n |\n| --- | --- | --- | --- |\n", runtime.GOARCH, runtime.NumCPU(), n)
	for _, r := range rows {
		fmt.Fprintf(&sb, "| %s | %.1f | %.1f | %d |\n", r.name, ms(r.p50), ms(r.p95), r.n)
	}
	sb.WriteString(throughputTable(append([]throughputRow{tput}, others...), dur))
	fmt.Fprintf(&sb, "\n## Targets\n\n| target | measured | limit | verdict |\n| --- | --- | --- | --- |\n")
	ratio := func(a, b row) float64 { return float64(a.p50) / float64(b.p50) }
	targets := []target{
		{"session ls p50 / ctr run --rm p50", ratio(corralLs, ctrLs), 0.33, "×"},
	}
	if bwrapLs.n > 0 {
		targets = append(targets, target{"session ls p50 / bwrap p50", ratio(corralLs, bwrapLs), 3, "×"})
	}
	targets = append(targets,
		target{"grep -rn GOROOT/src p50 / runc run p50", ratio(corralGrep, runcGrep), 1.0, "×"},
		target{"ls p50 100k files / 1k files", ratio(s100k, s1k), 1.1, "×"},
		target{"session set-up 100k / git walk", ratio(setup, gitWalk), 1.0, "×"},
		target{"collect 10-file change set p50", ms(collect.p50), 10, " ms"},
		target{"ctr loops rate / corral rate, " + tput.runtime + " (want corral ≥ 2× ctr)", 1 / tput.ratio(), 1 / throughputTarget, "×"},
		target{"supervisor peak RSS, 8 sessions", tput.rssMiB, 64, " MiB"},
	)
	for _, t := range targets {
		fmt.Fprintln(&sb, t.String())
	}
	if cliLs.n > 0 {
		fmt.Fprintf(&sb, "\n(issue 2) corral run -- ls p50 %.1f ms vs ctr run --rm p50 %.1f ms; runc run p50 %.1f ms\n", ms(cliLs.p50), ms(ctrLs.p50), ms(runcLs.p50))
	}
	sb.WriteString(daemonSection(b)) // bench_daemon_test.go
	fmt.Print(sb.String())
	if out := os.Getenv("CORRAL_BENCH_OUT"); out != "" {
		require.NoError(b, os.WriteFile(out, []byte(sb.String()), 0o644))
	}
}

// throughput runs fn from k goroutines for d and returns calls per second.
func throughput(k int, d time.Duration, fn func(i int) error) float64 {
	var mu sync.Mutex
	total := 0
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := fn(i); err != nil {
					fmt.Fprintln(os.Stderr, "throughput:", err)
					return
				}
				mu.Lock()
				total++
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	return float64(total) / time.Since(start).Seconds()
}

// maxRSSMiB is this process's peak resident set (VmHWM).
func maxRSSMiB() float64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(l, "VmHWM:"), "kB")), &kb)
			return kb / 1024
		}
	}
	return 0
}

func demoRepoB(b testing.TB) string {
	b.Helper()
	dst := b.TempDir()
	src, err := filepath.Abs("../examples/demo-repo")
	require.NoError(b, err)
	require.NoError(b, runCmd("cp", "-a", src+"/.", dst)())
	require.NoError(b, os.Chmod(dst, 0o755))
	return dst
}

// newSessionB opens a docs-profile session on an executor configured by
// opts; closed at cleanup.
func newSessionB(b testing.TB, repo string, opts ...func(*sandbox.Config)) *sandbox.Session {
	b.Helper()
	if os.Getenv("CORRAL_BENCH_CHILD_REPO") == "" {
		testutil.Executor(b) // builds the test image once (the child measures corral alone)
	}
	cfg := sandbox.Config{Namespace: testutil.Namespace, StateDir: testutil.StateDir(b), Image: testutil.TestImageRef}
	for _, o := range opts {
		o(&cfg)
	}
	e, err := sandbox.New(context.Background(), cfg)
	require.NoError(b, err)
	b.Cleanup(func() { e.Close() })
	s, err := e.NewSession(context.Background(), sandbox.SessionConfig{Repo: repo, Profile: benchProfile(b)})
	require.NoError(b, err)
	b.Cleanup(func() { s.Close() })
	return s
}

func benchProfile(b testing.TB) *profiles.Profile {
	b.Helper()
	p, err := profiles.Load("docs")
	require.NoError(b, err)
	return p
}
