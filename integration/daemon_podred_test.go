package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// podRedKubelet is a fake kubelet root for the hostile-Pod tests (0755,
// as the integration tests' fake kubelet is: a test's agents run as
// nobody and must reach their own volumes).
func podRedKubelet(t *testing.T) string {
	t.Helper()
	kubelet, err := os.MkdirTemp("", "corral-it-kubelet-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(kubelet, 0o755))
	t.Cleanup(func() { os.RemoveAll(kubelet) })
	return kubelet
}

// chmodAll makes every directory of root 0777 and every file 0666: an
// emptyDir's content, owned by (here: writable by) the Pod's agent.
func chmodAll(t *testing.T, root string) {
	t.Helper()
	require.NoError(t, filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return os.Chmod(p, 0o777)
		}
		return os.Chmod(p, 0o666)
	}))
}

// TestDaemonPodApplyAfterSwap: an agent that swaps its repository (a
// directory in its own volume) for a symbolic link to another Pod's
// volume after the session was made cannot make the daemon, root, apply
// its change set there: apply writes only into the directory the
// session was made on (its device and inode), whatever the path now
// names.
func TestDaemonPodApplyAfterSwap(t *testing.T) {
	const (
		podA = "0f8e7d6c-5b4a-4938-8271-6a5b4c3d2e1f"
		podB = "11111111-2222-3333-4444-555555555555"
	)
	kubelet := podRedKubelet(t)
	a := newFakePod(t, kubelet, podA, "work", map[string]string{"repo/README.md": "# a\n", "repo/openwiki/index.md": "# a\n"})
	b := newFakePod(t, kubelet, podB, "other", map[string]string{"repo/README.md": "# b\n", "repo/openwiki/index.md": "# b\n"})
	volA := filepath.Join(a.dir, "volumes/kubernetes.io~empty-dir/work")
	volB := filepath.Join(b.dir, "volumes/kubernetes.io~empty-dir/other")
	chmodAll(t, volA)
	chmodAll(t, volB)

	state, sock := daemonDirs(t)
	startDaemon(t, state, sock, "--kubelet-root", kubelet)
	bin := daemonClientPath(t)

	o := a.run(t, bin, sock, "create-volume", "work", "repo")
	require.Empty(t, o.Kind, o.Message)
	var s api.Session
	require.NoError(t, json.Unmarshal(o.Result, &s))
	o = a.run(t, bin, sock, "write", s.ID, "openwiki/planted.md", "from pod A\n")
	require.Empty(t, o.Kind, o.Message)

	// The agent (nobody, as its Pod's processes) swaps its repository
	// for a link to Pod B's.
	_, stderr, code := a.runRaw(t, "sh", "-c", `mv "$1/repo" "$1/repo.old" && ln -s "$2/repo" "$1/repo"`, "sh", volA, volB)
	require.Equal(t, 0, code, stderr)

	o = a.run(t, bin, sock, "review", s.ID)
	if o.Kind == "" {
		var rep api.Report
		require.NoError(t, json.Unmarshal(o.Result, &rep))
		require.Len(t, rep.Items, 1)
		o = a.run(t, bin, sock, "apply", s.ID, rep.Items[0].Token)
	}
	require.NoFileExists(t, filepath.Join(volB, "repo/openwiki/planted.md"), "Pod A's change set was written into Pod B's volume")
	require.Equal(t, api.KindRefused, o.Kind, "%s %s", o.Message, o.Result)
	require.Contains(t, o.Message, "not the directory the session was made on")
	require.NoFileExists(t, filepath.Join(volA, "repo.old/openwiki/planted.md"))

	// Put back, the same session applies to its own repository.
	_, stderr, code = a.runRaw(t, "sh", "-c", `rm "$1/repo" && mv "$1/repo.old" "$1/repo"`, "sh", volA)
	require.Equal(t, 0, code, stderr)
	o = a.run(t, bin, sock, "review", s.ID)
	require.Empty(t, o.Kind, o.Message)
	var rep api.Report
	require.NoError(t, json.Unmarshal(o.Result, &rep))
	require.Len(t, rep.Items, 1)
	o = a.run(t, bin, sock, "apply", s.ID, rep.Items[0].Token)
	require.Empty(t, o.Kind, o.Message)
	require.FileExists(t, filepath.Join(volA, "repo/openwiki/planted.md"))
	require.NoFileExists(t, filepath.Join(volB, "repo/openwiki/planted.md"))
}

// TestDaemonPodCredentialVolumes: a Pod's Secret, projected
// (service-account token), ConfigMap and downward API volumes are never
// a repository — a sidecar's credentials stay out of the agent's tool
// calls — and its emptyDir still is.
func TestDaemonPodCredentialVolumes(t *testing.T) {
	const podA = "0f8e7d6c-5b4a-4938-8271-6a5b4c3d2e1f"
	kubelet := podRedKubelet(t)
	a := newFakePod(t, kubelet, podA, "work", map[string]string{"repo/README.md": "# a\n"})
	for plugin, name := range map[string]string{
		"kubernetes.io~secret":       "creds",
		"kubernetes.io~projected":    "kube-api-access-x2b9",
		"kubernetes.io~configmap":    "conf",
		"kubernetes.io~downward-api": "podinfo",
	} {
		dir := filepath.Join(a.dir, "volumes", plugin, name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("SECRET-TOKEN"), 0o644))
	}
	state, sock := daemonDirs(t)
	startDaemon(t, state, sock, "--kubelet-root", kubelet)
	bin := daemonClientPath(t)

	for _, name := range []string{"creds", "kube-api-access-x2b9", "conf", "podinfo"} {
		o := a.run(t, bin, sock, "create-volume", name)
		require.Equal(t, api.KindRefused, o.Kind, "%s: %s %s", name, o.Message, o.Result)
		require.Contains(t, o.Message, "is never a repository", name)
	}
	o := a.run(t, bin, sock, "create-volume", "work", "repo")
	require.Empty(t, o.Kind, o.Message)
}

// TestDaemonPodForgedCgroup: a process outside every Pod that made
// itself a cgroup named like another Pod's — .../kubepods/besteffort/
// pod<UID>/ctr below a cgroup it may create cgroups in (a node user's
// systemd-delegated slice, a container with a writable cgroupfs) — is
// not taken for that Pod, nor for a process in no Pod (which as root is
// an admin): it is refused.
func TestDaemonPodForgedCgroup(t *testing.T) {
	const podB = "11111111-2222-3333-4444-555555555555"
	kubelet := podRedKubelet(t)
	b := newFakePod(t, kubelet, podB, "other", map[string]string{"repo/README.md": "# b\n"})
	forged := &fakePod{uid: podB, dir: b.dir}
	for _, root := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
			continue
		}
		top := filepath.Join(root, "corral-it-forger")
		dir := filepath.Join(top, "kubepods/besteffort/pod"+podB+"/ctr")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		forged.cgroups = append(forged.cgroups, dir)
		t.Cleanup(func() {
			for d := dir; d != root; d = filepath.Dir(d) {
				if os.Remove(d) != nil {
					break
				}
			}
		})
		break // one hierarchy is enough to name a Pod
	}
	require.NotEmpty(t, forged.cgroups)
	state, sock := daemonDirs(t)
	startDaemon(t, state, sock, "--kubelet-root", kubelet)
	bin := daemonClientPath(t)

	o := b.run(t, bin, sock, "create-volume", "other", "repo")
	require.Empty(t, o.Kind, o.Message)
	var s api.Session
	require.NoError(t, json.Unmarshal(o.Result, &s))

	for _, args := range [][]string{{"list"}, {"get", s.ID}, {"create-volume", "other", "repo"}} {
		o = forged.run(t, bin, append([]string{sock}, args...)...)
		require.Equal(t, api.KindRefused, o.Kind, "%q: %s %s", args, o.Message, o.Result)
		require.Contains(t, o.Message, "looks like a Kubernetes Pod's but is not where the kubelet puts Pods", "%q", args)
	}
	// Root in that cgroup: not "in no Pod" (an admin) either — refused.
	script := "echo $$ > " + forged.cgroups[0] + "/cgroup.procs && exec \"$@\""
	o = runDC(t, exec.Command("sh", "-c", script, "sh", bin, sock, "list"))
	require.Equal(t, api.KindRefused, o.Kind, "%s %s", o.Message, o.Result)
}

// TestDaemonPodApplyOwnVolume: an approved apply writes into the Pod's
// own volume when the kubelet's directory is 0750 root, as on a real node
// (the caller's uid may not search it: the check as the caller went
// through that node path, and refused every apply); the caller's own
// access below the volume is still judged — a directory of the volume it
// may not write is refused.
func TestDaemonPodApplyOwnVolume(t *testing.T) {
	const podA = "0f8e7d6c-5b4a-4938-8271-6a5b4c3d2e1f"
	kubelet := podRedKubelet(t)
	a := newFakePod(t, kubelet, podA, "work", map[string]string{
		"repo/README.md": "# a\n", "repo/openwiki/index.md": "# a\n",
		"locked/README.md": "# locked\n", "locked/openwiki/index.md": "# locked\n",
	})
	vol := filepath.Join(a.dir, "volumes/kubernetes.io~empty-dir/work")
	chmodAll(t, filepath.Join(vol, "repo"))
	require.NoError(t, os.Chmod(kubelet, 0o750))
	state, sock := daemonDirs(t)
	startDaemon(t, state, sock, "--kubelet-root", kubelet)
	bin := daemonClientPath(t)

	apply := func(sub string) dcOutput {
		o := a.run(t, bin, sock, "create-volume", "work", sub)
		require.Empty(t, o.Kind, o.Message)
		var s api.Session
		require.NoError(t, json.Unmarshal(o.Result, &s))
		o = a.run(t, bin, sock, "write", s.ID, "openwiki/new.md", "applied\n")
		require.Empty(t, o.Kind, o.Message)
		o = a.run(t, bin, sock, "review", s.ID)
		require.Empty(t, o.Kind, o.Message)
		var rep api.Report
		require.NoError(t, json.Unmarshal(o.Result, &rep))
		require.Len(t, rep.Items, 1)
		return a.run(t, bin, sock, "apply", s.ID, rep.Items[0].Token)
	}
	o := apply("repo")
	require.Empty(t, o.Kind, o.Message)
	data, err := os.ReadFile(filepath.Join(vol, "repo/openwiki/new.md"))
	require.NoError(t, err)
	require.Equal(t, "applied\n", string(data))

	o = apply("locked")
	require.Equal(t, api.KindRefused, o.Kind, "%s %s", o.Message, o.Result)
	require.Contains(t, o.Message, "uid 65534 (the caller) may not access it")
	require.NoFileExists(t, filepath.Join(vol, "locked/openwiki/new.md"))
}
