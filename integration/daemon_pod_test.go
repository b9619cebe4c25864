package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// fakePod is a Pod as the daemon sees it on a node: a real cgroup named
// as the kubelet names a Pod's (cgroup v1 pids with the cgroupfs driver's
// names, and cgroup v2 with the systemd driver's, when the host has them),
// and its directory in a fake kubelet root with one emptyDir volume.
type fakePod struct {
	uid     string
	cgroups []string // the container's cgroup directories
	dir     string   // KUBELET_ROOT/pods/UID
}

// newFakePod makes Pod uid's cgroups and its volume NAME holding files.
func newFakePod(t *testing.T, kubeletRoot, uid, volume string, files map[string]string) *fakePod {
	t.Helper()
	p := &fakePod{uid: uid, dir: filepath.Join(kubeletRoot, "pods", uid)}
	sysUID := strings.ReplaceAll(uid, "-", "_")
	for _, c := range []struct{ root, path string }{
		{"/sys/fs/cgroup/pids", "kubepods/besteffort/pod" + uid + "/ctr"},
		{"/sys/fs/cgroup/unified", "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + sysUID + ".slice/cri-containerd-ctr.scope"},
		{"/sys/fs/cgroup", "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + sysUID + ".slice/cri-containerd-ctr.scope"},
	} {
		if _, err := os.Stat(filepath.Join(c.root, "cgroup.procs")); err != nil {
			continue
		}
		dir := filepath.Join(c.root, c.path)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		p.cgroups = append(p.cgroups, dir)
		t.Cleanup(func() {
			// Deepest first; a cgroup goes with rmdir once empty.
			for d := dir; d != c.root; d = filepath.Dir(d) {
				if os.Remove(d) != nil {
					break
				}
			}
		})
	}
	require.NotEmpty(t, p.cgroups, "this host has neither cgroup v1 pids nor cgroup v2")
	vol := filepath.Join(p.dir, "volumes", "kubernetes.io~empty-dir", volume)
	require.NoError(t, os.MkdirAll(vol, 0o777))
	testutil.Tree(t, vol, files)
	return p
}

// run runs the daemon client in the Pod's cgroups as nobody (a non-root
// agent's process), through a shell that moves itself into them first.
func (p *fakePod) run(t *testing.T, bin string, args ...string) dcOutput {
	t.Helper()
	script := ""
	for _, c := range p.cgroups {
		script += "echo $$ > " + c + "/cgroup.procs && "
	}
	script += `exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"`
	return runDC(t, exec.Command("sh", append([]string{"-c", script, "sh", bin}, args...)...))
}

// runRaw runs args (a program and its arguments) in the Pod's cgroups as
// nobody and returns its stdout, stderr and exit code.
func (p *fakePod) runRaw(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	script := ""
	for _, c := range p.cgroups {
		script += "echo $$ > " + c + "/cgroup.procs && "
	}
	script += `exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"`
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), stderr.String(), code
}

// corralForAll copies the corral binary where every uid can run it.
func corralForAll(t *testing.T) string {
	t.Helper()
	require.NoError(t, testutil.BuildCorral())
	dir, err := os.MkdirTemp("", "corral-it-bin-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })
	data, err := os.ReadFile(testutil.CorralPath())
	require.NoError(t, err)
	p := filepath.Join(dir, "corral")
	require.NoError(t, os.WriteFile(p, data, 0o755))
	return p
}

func runDC(t *testing.T, cmd *exec.Cmd) dcOutput {
	t.Helper()
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "%q: %s", cmd.Args, stderr)
	var o dcOutput
	require.NoError(t, json.Unmarshal(out, &o), "%s", out)
	return o
}

// TestDaemonPodMode: `corral daemon --kubelet-root` identifies its caller
// by the Pod its process's cgroup names (a real process in real cgroups
// named like a Pod's), gives a Pod its own volume and nothing else, tells
// another Pod the session does not exist, refuses a caller in no Pod that
// is not root, and when the Pod's directory is deleted ends the session
// and keeps its patch, readable by root through the API.
func TestDaemonPodMode(t *testing.T) {
	const (
		podA = "0f8e7d6c-5b4a-4938-8271-6a5b4c3d2e1f"
		podB = "11111111-2222-3333-4444-555555555555"
	)
	kubelet, err := os.MkdirTemp("", "corral-it-kubelet-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(kubelet, 0o755))
	t.Cleanup(func() { os.RemoveAll(kubelet) })
	a := newFakePod(t, kubelet, podA, "work", map[string]string{
		"repo/README.md":         "# a\n",
		"repo/openwiki/index.md": "# index\n",
		"repo/.openwikiignore":   "secret.txt\n",
		"repo/secret.txt":        "SECRET-A",
	})
	b := newFakePod(t, kubelet, podB, "other", map[string]string{"repo/README.md": "# b\n"})

	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock, "--kubelet-root", kubelet)
	bin := daemonClientPath(t)

	// Pod A: its own volume, beneath which subPath resolves.
	o := a.run(t, bin, sock, "create-volume", "work", "repo")
	require.Empty(t, o.Kind, o.Message)
	var s api.Session
	require.NoError(t, json.Unmarshal(o.Result, &s))
	require.Equal(t, "pod:"+podA, s.OwnedBy)
	require.Equal(t, filepath.Join(a.dir, "volumes/kubernetes.io~empty-dir/work/repo"), s.Repo)
	o = a.run(t, bin, sock, "exec", s.ID, "cat", "README.md")
	require.Empty(t, o.Kind, o.Message)
	require.Contains(t, string(o.Result), `"stdout":"IyBhCg=="`, "the volume's README (base64 of \"# a\\n\")")
	o = a.run(t, bin, sock, "read", s.ID, "secret.txt")
	require.Equal(t, api.KindRefused, o.Kind, "a hidden file stays hidden: %s", o.Message)
	require.NotContains(t, o.Message+string(o.Result), "SECRET-A")
	o = a.run(t, bin, sock, "write", s.ID, "openwiki/new.md", "new page\n")
	require.Empty(t, o.Kind, o.Message)
	o = a.run(t, bin, sock, "write", s.ID, "openwiki/index.md", "# index, edited\n")
	require.Empty(t, o.Kind, o.Message)

	// The CLI in the Pod: --volume NAME/SUBPATH.
	corral := corralForAll(t)
	out, stderr, code := a.runRaw(t, corral, "--daemon", sock, "session", "create", "--volume", "work/repo", "--json")
	require.Equal(t, 0, code, stderr)
	var viaCLI struct {
		ID   string `json:"id"`
		Repo string `json:"repo"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &viaCLI), out)
	require.Equal(t, s.Repo, viaCLI.Repo)
	_, stderr, code = a.runRaw(t, corral, "--daemon", sock, "session", "create", "--repo", s.Repo)
	require.Equal(t, 125, code)
	require.Contains(t, stderr, "in Pod mode the repository is one of the calling Pod's volumes")

	// Pod A naming a node path, another Pod's volume, or escaping.
	for _, tc := range []struct {
		args []string
		kind string
		msg  string
	}{
		{[]string{"create", a.dir}, api.KindInvalid, "in Pod mode the repository is one of the calling Pod's volumes, named with volume {name, subPath}, never a node path"},
		{[]string{"create-volume", "other"}, api.KindInvalid, `volume "other": invalid argument: the calling Pod has no such volume on this node`},
		{[]string{"create-volume", "work", "../../../../" + podB}, api.KindInvalid, `without "..", "." or empty components`},
	} {
		o := a.run(t, bin, append([]string{sock}, tc.args...)...)
		require.Equal(t, tc.kind, o.Kind, "%q: %s", tc.args, o.Message)
		require.Contains(t, o.Message, tc.msg, "%q", tc.args)
	}

	o = a.run(t, bin, sock, "patches")
	require.Empty(t, o.Kind, o.Message)
	require.JSONEq(t, "[]", string(o.Result), "a Pod lists its own kept patches: none yet")

	// Pod B, as the same uid: A's session does not exist for it.
	o = b.run(t, bin, sock, "list")
	require.Empty(t, o.Kind, o.Message)
	require.JSONEq(t, "[]", string(o.Result))
	for _, args := range [][]string{{"get", s.ID}, {"exec", s.ID, "ls"}, {"read", s.ID, "README.md"}, {"diff", s.ID}, {"apply", s.ID, "0000000000000000"}, {"remove", s.ID}} {
		o := b.run(t, bin, append([]string{sock}, args...)...)
		require.Equal(t, api.KindNotFound, o.Kind, "%q: %s", args, o.Message)
		require.Equal(t, "session "+s.ID+": not found", o.Message)
	}
	o = b.run(t, bin, sock, "create-volume", "work")
	require.Equal(t, api.KindInvalid, o.Kind, "B cannot name A's volume: %s", o.Message)

	// A process in no Pod that is not root: refused, one line naming why.
	o = runDC(t, exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, sock, "list"))
	require.Equal(t, api.KindRefused, o.Kind)
	require.Regexp(t, `^permission denied: uid 65534 \(pid \d+\) is in no Kubernetes Pod, and in Pod mode only Pods and root on the node may call$`, o.Message)

	// Root on the node is an admin.
	c := d.client()
	ctx := context.Background()
	got, err := c.Session(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, "pod:"+podA, got.OwnedBy)

	// The kubelet deletes Pod A (its volume first, then its directory):
	// the session ends and its change set is kept, from the session's own
	// write area and base copy.
	require.NoError(t, os.RemoveAll(a.dir))
	var pps []api.PodPatch
	require.Eventually(t, func() bool {
		pps, err = c.Patches(ctx)
		require.NoError(t, err)
		return len(pps) == 2
	}, 30*time.Second, 100*time.Millisecond, "daemon stderr:\n%s", d.stderr.String())
	if pps[0].ID != s.ID {
		pps[0], pps[1] = pps[1], pps[0]
	}
	require.Equal(t, s.ID, pps[0].ID)
	require.Equal(t, viaCLI.ID, pps[1].ID)
	require.Empty(t, pps[1].Path, "the CLI's session wrote nothing: no patch file")
	require.Empty(t, pps[1].Files)
	require.Equal(t, podA, pps[0].PodUID)
	require.Equal(t, &api.Volume{Name: "work", SubPath: "repo"}, pps[0].Volume)
	require.ElementsMatch(t, []string{"openwiki/index.md", "openwiki/new.md"}, pps[0].Files)
	require.Empty(t, pps[0].Error)
	require.Equal(t, filepath.Join(state, "patches", podA, s.ID+".patch"), pps[0].Path)
	patch, err := c.PodPatch(ctx, s.ID)
	require.NoError(t, err)
	require.Contains(t, string(patch), "-# index\n+# index, edited\n")
	require.Contains(t, string(patch), "+new page\n")
	_, err = c.Session(ctx, s.ID)
	requireAPIKind(t, err, api.KindNotFound)
	cmd := exec.Command(corral, "--daemon", sock, "patches", "show", s.ID)
	shown, err := cmd.Output()
	require.NoError(t, err)
	require.Equal(t, string(patch), string(shown))
	shown, err = exec.Command(corral, "--daemon", sock, "patches", "ls").Output()
	require.NoError(t, err)
	require.Contains(t, string(shown), s.ID+"  "+podA)
	require.Empty(t, daemonContainers(t, state), "the ended session's containers are gone")

	// The audit log names the Pod (and the pid) of every call it made,
	// and says why the session ended.
	recs, err := audit.Read(filepath.Join(state, audit.FileName))
	require.NoError(t, err)
	var calls, ended int
	for _, rec := range recs {
		switch {
		case rec.Session != s.ID:
		case rec.Type == audit.TypeSessionEnded:
			ended++
			ev := rec.Event.(*audit.SessionEnded)
			require.Equal(t, podA, ev.Pod)
			require.Equal(t, pps[0].Path, ev.Patch)
		default:
			calls++
			require.Equal(t, podA, rec.Peer.Pod, "%s record", rec.Type)
			require.Equal(t, 65534, rec.Peer.UID)
			require.NotZero(t, rec.Peer.PID)
		}
	}
	require.Equal(t, 1, ended)
	require.Greater(t, calls, 2)

	d.stop(true)
}

// TestDaemonSessionLost: a writable session whose write area is gone when
// the daemon starts (the node rebooted: its mounts vanished) is reported
// lost in get and list, with the reason and an audit record; its calls
// answer data_loss; it is never dropped nor recreated empty, and removing
// it says what was lost.
func TestDaemonSessionLost(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock)
	c := d.client()
	ctx := context.Background()
	repo := ftRepo(t)
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
	require.NoError(t, err)
	require.Empty(t, s.State)
	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/x.md", Content: "x\n"})
	require.NoError(t, err)
	d.stop(true)
	_, err = mounts.Sweep(filepath.Join(state, "sessions", s.ID))
	require.NoError(t, err)

	d = startDaemon(t, state, sock)
	c = d.client()
	got, err := c.Session(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, api.StateLost, got.State)
	require.Contains(t, got.StateReason, "its write area (a tmpfs) is gone")
	list, err := c.Sessions(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, api.StateLost, list[0].State)
	_, err = c.Read(ctx, s.ID, api.Read{Path: "openwiki/x.md"})
	requireAPIKind(t, err, api.KindDataLoss)
	recs, err := audit.Read(filepath.Join(state, audit.FileName))
	require.NoError(t, err)
	lost := 0
	for _, rec := range recs {
		if rec.Session == s.ID && rec.Type == audit.TypeSessionLost {
			lost++
			require.Equal(t, repo, rec.Event.(*audit.SessionLost).Repo)
		}
	}
	require.Equal(t, 1, lost, "one audit record of the loss")
	rm, err := c.RemoveSession(ctx, s.ID)
	require.NoError(t, err)
	require.NotEmpty(t, rm.Lost)
	require.Empty(t, rm.Patch)
	d.stop(true)
}
