//go:build kube

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nodeCgroupRoot is where the node's cgroup hierarchies are, read by the
// test directly (the host's /proc/<node PID>/root/sys/fs/cgroup), never
// through the daemon.
func nodeCgroupRoot() string { return cluster.NodePath("/sys/fs/cgroup") }

// callCgroups lists the node's cgroups of session sid's containers
// (cgroupsPath /corral/corral-SID-N, in every v1 hierarchy or v2's).
func callCgroups(t *testing.T, sid string) []string {
	t.Helper()
	root := nodeCgroupRoot()
	var found []string
	for _, pattern := range []string{filepath.Join(root, "*", "corral", "corral-"+sid+"-*"), filepath.Join(root, "corral", "corral-"+sid+"-*")} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, m...)
	}
	return found
}

// procsIn returns the host pids of the processes named comm whose
// cgroup (any hierarchy) is one of session sid's containers'.
func procsIn(sid, comm string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		c, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err == nil && strings.Contains(string(cg), ":/corral/corral-"+sid+"-") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// execResult is what `corral session exec --json` prints: exit_code is
// the CLI's (124 for a limit hit), tool_exit_code the tool's.
type execResult struct {
	ToolExitCode int      `json:"tool_exit_code"`
	LimitsHit    []string `json:"limits_hit"`
}

// TestPodModeCgroups: the daemon in its Pod reaches the node's cgroups
// (not its Pod's own /sys/fs/cgroup): a call over the memory limit names
// it in limits_hit; a call canceled by its client leaves no process; a
// stray cgroup in its namespace is removed by its start-up gc; once the
// session is removed none of its containers' cgroups is left on the
// node.
func TestPodModeCgroups(t *testing.T) {
	deploy(t)
	a := newAgent(t, "cgroup-agent")
	sid := a.createSession(t)
	removed := false
	t.Cleanup(func() {
		if !removed {
			_, _ = a.corral(context.Background(), "session", "rm", sid)
		}
	})

	t.Run("memory", func(t *testing.T) {
		// grep expands a nested counted repetition into 32767² copies
		// while compiling it: past the built-in profile's 512MiB (13 s
		// on a busy 2-core machine, 680MB without a limit).
		start := time.Now()
		out, _ := a.corral(t.Context(), "session", "exec", "--json", sid, "--", "grep", "-E", "a{32767}{32767}", "README.md")
		fmt.Printf("corral-kube: memory call: %s\n", time.Since(start).Round(time.Millisecond))
		i := strings.Index(out, "{")
		var r execResult
		// The JSON result, then kubectl's "command terminated" line.
		if i < 0 || json.NewDecoder(strings.NewReader(out[i:])).Decode(&r) != nil {
			t.Fatalf("session exec --json: %q", out)
		}
		if r.ToolExitCode != 137 || !slices.Contains(r.LimitsHit, "memory") {
			t.Fatalf("tool exit %d, limits hit %v: want 137 and memory\n%s", r.ToolExitCode, r.LimitsHit, out)
		}
	})

	t.Run("canceled call", func(t *testing.T) {
		// A call that blocks (cat on a fifo no one opens for writing),
		// made by node root (an admin) with curl, which gives up after
		// 3 s: the daemon cancels the call.
		fifo := cluster.NodePath(a.volumePath() + "/block.fifo")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan string, 1)
		go func() {
			out, _ := onNode(context.Background(), "curl", "-sS", "--max-time", "3", "--unix-socket", sockPath,
				"-X", "POST", "-H", "Content-Type: application/json", "-d", `{"argv":["cat","block.fifo"]}`,
				"http://corral/v1/sessions/"+sid+"/exec").CombinedOutput()
			done <- string(out)
		}()
		deadline := time.Now().Add(3 * time.Second)
		for len(procsIn(sid, "cat")) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no cat of the call runs: %s", <-done)
			}
			time.Sleep(20 * time.Millisecond)
		}
		fmt.Printf("corral-kube: canceled call: curl: %s\n", <-done)
		// Killed with the call: gone as soon as the daemon knows the
		// client left (the kill comes from the daemon, through the node's
		// cgroups, and from the runtime).
		canceled := time.Now()
		for {
			left := procsIn(sid, "cat")
			if len(left) == 0 {
				break
			}
			if time.Since(canceled) > 10*time.Second {
				t.Fatalf("the canceled call's cat (pids %v) lives on %s after its client left", left, time.Since(canceled))
			}
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Printf("corral-kube: canceled call's processes gone %s after curl returned\n", time.Since(canceled).Round(time.Millisecond))
	})

	t.Run("stray cgroup swept at start", func(t *testing.T) {
		// A cgroup of a container no record names (what a runtime killed
		// mid-create, or a crash, leaves), made on the node in the
		// daemon's namespace: the daemon's start-up gc removes it.
		const stray = "corral-0000000000aa-1"
		var dirs []string
		hierarchies := []string{"pids", "memory"}
		if _, err := os.Stat(filepath.Join(nodeCgroupRoot(), "cgroup.controllers")); err == nil {
			hierarchies = []string{""} // cgroup v2
		}
		for _, h := range hierarchies {
			d := filepath.Join(nodeCgroupRoot(), h, "corral", stray)
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Rmdir(d) })
			dirs = append(dirs, d)
		}
		old := kubectl(t, "get", "pod", "-n", systemNS, "-l", "app.kubernetes.io/name=corral-daemon", "-o", "jsonpath={.items[0].metadata.name}")
		kubectl(t, "delete", "pod", "-n", systemNS, old, "--grace-period=0", "--force", "--wait=true")
		kubectl(t, "rollout", "status", "-n", systemNS, "ds/corral-daemon", "--timeout=180s")
		if err := waitSocket(t.Context()); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			var left []string
			for _, d := range dirs {
				if _, err := os.Stat(d); err == nil {
					left = append(left, d)
				}
			}
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				logs, _, _ := cluster.Kubectl(t.Context(), nil, "logs", "-n", systemNS, "-l", "app.kubernetes.io/name=corral-daemon", "--tail=50")
				t.Fatalf("the stray cgroups %v are left 30 s after the daemon's restart; daemon log:\n%s", left, logs)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	// What the calls (the OOM-killed one, the canceled one) and the pool
	// left: nothing of the session on the node once it is removed.
	a.must(t, "session", "rm", sid)
	removed = true
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := callCgroups(t, sid)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cgroups of session %s's containers left on the node 10 s after session rm: %v", sid, left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
