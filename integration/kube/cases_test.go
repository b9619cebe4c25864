//go:build kube

package kube

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/typeurl/v2"
)

// casesImage holds the hostile-case table as a test binary (integration's
// TestCasesInPod, tag kubepod), its testdata, and git with its libraries
// (the table's oracle asks git check-ignore which files are hidden).
const casesImage = "corral.local/corral/cases:dev"

// TestCasesInAgentPod: the hostile-case table (integration/testdata,
// the calls TestCasesThroughDaemon makes) run from inside an agent Pod
// against the node's DaemonSet daemon in Pod mode. Each case's repository
// is a directory of the Pod's own emptyDir "repo", each session names it
// {volume: repo, subPath}; the cases run in parallel in one Pod. Every
// case asserts what it asserts from the host: the exact refusal (kind,
// index, token, rule, one line), nothing hidden in any output, the
// repository byte-identical, nothing written out of the session's scope.
// What the Pod cannot check, containerd's view of what ran, is checked
// here, on the node's containerd: each session's tasks that ended on
// their own (a tool ran) are exactly the calls the Pod's ledger says ran,
// the sessions that only refuse none. (The daemon starts containers ahead
// of calls, their corral-init waiting for a request, so a task start is
// no call; one destroyed unused is killed, exit 128+SIGKILL, and is not
// counted.)
// One subtest per case reports the Pod's verdict.
func TestCasesInAgentPod(t *testing.T) {
	deploy(t)
	ctx := t.Context()
	dir := t.TempDir()
	root := RepoRoot()
	prepared := time.Now()

	bin := filepath.Join(dir, "cases.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-tags", "kubepod", "-o", bin, "./integration/")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c -tags kubepod ./integration/: %v\n%s", err, out)
	}
	f := imageFiles{seen: map[string]bool{}}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git (the table's oracle, copied into the Pod's image): %v", err)
	}
	if err := f.program(ctx, git, "/usr/bin/git"); err != nil {
		t.Fatal(err)
	}
	for src, dst := range map[string]string{
		bin: "/usr/local/bin/cases.test",
		filepath.Join(root, "integration", "testdata", "cases.json"):  "/cases/testdata/cases.json",
		filepath.Join(root, "integration", "testdata", "expect.yaml"): "/cases/testdata/expect.yaml",
		filepath.Join(cluster.Bin, "kube-pause"):                      "/pause",
	} {
		if err := f.add(src, dst); err != nil {
			t.Fatal(err)
		}
	}
	archive, err := cluster.MakeImage(ctx, dir, casesImage, []string{"/pause"}, f.args...)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.ImportImage(ctx, archive); err != nil {
		t.Fatal(err)
	}

	// The example agent Pod, running the table: more memory and /tmp for
	// four cases at once (their oracles' mirrors), the table's testdata
	// as its working directory, its volume "repo" for the repositories.
	b, err := os.ReadFile(filepath.Join(root, "deploy", "kubernetes", "examples", "agent-pod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := string(b)
	const name = "cases-agent"
	for _, r := range [][2]string{
		{"\n  name: agent\n", "\n  name: " + name + "\n"},
		{"image: " + agentImage + "\n", "image: " + casesImage + "\n    workingDir: /cases\n"},
		{"    - {name: HOME, value: /tmp}\n", "    - {name: HOME, value: /tmp}\n    - {name: CORRAL_CASES_VOLUME, value: repo=/repo}\n"},
		{"limits: {memory: 256Mi}", "limits: {memory: 1Gi}"},
		{"emptyDir: {sizeLimit: 64Mi}", "emptyDir: {sizeLimit: 512Mi}"},
	} {
		if !strings.Contains(manifest, r[0]) {
			t.Fatalf("the example agent Pod has no %q", r[0])
		}
		manifest = strings.Replace(manifest, r[0], r[1], 1)
	}
	if out, err := cluster.Apply(ctx, manifest, false); err != nil {
		t.Fatal(out, err)
	}
	t.Cleanup(func() {
		_, _, _ = cluster.Kubectl(context.Background(), nil, "delete", "pod", "-n", agentNS, name, "--wait=false", "--ignore-not-found")
	})
	kubectl(t, "wait", "-n", agentNS, "--for=condition=Ready", "pod/"+name, "--timeout=120s")

	exits := watchCallExits(t)
	start := time.Now()
	prep := start.Sub(prepared)
	out, errOut, runErr := cluster.Kubectl(ctx, nil, "exec", "-n", agentNS, name, "--",
		"/usr/local/bin/cases.test", "-test.run", "^TestCasesInPod$", "-test.v", "-test.parallel", "4", "-test.timeout", "20m")
	wall := time.Since(start)
	log := filepath.Join(os.TempDir(), filepath.Base(cluster.State)+"-cases-in-pod.log")
	if err := os.WriteFile(log, []byte(out+errOut), 0o644); err != nil {
		t.Fatal(err)
	}
	v := parseTestV(out)

	// The Pod's verdict, case by case.
	ran := regexp.MustCompile(`(\d+) of (\d+) cases make calls through the daemon`).FindStringSubmatch(out)
	if ran == nil || ran[1] == "0" || len(v.cases) == 0 || fmt.Sprint(len(v.cases)) != ran[1] {
		t.Fatalf("the Pod ran %d cases (it says %q): want every case that makes calls, at least one (exit: %v; output in %s)\n%s",
			len(v.cases), ran, runErr, log, tail(out+errOut, 40))
	}
	failed := 0
	for _, id := range v.order {
		if v.cases[id].verdict != "PASS" {
			failed++
		}
		t.Run(id, func(t *testing.T) {
			switch r := v.cases[id]; r.verdict {
			case "PASS":
			case "FAIL":
				t.Errorf("failed in the Pod:\n%s", tail(strings.Join(r.lines, "\n"), 80))
			default:
				t.Errorf("no verdict %q in the Pod:\n%s", r.verdict, tail(strings.Join(r.lines, "\n"), 80))
			}
		})
	}
	// Every skip is a call of the opt-in git profile, which a Pod cannot
	// name (a built-in profile only; none offers git).
	if n := strings.Count(out, "git profile: in Pod mode a session names a built-in profile only"); n != v.skipped {
		t.Errorf("%d subtests skipped, %d of them for the git profile: a skip for another reason (output in %s)", v.skipped, n, log)
	}
	if runErr != nil || !v.passed {
		last := "" // the subtests above say what failed
		if failed == 0 {
			last = "\n" + tail(out+errOut, 40)
		}
		t.Fatalf("the table in the Pod: exit %v, TestCasesInPod passed: %v, %d cases failed (output in %s)%s", runErr, v.passed, failed, log, last)
	}

	// The task starts, from the node containerd's events.
	i := strings.LastIndex(out, "corral-cases-ledger: ")
	if i < 0 {
		t.Fatalf("no ledger in the Pod's output (%s)", log)
	}
	var ledger []struct {
		Case    string `json:"case"`
		Session string `json:"session"`
		Starts  int    `json:"starts"`
	}
	line, _, _ := strings.Cut(out[i+len("corral-cases-ledger: "):], "\n")
	if err := json.Unmarshal([]byte(line), &ledger); err != nil || len(ledger) == 0 {
		t.Fatalf("the ledger %.200q: %v (want one entry per session)", line, err)
	}
	want := map[string]int{}
	total, quiet := 0, 0
	for _, e := range ledger {
		want[e.Session] = e.Starts
		total += e.Starts
		if e.Starts == 0 {
			quiet++
		}
	}
	got := exits.settle(want, 15*time.Second)
	for _, e := range ledger {
		if got[e.Session] != e.Starts {
			t.Errorf("%s: session %s had %d tasks end on their own on the node's containerd, its calls ran %d", e.Case, e.Session, got[e.Session], e.Starts)
		}
	}
	fmt.Printf("corral-kube: hostile-case table from an agent Pod: %d cases, %d subtests (%d skipped: git profile), in %s "+
		"(after %s building its image and starting the Pod); %d sessions' task exits checked on the node's containerd "+
		"(%d calls ran; %d sessions that only refuse ran none)\n",
		len(v.cases), v.subtests, v.skipped, wall.Round(time.Second), prep.Round(time.Second), len(ledger), total, quiet)
}

// callExits counts, by session, the tasks of the node containerd's
// namespace "corral" whose init ended on its own (any exit status but
// 128+SIGKILL), from containerd's own events: each is a call whose tool
// ran. A container the daemon started ahead and destroyed unused is
// killed while its corral-init waits for a request (exit 137).
type callExits struct {
	mu     sync.Mutex
	counts map[string]int
}

var sessionContainer = regexp.MustCompile(`^corral-([0-9a-f]+)-[0-9]+$`)

// watchCallExits subscribes to the node containerd's task exits until t
// ends; it returns once the subscription is made.
func watchCallExits(t *testing.T) *callExits {
	t.Helper()
	c, err := containerd.New(cluster.Containerd, containerd.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("the node's containerd: %v", err)
	}
	ctx, cancel := context.WithCancel(namespaces.WithNamespace(context.Background(), "corral"))
	t.Cleanup(func() { cancel(); c.Close() })
	ch, errs := c.Subscribe(ctx, `topic=="/tasks/exit",namespace=="corral"`)
	w := &callExits{counts: map[string]int{}}
	go func() {
		for {
			select {
			case env := <-ch:
				if env == nil || env.Event == nil {
					continue
				}
				v, err := typeurl.UnmarshalAny(env.Event)
				if err != nil {
					continue
				}
				if ev, ok := v.(*apievents.TaskExit); ok && ev.ID == ev.ContainerID && ev.ExitStatus != 128+uint32(syscall.SIGKILL) {
					if m := sessionContainer.FindStringSubmatch(ev.ContainerID); m != nil {
						w.mu.Lock()
						w.counts[m[1]]++
						w.mu.Unlock()
					}
				}
			case <-errs:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	// A subscription is made on containerd's first reply; an event
	// published before it would be lost. Ask something to be sure.
	if _, err := c.Version(ctx); err != nil {
		t.Fatalf("the node's containerd: %v", err)
	}
	return w
}

// settle waits until every session of want has at least its count (or
// timeout), then a moment more for exits beyond it, and returns the
// counts of want's sessions.
func (w *callExits) settle(want map[string]int, timeout time.Duration) map[string]int {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		short := false
		for s, n := range want {
			if w.counts[s] < n {
				short = true
				break
			}
		}
		w.mu.Unlock()
		if !short {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	w.mu.Lock()
	defer w.mu.Unlock()
	got := map[string]int{}
	for s := range want {
		got[s] = w.counts[s]
	}
	return got
}

// testV is what `go test -v` printed of TestCasesInPod.
type testV struct {
	order    []string // case ids, as first run
	cases    map[string]*caseResult
	subtests int  // below the cases
	skipped  int  // of those
	passed   bool // "--- PASS: TestCasesInPod"
}

type caseResult struct {
	verdict string   // PASS, FAIL or SKIP
	lines   []string // what the case and its subtests printed
}

var (
	// go test -v streams what a test prints below a line naming it.
	headerLine = regexp.MustCompile(`^=== (?:RUN|NAME|CONT|PAUSE)\s+(\S+)$`)
	// and prints each result when its parent ends, indented by depth.
	resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): TestCasesInPod(/\S+)? \(`)
)

func parseTestV(out string) testV {
	v := testV{cases: map[string]*caseResult{}}
	result := func(id string) *caseResult {
		r := v.cases[id]
		if r == nil {
			r = &caseResult{}
			v.cases[id] = r
			v.order = append(v.order, id)
		}
		return r
	}
	cur := "" // the case id the lines are about
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		l := sc.Text()
		if m := headerLine.FindStringSubmatch(l); m != nil {
			cur = ""
			if rest, ok := strings.CutPrefix(m[1], "TestCasesInPod/"); ok {
				cur, _, _ = strings.Cut(rest, "/")
				result(cur)
			}
			continue
		}
		m := resultLine.FindStringSubmatch(l)
		if m == nil {
			if cur != "" {
				r := result(cur)
				r.lines = append(r.lines, l)
			}
			continue
		}
		cur = ""
		name := strings.TrimPrefix(m[2], "/")
		switch {
		case name == "":
			v.passed = m[1] == "PASS"
		case !strings.Contains(name, "/"):
			result(name).verdict = m[1]
		default:
			v.subtests++
			if m[1] == "SKIP" {
				v.skipped++
			}
		}
	}
	return v
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// TestParseTestV: the Pod's verdict is read case by case from go test
// -v's streamed output (what it prints, its results after the parent),
// so that a failed case fails its subtest with its own messages.
func TestParseTestV(t *testing.T) {
	out := `=== RUN   TestCasesInPod
=== RUN   TestCasesInPod/A
=== PAUSE TestCasesInPod/A
=== RUN   TestCasesInPod/B
=== PAUSE TestCasesInPod/B
=== NAME  TestCasesInPod
    daemon_cases_test.go:108: 2 of 3 cases make calls through the daemon
=== CONT  TestCasesInPod/A
=== RUN   TestCasesInPod/A/argv0
=== CONT  TestCasesInPod/B
=== RUN   TestCasesInPod/B/argv0
    daemon_cases_test.go:180: git profile: in Pod mode a session names a built-in profile only
=== NAME  TestCasesInPod/A/argv0
    cases_harness_test.go:680: argv ["cat" ".env"] ran
        more
--- FAIL: TestCasesInPod (0.00s)
    --- FAIL: TestCasesInPod/A (0.01s)
        --- FAIL: TestCasesInPod/A/argv0 (0.01s)
    --- PASS: TestCasesInPod/B (0.01s)
        --- SKIP: TestCasesInPod/B/argv0 (0.00s)
FAIL
`
	v := parseTestV(out)
	if v.passed || strings.Join(v.order, " ") != "A B" || v.subtests != 2 || v.skipped != 1 {
		t.Fatalf("parsed %+v", v)
	}
	if a := v.cases["A"]; a.verdict != "FAIL" || !strings.Contains(strings.Join(a.lines, "\n"), `argv ["cat" ".env"] ran`) {
		t.Errorf("A: %+v", a)
	}
	if b := v.cases["B"]; b.verdict != "PASS" || len(b.lines) != 1 {
		t.Errorf("B: %+v", b)
	}
}
