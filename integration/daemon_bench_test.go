package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/client"
	"github.com/stretchr/testify/require"
)

// BenchmarkDaemonOverhead measures what the daemon's API adds to a call:
// the same calls on an in-process session (sandbox.Session, containers
// created ahead) and through a daemon's socket (sandbox/client),
// interleaved round by round so that both see the same machine. It also
// reports the daemon's resident memory idle and with sessions open.
//
//	go test -run '^$' -bench BenchmarkDaemonOverhead -benchtime 1x ./integration/
func BenchmarkDaemonOverhead(b *testing.B) {
	rounds, think := 12, time.Second
	if s := os.Getenv("CORRAL_BENCH_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	e := testutil.Executor(b)
	ctx := context.Background()
	repo := daemonBenchRepo(b)

	dir, err := os.MkdirTemp("", "corral-bench-daemon-")
	require.NoError(b, err)
	defer os.RemoveAll(dir)
	state, sock := dir+"/state", dir+"/corral.sock"
	d := startDaemon(b, state, sock)
	defer d.stop(true)
	rssIdle := rssKiB(b, d.cmd.Process.Pid)

	in, err := e.CreateSession(ctx, sandbox.SessionConfig{Repo: repo, Profile: mustProfile(b, "docs")}, "docs")
	require.NoError(b, err)
	defer func() { in.Close(); _ = e.RemoveSession(ctx, in.ID) }()
	c := client.New(sock)
	defer c.Close()
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
	require.NoError(b, err)

	type op struct {
		name   string
		direct func() error
		api    func() error
	}
	argv := []string{"cat", "README.md"}
	ops := []op{
		{"check (policy only)", func() error { _, err := in.Check(argv); return err },
			func() error { _, err := c.Check(ctx, s.ID, argv); return err }},
		{"exec cat README.md", func() error { _, err := in.Exec(ctx, argv, nil, nil); return err },
			func() error { _, err := c.Exec(ctx, s.ID, argv, nil, nil); return err }},
		{"exec, streamed", func() error { _, err := in.Exec(ctx, argv, discard{}, discard{}); return err },
			func() error { _, err := c.Exec(ctx, s.ID, argv, discard{}, discard{}); return err }},
		{"read README.md", func() error { _, err := in.Read(ctx, "README.md", sandbox.ReadOptions{}); return err },
			func() error { _, err := c.Read(ctx, s.ID, api.Read{Path: "README.md"}); return err }},
	}
	var rows []string
	for _, o := range ops {
		var direct, viaAPI []time.Duration
		for i := 0; i < rounds; i++ {
			// Both sessions prepare their next container after an answer;
			// each call gets the think time to do so, as an agent's would
			// (the in-process one is also waited for with Idle).
			t0 := time.Now()
			require.NoError(b, o.direct(), o.name)
			direct = append(direct, time.Since(t0))
			in.Idle()
			time.Sleep(think)
			t0 = time.Now()
			require.NoError(b, o.api(), o.name)
			viaAPI = append(viaAPI, time.Since(t0))
			time.Sleep(think)
		}
		pd, pa := p50(direct), p50(viaAPI)
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %+.2f ms |", o.name, msOf(pd), msOf(pa), float64(pa-pd)/1e6))
		b.ReportMetric(float64(pa-pd)/1e6, "ms-overhead-"+strings.Fields(o.name)[0])
	}
	rssOne := rssKiB(b, d.cmd.Process.Pid)
	const n = 10
	for i := 0; i < n; i++ {
		x, err := c.CreateSession(ctx, api.CreateSession{Repo: repo, ReadOnly: true})
		require.NoError(b, err)
		_, err = c.Exec(ctx, x.ID, argv, nil, nil)
		require.NoError(b, err)
	}
	time.Sleep(2 * time.Second)
	rssN := rssKiB(b, d.cmd.Process.Pid)
	fmt.Printf("\n| call (p50 of %d, interleaved) | in-process | through the daemon | overhead |\n| --- | --- | --- | --- |\n%s\n", rounds, strings.Join(rows, "\n"))
	fmt.Printf("\ndaemon RSS: idle %.1f MiB; 1 session %.1f MiB; %d more sessions (each used once) %.1f MiB (%.2f MiB per session)\n",
		float64(rssIdle)/1024, float64(rssOne)/1024, n, float64(rssN)/1024, float64(rssN-rssOne)/1024/n)
	list, err := c.Sessions(ctx)
	require.NoError(b, err)
	for _, x := range list {
		_, err := c.RemoveSession(ctx, x.ID)
		require.NoError(b, err)
	}
}

func mustProfile(b *testing.B, name string) *profiles.Profile {
	p, err := profiles.Load(name)
	require.NoError(b, err)
	return p
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func msOf(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func rssKiB(b *testing.B, pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

func daemonBenchRepo(b testing.TB) string {
	dir, err := os.MkdirTemp("", "corral-bench-repo-")
	require.NoError(b, err)
	b.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(b, os.Chmod(dir, 0o755))
	testutil.Tree(b, dir, map[string]string{"README.md": "# bench\n", "openwiki/index.md": "# i\n", "src/a.go": "package a\n"})
	return dir
}
