package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
)

// TestDaemonNodeCaps: a real daemon with --max-sessions 2 and
// --max-memory 100MiB. A profile whose memory limit (512MiB) is above the
// cap is refused at creation; a third session is refused with the
// cap's message; two calls of a 64MiB profile, whose limits together pass
// the cap, run one after the other (the second waits, then runs) and
// neither fails, and no two tools run at once; the containers made ahead
// of calls (started ones wait with their corral-init alone) do not count.
// Nothing is left.
func TestDaemonNodeCaps(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock, "--max-sessions", "2", "--max-memory", "100MiB", "--queue-wait", "60s")
	c := d.client()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"README.md": "# r\n", "slow.txt": slowLine()})

	prof := docsProfileFile(t, "small", "memory: 512MiB", "memory: 64MiB", "timeout: 60s", "timeout: 3s")

	_, err := c.CreateSession(ctx, api.CreateSession{Repo: repo, ReadOnly: true})
	requireAPIKind(t, err, api.KindLimit)
	require.Equal(t, `profile "docs": its memory limit of 512MiB per call is above the daemon's --max-memory 100MiB; use a profile with a smaller resources.memory`, err.Error())

	var ids []string
	for range 2 {
		s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo, ReadOnly: true, Profile: prof})
		require.NoError(t, err)
		ids = append(ids, s.ID)
	}
	_, err = c.CreateSession(ctx, api.CreateSession{Repo: repo, ReadOnly: true, Profile: prof})
	requireAPIKind(t, err, api.KindLimit)
	require.Equal(t, "sessions of this host: 2 already, the daemon's --max-sessions; remove one first", err.Error())

	type result struct {
		res *api.ExecResult
		err error
		end time.Time
	}
	first, second := make(chan result, 1), make(chan result, 1)
	run := func(id string, out chan<- result) {
		res, err := c.Exec(ctx, id, slowArgv, nil, nil)
		out <- result{res, err, time.Now()}
	}
	// The second call is queued once the daemon counts the first as
	// running (its slot and its 64MiB held), not once a listing of the
	// containers sees its tool: a listing takes a second or more at load
	// 20, and the first call lasts 3s.
	go run(ids[0], first)
	require.Eventually(t, func() bool {
		h, err := c.Health(ctx)
		return err == nil && h.Calls == api.CallsState{Running: 1, Cap: h.Calls.Cap, Memory: 64 << 20, MemoryCap: 100 << 20}
	}, 60*time.Second, 20*time.Millisecond)
	go run(ids[1], second)
	// The second waits in the queue (a call slot is free, memory is not),
	// while both sessions keep containers made ahead.
	require.Eventually(t, func() bool {
		h, err := c.Health(ctx)
		return err == nil && h.Calls == api.CallsState{Running: 1, Waiting: 1, Cap: h.Calls.Cap, Memory: 64 << 20, MemoryCap: 100 << 20}
	}, 10*time.Second, 20*time.Millisecond)

	// Until both calls have answered, no listing of the containers sees
	// two tools at once, and some listing sees one beside containers made
	// ahead (a started one waits with its corral-init alone: no call).
	var r1, r2 *result
	most, seen, ahead := 0, 0, 0
	for r1 == nil || r2 == nil {
		select {
		case r := <-first:
			r1 = &r
		case r := <-second:
			r2 = &r
		default:
			running := len(runningContainers(t, state))
			most = max(most, running)
			if running == 1 {
				seen++
				if ahead == 0 {
					ahead = len(madeAhead(t, state))
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	require.LessOrEqual(t, most, 1, "one call runs at a time")
	require.Positive(t, seen, "no listing saw a call's tool running")
	require.Positive(t, ahead, "containers made ahead exist and do not count")
	require.NoError(t, r1.err)
	require.NoError(t, r2.err, "a call over --max-memory waits; it does not fail")
	require.Contains(t, r1.res.LimitsHit, "timeout")
	require.Contains(t, r2.res.LimitsHit, "timeout")
	require.GreaterOrEqual(t, r2.end.Sub(r1.end), 2*time.Second, "the second ran after the first")

	for _, id := range ids {
		_, err := c.RemoveSession(ctx, id)
		require.NoError(t, err)
	}
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}

// TestDaemonConnectionsPerUID: a real daemon with --max-connections 8
// and --max-connections-per-uid 3. Another uid (nobody, through
// SO_PEERCRED) opens 8 connections and keeps them alive, idle: its first
// 3 are served, the rest answered 503 naming it and the flag, and root and
// a third uid still get in. Before the per-uid cap the 8 took every place
// of the host-wide cap and locked out every other caller, root included.
// Once its connections close, nobody gets in again.
func TestDaemonConnectionsPerUID(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock, "--max-connections", "8", "--max-connections-per-uid", "3")
	bin := daemonClientPath(t)
	ctx := context.Background()

	hold := exec.Command(bin, sock, "hold", "8")
	hold.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	stdin, err := hold.StdinPipe()
	require.NoError(t, err)
	stdout, err := hold.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	hold.Stderr = &stderr
	require.NoError(t, hold.Start())
	t.Cleanup(func() { stdin.Close(); _ = hold.Wait() })
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	require.NoError(t, err, stderr.String())
	var held struct{ Result []int }
	require.NoError(t, json.Unmarshal(line, &held), "%s", line)
	require.Equal(t, []int{200, 200, 200, 503, 503, 503, 503, 503}, held.Result)

	_, err = d.client().Version(ctx)
	require.NoError(t, err, "root is not locked out by nobody's connections")
	other := asUID(t, bin, 1234, 65534, sock, "list")
	require.Empty(t, other.Kind, "another uid is not locked out: %s", other.Message)
	refused := asUID(t, bin, 65534, 65534, sock, "list")
	require.Equal(t, api.KindUnavailable, refused.Kind, refused.Message)
	require.Equal(t, 503, refused.Status)
	require.Equal(t, "too many connections of uid 65534: 3 are open (the daemon's --max-connections-per-uid); retry later", refused.Message)

	require.NoError(t, stdin.Close())
	require.NoError(t, hold.Wait())
	require.Eventually(t, func() bool {
		return asUID(t, bin, 65534, 65534, sock, "list").Kind == ""
	}, 10*time.Second, 50*time.Millisecond, "closed connections free their places")
	d.stop(true)
}

// TestDaemonQueueFairAcrossUIDs: a real daemon with --max-running 1 and
// --queue-wait 12s. One uid (nobody) floods it: 8 calls of 2s each at once
// (one runs, 7 wait). A call of another uid, queued after them all, runs
// after the call running now, not behind the 7 (at least 14s, longer
// than the queue wait: 429 busy): a slot that frees goes to the owner
// running the fewest calls. Nobody's calls run or wait in vain (429);
// none fails otherwise.
func TestDaemonQueueFairAcrossUIDs(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock, "--max-running", "1", "--queue-wait", "12s")
	bin := daemonClientPath(t)
	repo := openRepo(t, map[string]string{"README.md": "# r\n", "slow.txt": slowLine()})
	prof := docsProfileFile(t, "short", "timeout: 60s", "timeout: 2s")
	hostile, victim := readOnlySessionAs(t, bin, sock, 65534, repo, prof), readOnlySessionAs(t, bin, sock, 1234, repo, prof)

	type out struct {
		o   dcOutput
		err error
	}
	flood := make(chan out, 8)
	for range 8 {
		go func() {
			cmd := exec.Command(bin, append([]string{sock, "exec", hostile}, slowArgv...)...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
			b, err := cmd.Output()
			var o dcOutput
			if err == nil {
				err = json.Unmarshal(b, &o)
			}
			flood <- out{o, err}
		}()
	}
	c := d.client()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		h, err := c.Health(ctx)
		return err == nil && h.Calls.Running == 1 && h.Calls.Waiting == 7
	}, 60*time.Second, 20*time.Millisecond, "one of nobody's calls runs, 7 wait")

	start := time.Now()
	o := asUID(t, bin, 1234, 65534, sock, "exec", victim, "cat", "README.md")
	require.Empty(t, o.Kind, "uid 1234's call, queued behind 7 of nobody's, waited %s: %s", time.Since(start), o.Message)
	var res api.ExecResult
	require.NoError(t, json.Unmarshal(o.Result, &res))
	require.Equal(t, "# r\n", string(res.Stdout))
	t.Logf("uid 1234's call waited and ran in %s behind nobody's flood", time.Since(start))

	// Nobody's calls: each ran to its timeout or waited in vain; none
	// failed otherwise.
	for range 8 {
		r := <-flood
		require.NoError(t, r.err)
		require.Contains(t, []string{"", api.KindBusy}, r.o.Kind, r.o.Message)
	}
	d.stop(true)
}

// TestDaemonRunningPerUID: a real daemon with --max-running 2 and
// --max-running-per-uid 1. One uid (nobody) starts 2 calls that run for
// their whole 15s timeout: one runs, the other waits for it although a
// slot is free, and another uid's call runs at once in that slot. Before
// the per-uid cap nobody's 2 calls held both slots and the other uid got
// 429 busy after the queue wait.
func TestDaemonRunningPerUID(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock, "--max-running", "2", "--max-running-per-uid", "1", "--queue-wait", "5s", "--grace", "1s")
	bin := daemonClientPath(t)
	repo := openRepo(t, map[string]string{"README.md": "# r\n", "slow.txt": slowLine()})
	prof := docsProfileFile(t, "long", "timeout: 60s", "timeout: 15s")
	hostile, victim := readOnlySessionAs(t, bin, sock, 65534, repo, prof), readOnlySessionAs(t, bin, sock, 1234, repo, prof)
	for range 2 {
		cmd := exec.Command(bin, append([]string{sock, "exec", hostile}, slowArgv...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	c := d.client()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		h, err := c.Health(ctx)
		return err == nil && h.Calls.Running == 1 && h.Calls.Waiting == 1
	}, 60*time.Second, 20*time.Millisecond, "one of nobody's calls runs, the other waits with a slot free")

	start := time.Now()
	o := asUID(t, bin, 1234, 65534, sock, "exec", victim, "cat", "README.md")
	require.Empty(t, o.Kind, "uid 1234's call beside nobody's long ones, after %s: %s", time.Since(start), o.Message)
	var res api.ExecResult
	require.NoError(t, json.Unmarshal(o.Result, &res))
	require.Equal(t, "# r\n", string(res.Stdout))
	t.Logf("uid 1234's call ran in %s beside nobody's long calls", time.Since(start))
	d.stop(true)
}

// TestDaemonWriteAreaPerUID: a real daemon with --max-write-area-per-uid
// 300MiB. Another uid (nobody, through SO_PEERCRED) names a profile file
// whose write_area is 128MiB: two writable sessions are made, each with a
// 128MiB tmpfs on the host; the third is refused (422 naming the figures
// and the flag) and mounts nothing; a read-only session (no write area)
// still is made; once one session is removed, a writable one fits again.
// Before the cap a uid's profile could hold write_area 16GiB of host
// memory per session, --max-sessions-per-uid times over (red team).
func TestDaemonWriteAreaPerUID(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock, "--max-write-area-per-uid", "300MiB")
	bin := daemonClientPath(t)
	repo := openRepo(t, map[string]string{"README.md": "# r\n"})
	prof := docsProfileFile(t, "big", "write_area: 64MiB", "write_area: 128MiB")

	// areas lists the sizes (bytes) of the write-area tmpfs mounts under
	// the state directory.
	areas := func() []string {
		ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(state))
		require.NoError(t, err)
		var sizes []string
		for _, m := range ms {
			if m.FSType != "tmpfs" {
				continue
			}
			for _, o := range strings.Split(m.VFSOptions, ",") {
				if v, ok := strings.CutPrefix(o, "size="); ok {
					sizes = append(sizes, v)
				}
			}
		}
		return sizes
	}
	create := func(readOnly bool) dcOutput {
		ro := "false"
		if readOnly {
			ro = "true"
		}
		return asUID(t, bin, 65534, 65534, sock, "create-json", `{"repo":"`+repo+`","read_only":`+ro+`,"profile":"`+prof+`"}`)
	}
	var ids []string
	for range 2 {
		o := create(false)
		require.Empty(t, o.Kind, o.Message)
		var s api.Session
		require.NoError(t, json.Unmarshal(o.Result, &s))
		ids = append(ids, s.ID)
	}
	require.Equal(t, []string{"131072k", "131072k"}, areas(), "two 128MiB write areas on the host")
	o := create(false)
	require.Equal(t, api.KindLimit, o.Kind, o.Message)
	require.Equal(t, 422, o.Status)
	require.Equal(t, "write areas of uid 65534: 256MiB held, and this session's 128MiB would pass the daemon's --max-write-area-per-uid 300MiB; remove a session first, or use a profile with a smaller write_area (or a read-only session)", o.Message)
	require.Len(t, areas(), 2, "a refused creation mounts nothing")
	o = create(true)
	require.Empty(t, o.Kind, "a read-only session holds no write area: %s", o.Message)
	require.Equal(t, 422, create(false).Status)

	rm := asUID(t, bin, 65534, 65534, sock, "remove", ids[0])
	require.Empty(t, rm.Kind, rm.Message)
	o = create(false)
	require.Empty(t, o.Kind, "a removed session gives its write area back: %s", o.Message)
	d.stop(true)
}

// readOnlySessionAs creates, as uid (group nogroup) through the daemon
// client bin, a read-only session over repo with the profile file prof,
// and returns its ID.
func readOnlySessionAs(t *testing.T, bin, sock string, uid int, repo, prof string) string {
	t.Helper()
	o := asUID(t, bin, uid, 65534, sock, "create-json", `{"repo":"`+repo+`","read_only":true,"profile":"`+prof+`"}`)
	require.Empty(t, o.Kind, o.Message)
	var s api.Session
	require.NoError(t, json.Unmarshal(o.Result, &s))
	return s.ID
}

// TestDaemonWarmFairAcrossUIDs: a real daemon with --max-warm 16 (a
// quarter kept for floors, half per owner). One uid (nobody) bursts in
// its two sessions: together they stop at 8 containers created ahead,
// floors included (12 held with uid 1234's floor and burst), where
// before they took every container beyond the floors the reserve allows
// (10 of 12, and uid 1234's burst found none). The same after a restart:
// adopted sessions keep their owner's share.
func TestDaemonWarmFairAcrossUIDs(t *testing.T) {
	state, sock := daemonDirs(t)
	args := []string{"--max-warm", "16", "--pool-idle", "10m", "--max-running", "8", "--max-running-per-uid", "8"}
	d := startDaemon(t, state, sock, args...)
	bin := daemonClientPath(t)
	repo := openRepo(t, map[string]string{"README.md": "# r\n"})
	prof := docsProfileFile(t, "warm")
	b := readOnlySessionAs(t, bin, sock, 1234, repo, prof)
	a1, a2 := readOnlySessionAs(t, bin, sock, 65534, repo, prof), readOnlySessionAs(t, bin, sock, 65534, repo, prof)
	ctx := context.Background()
	// settled waits until the daemon holds held containers created ahead
	// with no refill running.
	settled := func(held int, what string) {
		t.Helper()
		c := d.client()
		var last *api.WarmState
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			h, err := c.Health(ctx)
			if err == nil && h.Warm != nil {
				if last = h.Warm; last.Filling == 0 && last.Held == held {
					return
				}
			}
		}
		t.Fatalf("%s: want %d held at rest, last %+v", what, held, last)
	}
	// burst makes n calls at once as uid in session id: more than are
	// ready, so that one misses and doubles the session's depth.
	burst := func(uid int, id string, n int) {
		t.Helper()
		errs := make(chan error, n)
		for range n {
			go func() {
				cmd := exec.Command(bin, sock, "exec", id, "cat", "README.md")
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: 65534, Groups: []uint32{}}}
				out, err := cmd.Output()
				var o dcOutput
				if err == nil {
					err = json.Unmarshal(out, &o)
				}
				if err == nil && o.Kind != "" {
					err = errors.New(o.Message)
				}
				errs <- err
			}()
		}
		for range n {
			require.NoError(t, <-errs)
		}
	}
	nobodyBursts := func() {
		t.Helper()
		settled(6, "three floors")
		burst(65534, a1, 3)
		settled(8, "a1 at depth 4")
		burst(65534, a2, 3)
		settled(10, "a2 at depth 4: nobody holds 8")
		burst(65534, a1, 5)
		settled(10, "nobody's share is full: a1 stays at 4")
	}
	nobodyBursts()
	burst(1234, b, 3)
	settled(12, "uid 1234's burst grew its session to 4")
	d.stop(true)

	d = startDaemon(t, state, sock, args...)
	nobodyBursts()
	d.stop(true)
}
