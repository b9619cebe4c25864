//go:build kube

package kube

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/sandbox"
)

// The images of deploy/kubernetes, made here from the project's binaries
// (no registry): the daemon image holds corral, corral-init and the host
// tools the daemon copies into its default tools image on first use; the
// agent image holds corral (the client), callbench and a pause program.
const (
	daemonImage = "corral.local/corral/daemon:dev"
	agentImage  = "corral.local/corral/agent:dev"
	agentNS     = "corral-agents"
	systemNS    = "corral-system"
	sockPath    = "/run/corral/corral.sock"
)

var (
	deployOnce sync.Once
	deployErr  error
	buildDir   string // static corral, corral-init, callbench
)

// deploy builds and imports both images, labels the node as an agent node
// and applies deploy/kubernetes, once per test binary; it returns when the
// daemon's Pod is ready.
func deploy(t testing.TB) {
	t.Helper()
	deployOnce.Do(func() { deployErr = deployCorral(context.Background()) })
	if deployErr != nil {
		t.Fatal(deployErr)
	}
}

func deployCorral(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "corral-kube-images-")
	if err != nil {
		return err
	}
	buildDir = dir
	root := RepoRoot()
	for _, b := range []struct {
		out, pkg string
		cgo      string
	}{
		// The daemon validates seccomp profiles with libseccomp (cgo);
		// the client, corral-init and callbench are static.
		{"corral-daemon", "./cmd/corral", "1"}, {"corral", "./cmd/corral", "0"},
		{"corral-init", "./cmd/corral-init", "0"}, {"callbench", "./integration/kube/testdata/callbench", "0"},
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, b.out), b.pkg)
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED="+b.cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w: %s", b.pkg, err, out)
		}
	}
	etc := filepath.Join(dir, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return err
	}
	for name, text := range map[string]string{
		"passwd": "root:x:0:0:root:/root:/sbin/nologin\n",
		"group":  "root:x:0:\ncorral:x:2000:\n",
	} {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	daemonFiles := []string{
		filepath.Join(dir, "corral-init") + "=/usr/local/bin/corral-init",
		filepath.Join(etc, "passwd") + "=/etc/passwd",
		filepath.Join(etc, "group") + "=/etc/group",
	}
	tools, err := toolFiles(ctx, filepath.Join(dir, "corral-daemon"))
	if err != nil {
		return err
	}
	daemonFiles = append(daemonFiles, tools...)
	agentFiles := []string{
		filepath.Join(dir, "corral") + "=/usr/local/bin/corral",
		filepath.Join(dir, "callbench") + "=/usr/local/bin/callbench",
		filepath.Join(cluster.Bin, "kube-pause") + "=/pause",
	}
	for _, img := range []struct {
		name  string
		entry []string
		files []string
	}{
		{daemonImage, []string{"/usr/local/bin/corral"}, daemonFiles},
		{agentImage, []string{"/pause"}, agentFiles},
	} {
		archive, err := cluster.MakeImage(ctx, dir, img.name, img.entry, img.files...)
		if err != nil {
			return err
		}
		if err := cluster.ImportImage(ctx, archive); err != nil {
			return err
		}
	}
	if _, _, err := cluster.Kubectl(ctx, nil, "label", "--overwrite", "node", cluster.Node, "corral.dev/agents=true"); err != nil {
		return err
	}
	if out, errOut, err := cluster.Kubectl(ctx, nil, "apply", "--validate=strict", "-k", filepath.Join(root, "deploy", "kubernetes")); err != nil {
		return fmt.Errorf("apply -k deploy/kubernetes: %w: %s%s", err, out, errOut)
	}
	// The images keep their tag from run to run: restart the daemon on
	// this run's build.
	if _, _, err := cluster.Kubectl(ctx, nil, "rollout", "restart", "-n", systemNS, "ds/corral-daemon"); err != nil {
		return err
	}
	if _, _, err := cluster.Kubectl(ctx, nil, "rollout", "status", "-n", systemNS, "ds/corral-daemon", "--timeout=180s"); err != nil {
		return err
	}
	return waitSocket(ctx)
}

// waitSocket waits until the daemon answers on its node socket.
func waitSocket(ctx context.Context) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := hostCorral(ctx, "session", "ls")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the daemon does not answer on %s: %v %s", sockPath, err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// toolFiles lists kube-mkimage arguments that copy the daemon's corral
// to /usr/local/bin/corral and the host's tools of
// sandbox.DefaultImageSpec to /usr/bin, with their shared libraries (ldd)
// where the daemon's image builder looks for them.
func toolFiles(ctx context.Context, daemon string) ([]string, error) {
	spec := sandbox.DefaultImageSpec()
	f := imageFiles{seen: map[string]bool{}}
	names := append([]string{daemon}, spec.Tools...)
	for i, name := range append(names, spec.Optional...) {
		p, err := exec.LookPath(name)
		if err != nil {
			if i < len(names) {
				return nil, fmt.Errorf("tool %s: %w", name, err)
			}
			continue
		}
		dst := "/usr/bin/" + name
		if i == 0 {
			dst = "/usr/local/bin/corral"
		}
		if err := f.program(ctx, p, dst); err != nil {
			return nil, err
		}
	}
	return f.args, nil
}

// imageFiles collects kube-mkimage SRC=DEST arguments, each destination
// once.
type imageFiles struct {
	seen map[string]bool
	args []string
}

func (f *imageFiles) add(src, dst string) error {
	if f.seen[dst] {
		return nil
	}
	f.seen[dst] = true
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err
	}
	f.args = append(f.args, real+"="+dst)
	return nil
}

// program adds the host program p as dst with the shared libraries ldd
// lists for it (those under /lib as /usr/lib, where the image's loader
// finds them); a static program comes alone.
func (f *imageFiles) program(ctx context.Context, p, dst string) error {
	if err := f.add(p, dst); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "ldd", p).Output()
	if err != nil {
		return nil // static
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		for _, lib := range strings.Fields(sc.Text()) {
			if !strings.HasPrefix(lib, "/") {
				continue
			}
			dst := lib
			if strings.HasPrefix(lib, "/lib/") {
				dst = "/usr" + lib
			}
			if err := f.add(lib, dst); err != nil {
				return err
			}
		}
	}
	return nil
}

// onNode returns a command that runs argv as root on the node: in its
// PID namespace (the daemon names its callers by pid, and one in a PID
// namespace it cannot see is refused) and its mount namespace (where the
// socket is /run/corral/corral.sock). Root outside any Pod is an admin.
func onNode(ctx context.Context, argv ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"-t", fmt.Sprint(cluster.PID), "--pid", "--mount", "--"}, argv...)...)
}

// hostCorral runs the host's corral (the same static build as the agent
// image's) as node root against the daemon's socket.
func hostCorral(ctx context.Context, args ...string) (string, error) {
	argv := append([]string{filepath.Join(buildDir, "corral"), "--daemon", sockPath}, args...)
	out, err := onNode(ctx, argv...).CombinedOutput()
	return string(out), err
}

// TestDeployDryRun: once installed, every manifest of the base passes the
// real apiserver's strict validation and admission (Pod Security included)
// again, with nothing refused and no warning.
func TestDeployDryRun(t *testing.T) {
	deploy(t)
	out, errOut, err := cluster.Kubectl(t.Context(), nil, "apply", "--dry-run=server", "--validate=strict",
		"-k", filepath.Join(RepoRoot(), "deploy", "kubernetes"))
	if err != nil || strings.TrimSpace(errOut) != "" {
		t.Fatalf("dry run: %v\n%s%s", err, out, errOut)
	}
	for _, want := range []string{"namespace/corral-system", "namespace/corral-agents", "configmap/corral-daemon",
		"daemonset.apps/corral-daemon", "validatingadmissionpolicy.admissionregistration.k8s.io/corral-agent-pods",
		"validatingadmissionpolicybinding.admissionregistration.k8s.io/corral-agent-pods"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + ` \w+ \(server dry run\)$`).MatchString(out) {
			t.Errorf("dry run: no line for %s in\n%s", want, out)
		}
	}
}

// TestAgentPodPolicy: in corral-agents the example agent Pod is admitted;
// each way out of "restricted + the socket directory read-only" is refused
// by the ValidatingAdmissionPolicy with its own message.
func TestAgentPodPolicy(t *testing.T) {
	deploy(t)
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "deploy", "kubernetes", "examples", "agent-pod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	example := string(b)
	denied := func(msg string) string {
		return `ValidatingAdmissionPolicy 'corral-agent-pods' with binding 'corral-agent-pods' denied request: ` + regexp.QuoteMeta(msg)
	}
	for _, tc := range []struct {
		name, old, new, want string
		ok                   bool
		old2, new2           string // a second replacement, if any
	}{
		{"example", "", "", `pod/agent created \(server dry run\)`, true, "", ""},
		{"another hostPath", "  - name: tmp\n    emptyDir: {sizeLimit: 64Mi}",
			"  - name: tmp\n    hostPath: {path: /var/lib/kubelet/pods}",
			denied("agent Pods may mount one hostPath: /run/corral (the corral daemon's socket directory)"), false, "", ""},
		{"socket directory writable", "mountPath: /run/corral, readOnly: true", "mountPath: /run/corral",
			denied("agent Pods must mount /run/corral readOnly, without mount propagation"), false, "", ""},
		{"privileged", "allowPrivilegeEscalation: false\n", "privileged: true\n",
			denied("agent Pods may not run privileged containers"), false, "", ""},
		{"capabilities kept", "capabilities: {drop: [ALL]}", "capabilities: {drop: [NET_RAW]}",
			denied("agent Pods' containers must drop ALL capabilities (and add none but NET_BIND_SERVICE)"), false, "", ""},
		{"root", "runAsUser: 1000", "runAsUser: 0",
			denied("agent Pods must run as non-root (runAsNonRoot: true, runAsUser not 0)"), false, "", ""},
		{"hostPID", "  enableServiceLinks: false\n", "  enableServiceLinks: false\n  hostPID: true\n",
			denied("agent Pods may not use the node's network, PID or IPC namespace"), false, "", ""},
		{"no seccomp", "    seccompProfile: {type: RuntimeDefault}\n", "",
			denied("agent Pods must use the RuntimeDefault or a Localhost seccomp profile"), false, "", ""},
		{"AppArmor unconfined", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: true\n      appArmorProfile: {type: Unconfined}",
			denied("agent Pods may not run unconfined by AppArmor"), false, "", ""},
		{"AppArmor unconfined by annotation", "  namespace: corral-agents\n", "  namespace: corral-agents\n  annotations: {container.apparmor.security.beta.kubernetes.io/agent: unconfined}\n",
			denied("agent Pods may not run unconfined by AppArmor"), false, "", ""},
		{"SELinux type", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: true\n      seLinuxOptions: {type: spc_t}",
			denied("agent Pods may set no SELinux user or role, and only a container SELinux type"), false, "", ""},
		// Unmasked needs a user namespace (hostUsers: false), or the
		// apiserver refuses it before admission.
		{"procMount unmasked", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: true\n      procMount: Unmasked",
			denied("agent Pods must use the default /proc mount (procMount: Default)"), false,
			"  enableServiceLinks: false\n", "  enableServiceLinks: false\n  hostUsers: false\n"},
		{"unsafe sysctl", "    seccompProfile: {type: RuntimeDefault}\n", "    seccompProfile: {type: RuntimeDefault}\n    sysctls: [{name: kernel.msgmax, value: '65536'}]\n",
			denied("agent Pods may set only the safe sysctls"), false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manifest := example
			if tc.old != "" {
				if !strings.Contains(manifest, tc.old) {
					t.Fatalf("the example has no %q", tc.old)
				}
				manifest = strings.Replace(manifest, tc.old, tc.new, 1)
			}
			if tc.old2 != "" {
				if !strings.Contains(manifest, tc.old2) {
					t.Fatalf("the example has no %q", tc.old2)
				}
				manifest = strings.Replace(manifest, tc.old2, tc.new2, 1)
			}
			out, err := cluster.Apply(t.Context(), manifest, true)
			if (err == nil) != tc.ok || !regexp.MustCompile(tc.want).MatchString(out) {
				t.Fatalf("dry run: err %v, output %q; want ok=%v and /%s/", err, out, tc.ok, tc.want)
			}
		})
	}
}
