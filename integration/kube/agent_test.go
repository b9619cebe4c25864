//go:build kube

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/sandbox/api"
)

// agent is an agent Pod of deploy/kubernetes/examples/agent-pod.yaml.
type agent struct {
	name, uid string
}

// newAgent starts an agent Pod named name from the example manifest,
// waits until it runs and fills its "repo" volume from the host: a small
// documentation repository with a secret the secrets hide list covers.
func newAgent(t testing.TB, name string) *agent {
	t.Helper()
	ctx := t.Context()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "deploy", "kubernetes", "examples", "agent-pod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.Replace(string(b), "\n  name: agent\n", "\n  name: "+name+"\n", 1)
	if out, err := cluster.Apply(ctx, manifest, false); err != nil {
		t.Fatal(out, err)
	}
	t.Cleanup(func() {
		_, _, _ = cluster.Kubectl(context.Background(), nil, "delete", "pod", "-n", agentNS, name, "--wait=false", "--ignore-not-found")
	})
	kubectl(t, "wait", "-n", agentNS, "--for=condition=Ready", "pod/"+name, "--timeout=120s")
	a := &agent{name: name, uid: kubectl(t, "get", "pod", "-n", agentNS, name, "-o", "jsonpath={.metadata.uid}")}
	repo := cluster.NodePath(a.volumePath())
	for rel, text := range map[string]string{
		"README.md":              "# " + name + "\n\nTODO: document the frobnicator.\n",
		"src/frob.go":            "package src\n\n// Frob frobnicates. TODO: say how.\nfunc Frob() {}\n",
		".env":                   "API_TOKEN=hunter2-" + name + "\n",
		"openwiki/index.md":      "# Wiki of " + name + "\n",
		"openwiki/pages/frob.md": "Frob: undocumented.\n",
	} {
		p := filepath.Join(repo, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// volumePath is the node path of the agent's "repo" volume.
func (a *agent) volumePath() string {
	return "/var/lib/kubelet/pods/" + a.uid + "/volumes/kubernetes.io~empty-dir/repo"
}

// repoArgs are the session create flags that name the agent's repository:
// its own volume "repo", which the daemon finds under the kubelet's pods
// directory from the caller's Pod UID.
func (a *agent) repoArgs() []string {
	return []string{"--volume", "repo"}
}

// corral runs the agent image's corral in the agent Pod (CORRAL_DAEMON
// names the socket) and returns its combined output.
func (a *agent) corral(ctx context.Context, args ...string) (string, error) {
	out, errOut, err := cluster.Kubectl(ctx, nil, append([]string{"exec", "-n", agentNS, a.name, "--", "/usr/local/bin/corral"}, args...)...)
	return out + errOut, err
}

func (a *agent) must(t testing.TB, args ...string) string {
	t.Helper()
	out, err := a.corral(t.Context(), args...)
	if err != nil {
		t.Fatalf("corral %s in %s: %v\n%s", strings.Join(args, " "), a.name, err, out)
	}
	return out
}

type sessionRecord struct {
	ID string `json:"id"`
}

// createSession makes a session of the agent's own repository volume.
func (a *agent) createSession(t testing.TB) string {
	t.Helper()
	out := a.must(t, append([]string{"session", "create", "--json"}, a.repoArgs()...)...)
	var rec sessionRecord
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rec); err != nil || rec.ID == "" {
		t.Fatalf("session create: %v: %s", err, out)
	}
	return rec.ID
}

// TestAgentDocumentationTask: an agent Pod documents its repository
// through its node's daemon: list, read, search, exec, write, diff, apply
// (dry run); the secret in its repository stays hidden throughout.
func TestAgentDocumentationTask(t *testing.T) {
	deploy(t)
	a := newAgent(t, "doc-agent")
	id := a.createSession(t)
	t.Cleanup(func() { _, _ = a.corral(context.Background(), "session", "rm", id) })

	exec := func(argv ...string) string {
		return a.must(t, append([]string{"session", "exec", id, "--"}, argv...)...)
	}
	if got := exec("ls", "-a"); !strings.Contains(got, "README.md") || strings.Contains(got, ".env") {
		t.Errorf("ls -a: %q (want README.md, no .env)", got)
	}
	if got := exec("cat", "README.md"); !strings.Contains(got, "# doc-agent") {
		t.Errorf("cat: %q", got)
	}
	if got := exec("grep", "-rn", "TODO", "."); !strings.Contains(got, "src/frob.go:3:") || strings.Contains(got, "hunter2") {
		t.Errorf("grep: %q", got)
	}
	// grep finds nothing (exit 1): the hidden .env is not there to search.
	if got, err := a.corral(t.Context(), "session", "exec", id, "--", "grep", "-rn", "hunter2", "."); err == nil || strings.Contains(got, "hunter2") {
		t.Errorf("grep -rn hunter2: err %v, %q: want no match", err, got)
	}
	if out, err := a.corral(t.Context(), "session", "exec", id, "--", "cat", ".env"); err == nil || strings.Contains(out, "hunter2") {
		t.Errorf("cat .env: err %v, %q: want a failure without the secret", err, out)
	}
	exec("cp", "src/frob.go", "openwiki/pages/frob-source.md")
	exec("cp", "README.md", "openwiki/pages/readme.md")
	if got := exec("cat", "openwiki/pages/readme.md"); !strings.Contains(got, "# doc-agent") {
		t.Errorf("the write is not seen by the next call: %q", got)
	}
	diff := a.must(t, "session", "diff", id)
	for _, want := range []string{"openwiki/pages/readme.md", "+# doc-agent", "openwiki/pages/frob-source.md", "+// Frob frobnicates."} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, diff)
		}
	}
	if got := a.must(t, "session", "apply", id); !strings.Contains(got, "openwiki/pages/readme.md") {
		t.Errorf("apply (dry run): %q", got)
	}
	// A dry run writes nothing into the repository.
	if _, err := os.Stat(cluster.NodePath(a.volumePath() + "/openwiki/pages/readme.md")); err == nil {
		t.Errorf("a dry run wrote openwiki/pages/readme.md into the repository")
	}
}

// TestDaemonPodRestart: deleting the daemon's Pod (a crash or a rollout):
// the DaemonSet starts a new one, which re-adopts the session with its
// writes; the agent goes on with it.
func TestDaemonPodRestart(t *testing.T) {
	deploy(t)
	a := newAgent(t, "restart-agent")
	id := a.createSession(t)
	t.Cleanup(func() { _, _ = a.corral(context.Background(), "session", "rm", id) })
	a.must(t, "session", "exec", id, "--", "cp", "README.md", "openwiki/before.md")

	old := kubectl(t, "get", "pod", "-n", systemNS, "-l", "app.kubernetes.io/name=corral-daemon", "-o", "jsonpath={.items[0].metadata.name}")
	kubectl(t, "delete", "pod", "-n", systemNS, old, "--grace-period=0", "--force", "--wait=true")
	kubectl(t, "rollout", "status", "-n", systemNS, "ds/corral-daemon", "--timeout=180s")
	if err := waitSocket(t.Context()); err != nil {
		t.Fatal(err)
	}
	if now := kubectl(t, "get", "pod", "-n", systemNS, "-l", "app.kubernetes.io/name=corral-daemon", "-o", "jsonpath={.items[0].metadata.name}"); now == old {
		t.Fatalf("the daemon's Pod is still %s", now)
	}
	if got := a.must(t, "session", "exec", id, "--", "cat", "openwiki/before.md"); !strings.Contains(got, "# restart-agent") {
		t.Errorf("the write before the restart: %q", got)
	}
	a.must(t, "session", "exec", id, "--", "touch", "openwiki/after.md")
	diff := a.must(t, "session", "diff", id)
	for _, want := range []string{"openwiki/before.md", "openwiki/after.md"} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff lacks %s:\n%s", want, diff)
		}
	}
}

// TestFourPodsFiftyCalls: four agent Pods, each its own session, 50 calls
// each at the same time: no failure; once the Pods are deleted and their
// sessions removed, no container of theirs is left.
func TestFourPodsFiftyCalls(t *testing.T) {
	deploy(t)
	type job struct {
		a  *agent
		id string
	}
	var jobs []job
	for i := range 4 {
		a := newAgent(t, fmt.Sprintf("load-%d", i))
		jobs = append(jobs, job{a, a.createSession(t)})
	}
	start := time.Now()
	results := make([]benchResult, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			out, errOut, err := cluster.Kubectl(t.Context(), nil, "exec", "-n", agentNS, j.a.name, "--",
				"/usr/local/bin/callbench", "-n", "50", "/usr/local/bin/corral", "session", "exec", j.id, "--", "grep", "-rn", "TODO", ".")
			if err != nil {
				errs[i] = fmt.Errorf("%w: %s%s", err, out, errOut)
				return
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &results[i]); err != nil {
				errs[i] = fmt.Errorf("%w: %s", err, out)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	failures := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		failures += r.Failures
		if r.Failures != 0 {
			t.Errorf("%s: %d failures, first: %s", jobs[i].a.name, r.Failures, r.FirstError)
		}
	}
	fmt.Printf("corral-kube: 4 pods x 50 calls: %d failures in %s (p50 per pod: %.0f/%.0f/%.0f/%.0f ms)\n", failures, wall.Round(time.Millisecond),
		results[0].P50, results[1].P50, results[2].P50, results[3].P50)
	for _, j := range jobs {
		j.a.must(t, "session", "rm", j.id)
		kubectl(t, "delete", "pod", "-n", agentNS, j.a.name, "--wait=true")
	}
	// No tool container of these sessions is left in corral's namespace.
	out, err := exec.CommandContext(t.Context(), "ctr", "--address", cluster.Containerd, "-n", "corral", "containers", "ls", "-q").CombinedOutput()
	if err != nil {
		t.Fatal(err, string(out))
	}
	for _, j := range jobs {
		if strings.Contains(string(out), j.id) {
			t.Errorf("containers of session %s left:\n%s", j.id, out)
		}
	}
}

// hostAPI asks the daemon's API from the host (root: an admin) through
// the node's socket, and returns the status code and body.
func hostAPI(ctx context.Context, path string) (int, string, error) {
	out, err := onNode(ctx, "curl", "-sS", "--unix-socket", sockPath,
		"-w", "\n%{http_code}", "http://corral"+path).Output()
	if err != nil {
		return 0, string(out), fmt.Errorf("curl %s: %w", path, err)
	}
	s := strings.TrimSpace(string(out))
	i := strings.LastIndex(s, "\n")
	code := 0
	fmt.Sscan(s[i+1:], &code)
	return code, s[:max(i, 0)], nil
}

// TestSecondPodIsolation: a second agent Pod cannot see, exec in, read
// from, diff, apply or remove the first one's session, gets the same
// answer as for a session that does not exist, and cannot name the first
// one's repository: neither by its node path nor through its own volume.
func TestSecondPodIsolation(t *testing.T) {
	deploy(t)
	first, second := newAgent(t, "owner-agent"), newAgent(t, "other-agent")
	id := first.createSession(t)
	t.Cleanup(func() { _, _ = first.corral(context.Background(), "session", "rm", id) })
	first.must(t, "session", "exec", id, "--", "cp", "README.md", "openwiki/mine.md")

	if got := second.must(t, "session", "ls"); strings.Contains(got, id) {
		t.Errorf("the second Pod lists the first one's session:\n%s", got)
	}
	missing := "0123456789abcdef0123456789abcdef"
	for _, args := range [][]string{
		{"session", "exec", "ID", "--", "cat", "README.md"},
		{"session", "diff", "ID"},
		{"session", "apply", "ID"},
		{"session", "rm", "ID"},
	} {
		answer := func(sid string) string {
			a := append([]string{}, args...)
			for i := range a {
				if a[i] == "ID" {
					a[i] = sid
				}
			}
			out, err := second.corral(t.Context(), a...)
			if err == nil {
				t.Errorf("corral %s from the second Pod succeeded: %s", strings.Join(a, " "), out)
			}
			return strings.ReplaceAll(out, sid, "ID")
		}
		theirs, none := answer(id), answer(missing)
		if theirs != none || !strings.Contains(theirs, "not found") || strings.Contains(theirs, "owner-agent") {
			t.Errorf("%s: for the first Pod's session %q, for none %q; want the same not-found answer", args[1], theirs, none)
		}
	}
	// The first Pod's repository, named from the second: by node path
	// (Pod mode takes no repo) or climbing out of the second's own volume.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--repo", "/repo"}, "volume"},
		{[]string{"--volume", "repo/../../../" + first.uid + "/volumes/kubernetes.io~empty-dir/repo"}, ""},
		{[]string{"--volume", "../" + first.uid}, ""},
	} {
		out, err := second.corral(t.Context(), append([]string{"session", "create"}, tc.args...)...)
		if err == nil || strings.Contains(out, "owner-agent") || !strings.Contains(out, tc.want) {
			t.Errorf("session create %v from the second Pod: err %v, %q (want a refusal naming %q)", tc.args, err, out, tc.want)
		}
	}
	// Its own volume of the same name is its own repository.
	sid := second.createSession(t)
	t.Cleanup(func() { _, _ = second.corral(context.Background(), "session", "rm", sid) })
	if got := second.must(t, "session", "exec", sid, "--", "cat", "README.md"); !strings.Contains(got, "# other-agent") {
		t.Errorf("the second Pod's own repo: %q", got)
	}
}

// TestAgentPodDeletion: deleting an agent Pod ends its sessions, and each
// change set is kept as a patch on the node, readable through the API.
func TestAgentPodDeletion(t *testing.T) {
	deploy(t)
	a := newAgent(t, "deleted-agent")
	id := a.createSession(t)
	a.must(t, "session", "exec", id, "--", "cp", "README.md", "openwiki/pages/kept.md")
	kubectl(t, "delete", "pod", "-n", agentNS, a.name, "--wait=true")

	var list string
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body, err := hostAPI(t.Context(), "/v1/patches")
		if err != nil {
			t.Fatal(err)
		}
		if code == 200 && strings.Contains(body, id) {
			list = body
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no patch of session %s after its Pod's deletion: %d %s", id, code, body)
		}
		time.Sleep(time.Second)
	}
	var patches []api.PodPatch
	if err := json.Unmarshal([]byte(list), &patches); err != nil {
		t.Fatalf("GET /v1/patches: %v: %s", err, list)
	}
	pid := ""
	for _, p := range patches {
		if p.ID == id && p.PodUID == a.uid && slices.Contains(p.Files, "openwiki/pages/kept.md") {
			pid = p.ID
		}
	}
	if pid == "" {
		t.Fatalf("no patch of session %s, Pod %s, changing openwiki/pages/kept.md in %s", id, a.uid, list)
	}
	code, body, err := hostAPI(t.Context(), "/v1/patches/"+pid)
	if err != nil || code != 200 || !strings.Contains(body, "+# deleted-agent") {
		t.Fatalf("GET /v1/patches/%s: %d %v\n%s", pid, code, err, body)
	}
	if code, body, _ := hostAPI(t.Context(), "/v1/sessions/"+id); code != 404 {
		t.Errorf("the deleted Pod's session still answers: %d %s", code, body)
	}
}
