//go:build kube

package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// cluster is shared by every test of the package: started by TestMain, or
// attached to when one is running already (then left running).
var cluster *Cluster

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "kube tests need root")
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, started, err := Up(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cluster = c
	code := m.Run()
	if started && os.Getenv("CORRAL_KUBE_KEEP") == "" {
		keep := ""
		if code != 0 {
			// Named after the state directory, so that two clusters on
			// one machine (CORRAL_KUBE_STATE) keep their logs apart.
			keep = filepath.Join(os.TempDir(), filepath.Base(c.State)+"-logs")
			fmt.Fprintf(os.Stderr, "cluster logs kept in %s\n", keep)
		}
		if err := c.Down(ctx, keep, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return code
}

func kubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, _, err := cluster.Kubectl(t.Context(), nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestNodeReady(t *testing.T) {
	got := kubectl(t, "get", "node", cluster.Node, "-o",
		`jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.nodeInfo.kubeletVersion} {.status.nodeInfo.containerRuntimeVersion}`)
	if want := "True v1.37.2 containerd://"; !strings.HasPrefix(got, want) {
		t.Fatalf("node: got %q, want prefix %q", got, want)
	}
}

// TestPodSecurityDryRun: the apiserver's admission configuration makes
// "baseline" the enforced default, and --dry-run=server runs it.
func TestPodSecurityDryRun(t *testing.T) {
	ns := "kube-test-" + strings.ToLower(t.Name())
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() {
		_, _, _ = cluster.Kubectl(context.Background(), nil, "delete", "namespace", ns, "--wait=false")
	})
	// pod returns a Pod manifest with extra lines under spec and under its
	// one container.
	pod := func(spec, container string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ` + ns + `}
spec:` + spec + `
  containers:
  - name: c
    image: corral.local/kube/pause:1
    imagePullPolicy: Never` + container + "\n"
	}
	for _, tc := range []struct {
		name, spec, container, want string
		ok                          bool
	}{
		{"plain", "", "", `pod/p created \(server dry run\)`, true},
		{"privileged", "", "\n    securityContext: {privileged: true}",
			`violates PodSecurity "baseline:latest": privileged`, false},
		{"hostPath", "\n  volumes: [{name: h, hostPath: {path: /run}}]", "",
			`violates PodSecurity "baseline:latest": hostPath volumes`, false},
		{"unknown field", "", "\n    comand: [x]", `unknown field "spec.containers\[0\].comand"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := cluster.Apply(t.Context(), pod(tc.spec, tc.container), true)
			if (err == nil) != tc.ok || !regexp.MustCompile(tc.want).MatchString(out) {
				t.Fatalf("dry run: err %v, output %q; want ok=%v and /%s/", err, out, tc.ok, tc.want)
			}
		})
	}
}

// TestHostPathSocket: a DaemonSet Pod serves a unix socket in a hostPath
// directory; a uid-1000 Pod without hostNetwork connects through a read-only
// mount, and the server tells its Pod UID from the peer's cgroup.
func TestHostPathSocket(t *testing.T) {
	ctx := t.Context()
	img, err := cluster.MakeImage(ctx, t.TempDir(), "corral.local/kube/echo:1", nil,
		filepath.Join(cluster.Bin, "kube-echo"), filepath.Join(cluster.Bin, "kube-pause"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.ImportImage(ctx, img); err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(RepoRoot(), "hack", "kube", "smoke", "echo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cluster.Apply(ctx, string(manifest), false); err != nil {
		t.Fatal(out, err)
	}
	t.Cleanup(func() {
		_, _, _ = cluster.Kubectl(context.Background(), nil, "delete", "namespace", "corral-smoke", "--wait=false")
	})
	kubectl(t, "rollout", "status", "-n", "corral-smoke", "ds/echo", "--timeout=120s")
	kubectl(t, "wait", "-n", "corral-smoke", "--for=condition=Ready", "pod/client", "--timeout=120s")
	uid := kubectl(t, "get", "pod", "-n", "corral-smoke", "client", "-o", "jsonpath={.metadata.uid}")

	got := kubectl(t, "exec", "-n", "corral-smoke", "client", "--",
		"/kube-echo", "call", "/run/corral-smoke/echo.sock", "hello")
	want := regexp.MustCompile(`^echo hello uid=1000 pid=[1-9][0-9]* pod=` + uid + "\n$")
	if !want.MatchString(got) {
		t.Fatalf("call: got %q, want /%s/", got, want)
	}
	// The socket is a node path: the host reaches it through the node's root.
	if _, err := os.Stat(cluster.NodePath("/run/corral-smoke/echo.sock")); err != nil {
		t.Fatal(err)
	}
}
