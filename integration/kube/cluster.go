//go:build kube

// Package kube drives the single-node Kubernetes of hack/kube/cluster.sh
// from Go tests. The cluster lives in PID, mount and network namespaces of
// its own; this package reaches it the way the script's `env` command
// describes: kubectl runs in the cluster's network namespace (nsenter), and
// the node's files (/run, /var/lib, /var/log as the node sees them) are
// reached under /proc/<node PID 1>/root.
//
// Every file of this package carries the build tag "kube", so that
// `go test ./...` never starts a cluster; run `go test -tags kube
// ./integration/kube/` (root, and the binaries of hack/kube/build.sh).
package kube

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Cluster is a running test cluster, as described by `cluster.sh env`.
type Cluster struct {
	// Script is the absolute path of hack/kube/cluster.sh.
	Script string
	// State is the cluster's state directory on the host (CORRAL_KUBE_STATE).
	State string
	// PID is the host PID of the node's PID 1; its namespaces are the node's.
	PID int
	// Bin holds kubelet, kube-*, etcd, corral-cni, kube-mkimage, kube-echo,
	// kube-pause.
	Bin string
	// NetNS is the node's network namespace file (/proc/PID/ns/net).
	NetNS string
	// Root is the node's filesystem as the host reaches it (/proc/PID/root).
	Root string
	// Containerd is the host path of the node containerd's socket; the CRI's
	// images live in its namespace "k8s.io".
	Containerd string
	// Kubeconfig authenticates as a member of system:masters.
	Kubeconfig string
	// Node and NodeIP name the single node.
	Node, NodeIP string
	// CgroupRoot is the kubelet's cgroupRoot, e.g. "/corral-kube".
	CgroupRoot string
}

// RepoRoot returns the repository's root directory, found from this
// source file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Attach returns the cluster of the state directory in CORRAL_KUBE_STATE
// (default: the script's) when it is running, and an error wrapping
// os.ErrNotExist when it is not.
func Attach(ctx context.Context) (*Cluster, error) {
	script := filepath.Join(RepoRoot(), "hack", "kube", "cluster.sh")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script, "env")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(stderr.String(), "not running") {
			return nil, fmt.Errorf("attaching to the test cluster: %w", os.ErrNotExist)
		}
		return nil, fmt.Errorf("cluster.sh env: %w: %s", err, stderr.String())
	}
	return parseEnv(script, &stdout)
}

// Up starts the cluster (building or reusing the cached binaries), or
// attaches to a running one; started tells which, so that the caller stops
// only a cluster it started. Up's progress goes to log.
func Up(ctx context.Context, log io.Writer) (c *Cluster, started bool, err error) {
	if c, err := Attach(ctx); err == nil {
		return c, false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	script := filepath.Join(RepoRoot(), "hack", "kube", "cluster.sh")
	cmd := exec.CommandContext(ctx, script, "up")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return nil, false, fmt.Errorf("cluster.sh up: %w", err)
	}
	c, err = Attach(ctx)
	return c, err == nil, err
}

// Down kills every process of the cluster and removes its cgroups and state
// directory; with keepLogs non-empty the components' and Pods' logs are
// copied there first.
func (c *Cluster) Down(ctx context.Context, keepLogs string, log io.Writer) error {
	args := []string{"down"}
	if keepLogs != "" {
		args = append(args, "--keep-logs", keepLogs)
	}
	cmd := exec.CommandContext(ctx, c.Script, args...)
	cmd.Env = append(os.Environ(), "CORRAL_KUBE_STATE="+c.State)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cluster.sh down: %w", err)
	}
	return nil
}

// Kubectl runs kubectl with args in the cluster's network namespace, stdin
// from stdin (may be nil). A non-zero exit is an error carrying stderr; the
// outputs are returned either way.
func (c *Cluster) Kubectl(ctx context.Context, stdin io.Reader, args ...string) (stdout, stderr string, err error) {
	argv := append([]string{"--net=" + c.NetNS, "--", "kubectl", "--kubeconfig", c.Kubeconfig}, args...)
	var o, e bytes.Buffer
	cmd := exec.CommandContext(ctx, "nsenter", argv...)
	// kubectl's WebSocket exec client (the default since 1.31) can start
	// reading before it has made its stdout stream and then drops the
	// command's output ("Unknown stream id 1, discarding message"); the fix,
	// kubernetes PR 131203, is not in every packaged kubectl (Debian's 1.32
	// lacks it). The SPDY client has no such race.
	cmd.Env = append(os.Environ(), "KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &o, &e
	if err := cmd.Run(); err != nil {
		return o.String(), e.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(e.String()))
	}
	return o.String(), e.String(), nil
}

// Apply applies manifest (YAML, one or more documents) with strict field
// validation; dryRun asks the apiserver to run every admission step
// (Pod Security included) without storing anything.
func (c *Cluster) Apply(ctx context.Context, manifest string, dryRun bool) (string, error) {
	args := []string{"apply", "--validate=strict", "-f", "-"}
	if dryRun {
		args = append(args, "--dry-run=server")
	}
	out, errOut, err := c.Kubectl(ctx, strings.NewReader(manifest), args...)
	return out + errOut, err
}

// ImportImage imports an image archive (OCI layout or docker-save tar) into
// the node containerd's namespace "k8s.io", where Pods find it with
// imagePullPolicy Never or IfNotPresent.
func (c *Cluster) ImportImage(ctx context.Context, archive string) error {
	out, err := exec.CommandContext(ctx, "ctr", "--address", c.Containerd, "-n", "k8s.io",
		"images", "import", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("importing %s: %w: %s", archive, err, out)
	}
	return nil
}

// MakeImage writes an OCI archive named name with files (kube-mkimage's
// SRC[=DEST] arguments) and the given entrypoint into dir and returns its
// path.
func (c *Cluster) MakeImage(ctx context.Context, dir, name string, entrypoint []string, files ...string) (string, error) {
	out := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(name)+".tar")
	args := []string{"-name", name, "-o", out}
	if len(entrypoint) > 0 {
		args = append(args, "-entrypoint", strings.Join(entrypoint, ","))
	}
	b, err := exec.CommandContext(ctx, filepath.Join(c.Bin, "kube-mkimage"), append(args, files...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kube-mkimage %s: %w: %s", name, err, b)
	}
	return out, nil
}

// NodePath returns the host path of path as the node sees it (for example
// the node's /var/lib/kubelet/pods or a hostPath socket under /run).
func (c *Cluster) NodePath(path string) string {
	return filepath.Join(c.Root, filepath.Clean("/"+path))
}

// OnNode runs argv on the node: in its mount, network and PID namespaces,
// as a shell on a real node would. It returns the combined output.
func (c *Cluster) OnNode(ctx context.Context, argv ...string) (string, error) {
	args := append([]string{"-t", strconv.Itoa(c.PID), "--mount", "--net", "--pid", "--wd=/", "--"}, argv...)
	b, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput()
	if err != nil {
		return string(b), fmt.Errorf("on node: %s: %w: %s", strings.Join(argv, " "), err, b)
	}
	return string(b), nil
}

func parseEnv(script string, r io.Reader) (*Cluster, error) {
	c := &Cluster{Script: script}
	fields := map[string]*string{
		"CORRAL_KUBE_STATE":       &c.State,
		"CORRAL_KUBE_BIN":         &c.Bin,
		"CORRAL_KUBE_NETNS":       &c.NetNS,
		"CORRAL_KUBE_ROOT":        &c.Root,
		"CORRAL_KUBE_CONTAINERD":  &c.Containerd,
		"CORRAL_KUBE_NODE":        &c.Node,
		"CORRAL_KUBE_NODE_IP":     &c.NodeIP,
		"CORRAL_KUBE_CGROUP_ROOT": &c.CgroupRoot,
		"KUBECONFIG":              &c.Kubeconfig,
	}
	var pid string
	fields["CORRAL_KUBE_PID"] = &pid
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		if p := fields[k]; ok && p != nil {
			*p = v
		}
	}
	for k, p := range fields {
		if *p == "" {
			return nil, fmt.Errorf("cluster.sh env: no %s", k)
		}
	}
	var err error
	if c.PID, err = strconv.Atoi(pid); err != nil {
		return nil, fmt.Errorf("cluster.sh env: CORRAL_KUBE_PID %q: %w", pid, err)
	}
	return c, nil
}
