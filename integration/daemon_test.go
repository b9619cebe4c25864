package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/api/types/runc/options"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/typeurl/v2"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/internal/daemon/apitest"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/client"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
)

// daemonProc is a `corral daemon` started by a test, on a state directory
// and socket of its own.
type daemonProc struct {
	t      testing.TB
	cmd    *exec.Cmd
	state  string
	sock   string
	stderr *lockedBuffer
	done   chan error
}

// daemonDirs returns a fresh state directory and a socket path in a
// directory every uid can search.
func daemonDirs(t *testing.T) (state, sock string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "corral-it-daemon-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() {
		ms, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
		if len(ms) == 0 {
			os.RemoveAll(dir)
		}
	})
	return filepath.Join(dir, "state"), filepath.Join(dir, "run", "corral.sock")
}

// startDaemon starts corral daemon on state and sock (with the test image
// and namespace) and waits until it answers.
func startDaemon(t testing.TB, state, sock string, extra ...string) *daemonProc {
	t.Helper()
	testutil.Executor(t) // the test image, and CORRAL_INIT for the child
	require.NoError(t, testutil.BuildCorral())
	args := append([]string{"--namespace", testutil.Namespace, "--state-dir", state, "--image", testutil.TestImageRef,
		"daemon", "--socket", sock, "--socket-group", "nogroup"}, extra...)
	cmd := exec.Command(testutil.CorralPath(), args...)
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
	d := &daemonProc{t: t, cmd: cmd, state: state, sock: sock, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = d.stderr
	require.NoError(t, cmd.Start())
	go func() { d.done <- cmd.Wait() }()
	t.Cleanup(func() { d.stop(false) })
	deadline := time.Now().Add(90 * time.Second)
	for {
		c, err := client.Dial(context.Background(), sock)
		if err == nil {
			c.Close()
			return d
		}
		select {
		case err := <-d.done:
			d.done <- err
			t.Fatalf("the daemon exited before answering (%v):\n%s", err, d.stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not answer at %s:\n%s", sock, d.stderr.String())
		}
	}
}

// stop ends the daemon with SIGTERM and, when check is set, requires a
// clean exit.
func (d *daemonProc) stop(check bool) {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		if check {
			require.NoError(d.t, err, "daemon stderr:\n%s", d.stderr.String())
		}
	case <-time.After(90 * time.Second):
		_ = d.cmd.Process.Kill()
		d.t.Errorf("the daemon did not stop on SIGTERM:\n%s", d.stderr.String())
	}
}

// kill ends the daemon with SIGKILL.
func (d *daemonProc) kill() {
	require.NoError(d.t, d.cmd.Process.Kill())
	<-d.done
	d.done <- nil
}

// client returns a client of the daemon whose every exchange is checked
// against the OpenAPI document.
func (d *daemonProc) client() *client.Client {
	var v *apitest.Validating
	c := client.NewWith(d.sock, apitest.Wrap(d.t, &v))
	d.t.Cleanup(func() { c.Close() })
	return c
}

// daemonContainers lists the containers corral made for state, each
// with whether it runs a call (runsACall).
func daemonContainers(t *testing.T, state string) map[string]bool {
	t.Helper()
	c, err := containerd.New(testutil.Address(), containerd.WithTimeout(5*time.Second))
	require.NoError(t, err)
	defer c.Close()
	ctx := namespaces.WithNamespace(context.Background(), testutil.Namespace)
	cs, err := c.Containers(ctx, fmt.Sprintf("labels.%q==%q", sandbox.LabelStateDir, state))
	require.NoError(t, err)
	out := map[string]bool{}
	for _, x := range cs {
		out[x.ID()] = runsACall(ctx, x)
	}
	return out
}

// runsACall reports whether c's task runs a call: running, and more
// than corral-init alone (a container started ahead waits for its
// request with its init alone). Under runc and crun the processes are
// read from the container's cgroup (cgroupProcs): the task's Pids runs
// `runc ps` through the shim for every running task, a second or more
// per listing on a loaded host once the pools hold started containers,
// which outlasted the 3s call TestDaemonNodeCaps had to catch running.
func runsACall(ctx context.Context, c containerd.Container) bool {
	task, err := c.Task(ctx, nil)
	if err != nil {
		return false
	}
	if st, err := task.Status(ctx); err != nil || st.Status != containerd.Running {
		return false
	}
	n, err := procs(ctx, c, task)
	return err == nil && n > 1
}

// procs counts the processes of c's task: from its cgroup where
// cgroupProcs can, else the task's Pids.
func procs(ctx context.Context, c containerd.Container, task containerd.Task) (int, error) {
	if n, ok := cgroupProcs(ctx, c); ok {
		return n, nil
	}
	pids, err := task.Pids(ctx)
	return len(pids), err
}

// cgroupProcs counts the processes in the cgroup of c (its spec's
// cgroupsPath: cgroup v2's cgroup.procs, or v1's in the pids hierarchy),
// when c runs under runc or crun, whose cgroup holds the container's own
// processes and nothing else; ok is false otherwise (runsc's cgroup holds
// the sandbox, not the tool) or when the file cannot be read.
func cgroupProcs(ctx context.Context, c containerd.Container) (n int, ok bool) {
	info, err := c.Info(ctx)
	if err != nil || info.Runtime.Options == nil {
		return 0, false
	}
	v, err := typeurl.UnmarshalAny(info.Runtime.Options)
	if err != nil {
		return 0, false
	}
	opts, isRunc := v.(*options.Options)
	if !isRunc || !slices.Contains([]string{".", "runc", "crun"}, filepath.Base(opts.BinaryName)) {
		return 0, false
	}
	spec, err := c.Spec(ctx)
	if err != nil || spec.Linux == nil || spec.Linux.CgroupsPath == "" {
		return 0, false
	}
	p := filepath.Join("/sys/fs/cgroup", spec.Linux.CgroupsPath, "cgroup.procs")
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		p = filepath.Join("/sys/fs/cgroup/pids", spec.Linux.CgroupsPath, "cgroup.procs")
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	return len(strings.Fields(string(data))), true
}

// madeAhead lists the containers of state made ahead of a call: created,
// or started with corral-init alone waiting for its request.
func madeAhead(t *testing.T, state string) map[string]bool {
	t.Helper()
	c, err := containerd.New(testutil.Address(), containerd.WithTimeout(5*time.Second))
	require.NoError(t, err)
	defer c.Close()
	ctx := namespaces.WithNamespace(context.Background(), testutil.Namespace)
	cs, err := c.Containers(ctx, fmt.Sprintf("labels.%q==%q", sandbox.LabelStateDir, state))
	require.NoError(t, err)
	out := map[string]bool{}
	for _, x := range cs {
		task, err := x.Task(ctx, nil)
		if err != nil {
			continue
		}
		st, err := task.Status(ctx)
		if err != nil {
			continue
		}
		if st.Status == containerd.Created {
			out[x.ID()] = true
		} else if n, err := procs(ctx, x, task); err == nil && st.Status == containerd.Running && n == 1 {
			out[x.ID()] = true
		}
	}
	return out
}

// runningContainers lists the containers of state that run a call.
func runningContainers(t *testing.T, state string) []string {
	var ids []string
	for id, running := range daemonContainers(t, state) {
		if running {
			ids = append(ids, id)
		}
	}
	return ids
}

// requireDaemonLeftNothing checks that the daemon's state directory holds no
// mount and containerd no container of it.
func requireDaemonLeftNothing(t *testing.T, state string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(daemonContainers(t, state)) == 0 }, 30*time.Second, 200*time.Millisecond,
		"containers left: %v", daemonContainers(t, state))
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(state))
	require.NoError(t, err)
	require.Empty(t, ms, "mounts left under %s", state)
}

// openRepo is newRepo in a directory every uid can read.
func openRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "corral-it-repo-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })
	testutil.Tree(t, dir, files)
	return dir
}

// slowArgv is an allowed command that runs until it is killed (GNU grep's
// backtracking on back-references over a 3000-character line).
var slowArgv = []string{"grep", "-cE", `^(.*)(.*)(.*)\3\2\1\3$`, "slow.txt"}

func slowLine() string {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 3000)
	for i := range b {
		b[i] = "ab"[r.IntN(2)]
	}
	return string(b) + "\n"
}

// TestDaemonAPIEndToEnd drives every route of a real daemon through the
// Go client (each exchange validated against the OpenAPI document): the
// answers are those of the session in-process, refusals carry the same
// rule, an approved apply writes the repository, and every audit record
// of the calls names the peer.
func TestDaemonAPIEndToEnd(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock)
	c := d.client()
	ctx := context.Background()
	repo := ftRepo(t)

	v, err := c.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, "v1", v.API)
	h, err := c.Health(ctx)
	require.NoError(t, err)
	require.True(t, h.OK, "%+v", h)

	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
	require.NoError(t, err)
	require.Equal(t, 0, s.Owner)
	require.Equal(t, "openwiki/", s.Scope)
	list, err := c.Sessions(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	got, err := c.Session(ctx, s.ID)
	require.NoError(t, err)
	require.True(t, got.Mounted)

	// The same decisions and rule text as the policy in-process.
	pol, err := sandbox.NewPolicy(sandbox.SessionConfig{Repo: repo, Profile: docsProfile(t)})
	require.NoError(t, err)
	for _, argv := range [][]string{{"grep", "-rn", "TODO", "docs"}, {"sh", "-c", "id"}, {"cat", "secrets/key.txt"}, {"find", ".", "-delete"}} {
		want, wantErr := pol.Check(argv)
		dec, err := c.Check(ctx, s.ID, argv)
		if wantErr != nil {
			var r *allowlist.Refusal
			require.ErrorAs(t, err, &r, "%q", argv)
			require.Equal(t, wantErr.Error(), err.Error())
			continue
		}
		require.NoError(t, err)
		require.Equal(t, want.Argv, dec.Argv)
	}

	res, err := c.Exec(ctx, s.ID, []string{"grep", "-rn", "TODO", "docs"}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	require.Equal(t, "docs/a.md:1:alpha TODO one\n", string(res.Stdout))
	var out, errb bytes.Buffer
	res, err = c.Exec(ctx, s.ID, []string{"cat", "README.md", "missing"}, &out, &errb)
	require.NoError(t, err)
	require.Equal(t, 1, res.ExitCode)
	require.Equal(t, "# demo\nhello\nworld\n", out.String())
	require.Contains(t, errb.String(), "missing")
	_, err = c.Exec(ctx, s.ID, []string{"cat", "secrets/key.txt"}, &out, &errb)
	var r *allowlist.Refusal
	require.ErrorAs(t, err, &r)
	res, err = c.Exec(ctx, s.ID, []string{"cp", "README.md", "openwiki/readme.md"}, nil, nil)
	require.NoError(t, err)
	require.Len(t, res.Changes, 1)

	rd, err := c.Read(ctx, s.ID, api.Read{Path: "docs/a.md"})
	require.NoError(t, err)
	require.Equal(t, "alpha TODO one\n", rd.Content)
	_, err = c.Read(ctx, s.ID, api.Read{Path: "AGENTS.md"})
	require.ErrorAs(t, err, &r)
	ls, err := c.List(ctx, s.ID, api.List{Path: "docs"})
	require.NoError(t, err)
	for _, e := range ls.Entries {
		require.NotEqual(t, "docs/cert.pem", e.Path)
	}
	g, err := c.Glob(ctx, s.ID, api.Glob{Pattern: "docs/*.md"})
	require.NoError(t, err)
	require.NotEmpty(t, g.Matches)
	se, err := c.Search(ctx, s.ID, api.Search{Regexp: "SECRET"})
	require.NoError(t, err)
	require.Empty(t, se.Matches, "hidden files are never searched")
	w, err := c.Write(ctx, s.ID, api.Write{Path: "openwiki/new.md", Content: "draft\n"})
	require.NoError(t, err)
	_, err = c.Edit(ctx, s.ID, api.Edit{Path: "openwiki/new.md", Old: "draft", New: "final", ExpectedSHA256: w.SHA256})
	require.NoError(t, err)
	_, err = c.Edit(ctx, s.ID, api.Edit{Path: "openwiki/new.md", Old: "final", New: "x", ExpectedSHA256: w.SHA256})
	var fe *client.FileError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "conflict", fe.Code)
	_, err = c.Write(ctx, s.ID, api.Write{Path: "docs/a.md", Content: "x"})
	require.ErrorAs(t, err, &r)

	cs, err := c.Diff(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, cs.Changes, 2)
	patch, err := c.Patch(ctx, s.ID)
	require.NoError(t, err)
	gitApplyCheck(t, repo, patch)
	stat, err := c.Stat(ctx, s.ID)
	require.NoError(t, err)
	require.Contains(t, stat, "openwiki/new.md")

	rep, err := c.Apply(ctx, s.ID, api.Apply{})
	require.NoError(t, err)
	require.True(t, rep.DryRun)
	var tokens []string
	for _, it := range rep.Items {
		require.Equal(t, "pending", it.Status)
		tokens = append(tokens, it.Token)
	}
	rep, err = c.Apply(ctx, s.ID, api.Apply{Approve: tokens, DryRun: true})
	require.NoError(t, err)
	require.Empty(t, rep.Written)
	_, err = os.Stat(filepath.Join(repo, "openwiki/new.md"))
	require.True(t, os.IsNotExist(err), "a dry run writes nothing")
	_, err = c.Apply(ctx, s.ID, api.Apply{Approve: []string{"0000000000000000"}})
	requireAPIKind(t, err, api.KindRefused)
	rep, err = c.Apply(ctx, s.ID, api.Apply{Approve: tokens})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"openwiki/new.md", "openwiki/readme.md"}, rep.Written)
	data, err := os.ReadFile(filepath.Join(repo, "openwiki/new.md"))
	require.NoError(t, err)
	require.Equal(t, "final\n", string(data))

	pr, err := c.Prune(ctx, "1h")
	require.NoError(t, err)
	require.Empty(t, pr.Pruned)
	rm, err := c.RemoveSession(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(state, "patches", s.ID+".patch"), rm.Patch)
	kept, err := os.ReadFile(rm.Patch)
	require.NoError(t, err)
	require.Contains(t, string(kept), "+++ b/openwiki/new.md")
	_, err = c.Session(ctx, s.ID)
	requireAPIKind(t, err, api.KindNotFound)

	// Every record the calls wrote names this process, the peer.
	recs, err := audit.Read(filepath.Join(state, audit.FileName))
	require.NoError(t, err)
	n := 0
	for _, rec := range recs {
		if rec.Session != s.ID {
			continue
		}
		n++
		require.Equal(t, audit.Peer{UID: os.Getuid(), GID: os.Getgid(), PID: os.Getpid()}, rec.Peer, "%s record", rec.Type)
	}
	require.Greater(t, n, 10)

	d.stop(true)
	requireDaemonLeftNothing(t, state)
}

func requireAPIKind(t *testing.T, err error, kind string) {
	t.Helper()
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, kind, ce.API.Kind, "%v", err)
}

// daemonClientPath builds integration/daemonclient where every uid can
// run it.
func daemonClientPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "corral-it-dc-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "daemonclient")
	cmd := exec.Command("go", "build", "-o", p, "./integration/daemonclient")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return p
}

type dcOutput struct {
	Result  json.RawMessage `json:"result"`
	Kind    string          `json:"kind"`
	Status  int             `json:"status"`
	Message string          `json:"message"`
}

// asUID runs the daemon client as uid:gid (nobody:nogroup by default).
func asUID(t *testing.T, bin string, uid, gid int, args ...string) dcOutput {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "daemonclient %q: %s", args, stderr.String())
	var o dcOutput
	require.NoError(t, json.Unmarshal(out, &o), "%s", out)
	return o
}

// TestDaemonTwoUIDs: a second uid (nobody, run through SO_PEERCRED as
// itself) can neither list, get, exec in, read, diff, apply nor remove the
// first uid's session: 404 every time, the same answer as for a session
// that does not exist. Its own session is its own; it cannot open a
// repository it cannot read.
func TestDaemonTwoUIDs(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock)
	c := d.client()
	ctx := context.Background()
	nobody, err := user.Lookup("nobody")
	require.NoError(t, err)
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	bin := daemonClientPath(t)

	repo := ftRepo(t)
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
	require.NoError(t, err)
	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/mine.md", Content: "root's\n"})
	require.NoError(t, err)

	o := asUID(t, bin, uid, gid, sock, "list")
	require.Empty(t, o.Kind, o.Message)
	require.JSONEq(t, "[]", string(o.Result))
	for _, id := range []string{s.ID, "0123456789ab"} {
		for _, args := range [][]string{
			{"get", id}, {"exec", id, "cat", "openwiki/mine.md"}, {"stream", id, "ls"}, {"read", id, "openwiki/mine.md"},
			{"write", id, "openwiki/x.md", "x"}, {"diff", id}, {"apply", id, "0123456789abcdef"}, {"remove", id},
		} {
			o := asUID(t, bin, uid, gid, append([]string{sock}, args...)...)
			require.Equal(t, api.KindNotFound, o.Kind, "%q as uid %d: %s", args, uid, o.Message)
			require.Equal(t, 404, o.Status)
			require.Equal(t, "session "+id+": not found", o.Message)
		}
	}
	_, err = c.Session(ctx, s.ID)
	require.NoError(t, err, "the session is untouched")
	rd, err := c.Read(ctx, s.ID, api.Read{Path: "openwiki/mine.md"})
	require.NoError(t, err)
	require.Equal(t, "root's\n", rd.Content)

	// ftRepo lives below a directory only root can search.
	o = asUID(t, bin, uid, gid, sock, "create", repo)
	require.Equal(t, api.KindRefused, o.Kind, o.Message)
	require.Contains(t, o.Message, fmt.Sprintf("uid %d (the caller) may not access it", uid))

	theirs := openRepo(t, map[string]string{"README.md": "nobody's\n", "openwiki/index.md": "# i\n"})
	o = asUID(t, bin, uid, gid, sock, "create", theirs)
	require.Empty(t, o.Kind, o.Message)
	var ts api.Session
	require.NoError(t, json.Unmarshal(o.Result, &ts))
	require.Equal(t, uid, ts.Owner)
	o = asUID(t, bin, uid, gid, sock, "exec", ts.ID, "cat", "README.md")
	require.Empty(t, o.Kind, o.Message)
	var er api.ExecResult
	require.NoError(t, json.Unmarshal(o.Result, &er))
	require.Equal(t, "nobody's\n", string(er.Stdout))
	list, err := c.Sessions(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2, "root sees every session")
	recs, err := audit.Read(filepath.Join(state, audit.FileName))
	require.NoError(t, err)
	var created bool
	for _, rec := range recs {
		if rec.Session == ts.ID && rec.Type == audit.TypeSessionCreated {
			created = true
			require.Equal(t, uid, rec.Peer.UID)
		}
	}
	require.True(t, created)
	o = asUID(t, bin, uid, gid, sock, "remove", ts.ID)
	require.Empty(t, o.Kind, o.Message)
	_, err = c.RemoveSession(ctx, s.ID)
	require.NoError(t, err)
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}

// TestDaemonSocket: the socket is 0660 root:GROUP in a 0755 directory
// (0600 root's alone when the group does not exist); a second daemon on
// the same state directory refuses with one line.
func TestDaemonSocket(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock)
	nogroup, err := user.LookupGroup("nogroup")
	require.NoError(t, err)
	st, err := os.Stat(sock)
	require.NoError(t, err)
	require.Equal(t, os.ModeSocket|0o660, st.Mode())
	require.Equal(t, nogroup.Gid, strconv.Itoa(int(st.Sys().(*syscall.Stat_t).Gid)))
	require.Equal(t, 0, int(st.Sys().(*syscall.Stat_t).Uid))
	dst, err := os.Stat(filepath.Dir(sock))
	require.NoError(t, err)
	require.Equal(t, os.ModeDir|0o755, dst.Mode())

	_, sock2 := daemonDirs(t)
	cmd := exec.Command(testutil.CorralPath(), "--namespace", testutil.Namespace, "--state-dir", state, "daemon", "--socket", sock2)
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 125, ee.ExitCode())
	require.Equal(t, fmt.Sprintf("corral: another corral daemon serves this state directory (%s, pid %d)\n", state, d.cmd.Process.Pid), string(out))
	d.stop(true)
	_, err = os.Stat(sock)
	require.True(t, os.IsNotExist(err), "the daemon removes its socket")

	state3, sock3 := daemonDirs(t)
	d3 := startDaemon(t, state3, sock3, "--socket-group", "no-such-group-corral")
	st, err = os.Stat(sock3)
	require.NoError(t, err)
	require.Equal(t, os.ModeSocket|0o600, st.Mode())
	d3.stop(true)
}

// TestDaemonKilledMidCall: SIGKILL of the daemon while a call runs and
// its pool holds containers made ahead (on runc and crun started, each
// corral-init waiting on its control FIFO); nothing runs in those while
// no daemon is there, a restarted daemon reaps them with the orphaned
// call's container and never hands one out (its pool is new), and the
// session and its writes are intact.
func TestDaemonKilledMidCall(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock)
	c := d.client()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"README.md": "# r\n", "slow.txt": slowLine(), "openwiki/index.md": "# i\n"})
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
	require.NoError(t, err)
	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: "kept\n"})
	require.NoError(t, err)
	_, err = c.Exec(ctx, s.ID, []string{"cp", "README.md", "openwiki/b.md"}, nil, nil)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { _, err := c.Exec(ctx, s.ID, slowArgv, nil, nil); done <- err }()
	require.Eventually(t, func() bool { return len(runningContainers(t, state)) == 1 }, 60*time.Second, 100*time.Millisecond)
	orphan := runningContainers(t, state)[0]
	require.Eventually(t, func() bool { return len(madeAhead(t, state)) > 0 }, 60*time.Second, 100*time.Millisecond, "the pool made no container ahead")
	d.kill()
	require.Error(t, <-done, "the call fails with its daemon")
	require.Contains(t, daemonContainers(t, state), orphan, "the container outlives the killed daemon")
	// Without a daemon, what waited still waits: corral-init alone, no
	// tool.
	time.Sleep(time.Second)
	ahead := madeAhead(t, state)
	require.NotEmpty(t, ahead, "the containers made ahead outlive the killed daemon, idle")
	for id, runs := range daemonContainers(t, state) {
		require.True(t, id == orphan || !runs, "container %s of the killed daemon runs a call", id)
	}

	d2 := startDaemon(t, state, sock)
	require.Contains(t, d2.stderr.String(), "adopted 1 session(s)")
	require.NotContains(t, daemonContainers(t, state), orphan, "the restarted daemon reaped the orphan")
	for id := range ahead {
		require.NotContains(t, daemonContainers(t, state), id, "the restarted daemon reaped the container made ahead")
		_, err := os.Lstat(filepath.Join(state, "sessions", s.ID, "layout", "req", id))
		require.ErrorIs(t, err, fs.ErrNotExist, "the request directory of the reaped %s", id)
	}
	c2 := d2.client()
	got, err := c2.Session(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, 0, got.Owner)
	rd, err := c2.Read(ctx, s.ID, api.Read{Path: "openwiki/a.md"})
	require.NoError(t, err)
	require.Equal(t, "kept\n", rd.Content)
	cs, err := c2.Diff(ctx, s.ID)
	require.NoError(t, err)
	var paths []string
	for _, ch := range cs.Changes {
		paths = append(paths, ch.Path)
	}
	require.Equal(t, []string{"openwiki/a.md", "openwiki/b.md"}, paths)
	res, err := c2.Exec(ctx, s.ID, []string{"cat", "openwiki/b.md"}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, "# r\n", string(res.Stdout))

	// SIGTERM closes sessions without removing them: a third daemon
	// continues the session.
	d2.stop(true)
	d3 := startDaemon(t, state, sock)
	c3 := d3.client()
	rd, err = c3.Read(ctx, s.ID, api.Read{Path: "openwiki/a.md"})
	require.NoError(t, err)
	require.Equal(t, "kept\n", rd.Content)
	_, err = c3.RemoveSession(ctx, s.ID)
	require.NoError(t, err)
	d3.stop(true)
	requireDaemonLeftNothing(t, state)
}

// TestDaemonClientKilledMidCall: a client process killed mid-call (its
// connection closes) cancels the call; the container is killed and
// reaped.
func TestDaemonClientKilledMidCall(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock)
	c := d.client()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"README.md": "# r\n", "slow.txt": slowLine()})
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo, ReadOnly: true})
	require.NoError(t, err)
	bin := daemonClientPath(t)
	for _, op := range []string{"exec", "stream"} {
		cmd := exec.Command(bin, append([]string{sock, op, s.ID}, slowArgv...)...)
		require.NoError(t, cmd.Start())
		require.Eventually(t, func() bool { return len(runningContainers(t, state)) == 1 }, 60*time.Second, 100*time.Millisecond)
		victim := runningContainers(t, state)[0]
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		require.Eventually(t, func() bool { _, ok := daemonContainers(t, state)[victim]; return !ok }, 30*time.Second, 100*time.Millisecond,
			"%s: the container of a call whose client died must be killed and reaped", op)
	}
	// The session serves the next call.
	res, err := c.Exec(ctx, s.ID, []string{"cat", "README.md"}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, "# r\n", string(res.Stdout))
	_, err = c.RemoveSession(ctx, s.ID)
	require.NoError(t, err)
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}

// TestDaemonBusy: over --max-running a call waits --queue-wait, then gets
// 429 busy; once the slot frees calls run again.
func TestDaemonBusy(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock, "--max-running", "1", "--queue-wait", "1s")
	c := d.client()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"README.md": "# r\n", "slow.txt": slowLine()})
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo, ReadOnly: true})
	require.NoError(t, err)
	slowCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := c.Exec(slowCtx, s.ID, slowArgv, nil, nil); done <- err }()
	require.Eventually(t, func() bool { return len(runningContainers(t, state)) == 1 }, 60*time.Second, 100*time.Millisecond)
	h, err := c.Health(ctx)
	require.NoError(t, err)
	require.Equal(t, api.CallsState{Running: 1, Cap: 1}, h.Calls)

	start := time.Now()
	_, err = c.Exec(ctx, s.ID, []string{"cat", "README.md"}, nil, nil)
	requireAPIKind(t, err, api.KindBusy)
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, http.StatusTooManyRequests, ce.Status)
	require.Equal(t, "busy: 1 calls are running (the daemon's --max-running) and no slot freed within 1s (--queue-wait); retry later", err.Error())
	require.GreaterOrEqual(t, time.Since(start), time.Second)
	// Calls that run no container are not held back. (Not diff of this
	// session: a change set is never read while a call of its session
	// runs.)
	_, err = c.Check(ctx, s.ID, []string{"cat", "README.md"})
	require.NoError(t, err)
	_, err = c.Sessions(ctx)
	require.NoError(t, err)

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Eventually(t, func() bool {
		res, err := c.Exec(ctx, s.ID, []string{"cat", "README.md"}, nil, nil)
		return err == nil && string(res.Stdout) == "# r\n"
	}, 30*time.Second, 200*time.Millisecond)
	_, err = c.RemoveSession(ctx, s.ID)
	require.NoError(t, err)
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}

// TestDaemonExamples runs the Python and Node examples of docs/examples
// (standard library only) against a real daemon.
func TestDaemonExamples(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock)
	for _, ex := range []struct {
		name string
		argv func(repo string) []string
		file string
		ok   string
	}{
		{"python3", func(repo string) []string {
			return []string{"../docs/examples/python/corral_client.py", "--socket", sock, "--repo", repo}
		}, "openwiki/python.md", "python client: ok"},
		{"node", func(repo string) []string {
			return []string{"../docs/examples/typescript/corral-client.mjs", sock, repo}
		}, "openwiki/node.md", "node client: ok"},
	} {
		bin, err := exec.LookPath(ex.name)
		if err != nil {
			testutil.Missing(t, ex.name+" is not installed")
			continue
		}
		repo := newRepo(t, map[string]string{"README.md": "# example\n", "openwiki/index.md": "# i\n"})
		before := testutil.Snapshot(t, repo)
		cmd := exec.Command(bin, ex.argv(repo)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s example:\n%s", ex.name, out)
		t.Logf("%s example:\n%s", ex.name, out)
		sc := bufio.NewScanner(bytes.NewReader(out))
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		require.Contains(t, lines, ex.ok)
		require.Contains(t, string(out), "refused as expected: refused - refused (CMD)")
		require.Contains(t, string(out), "+++ b/"+ex.file)
		require.Contains(t, string(out), "would-apply")
		require.Equal(t, before, testutil.Snapshot(t, repo), "a dry run writes nothing")
	}
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}

// TestExampleClientsStayAlike: the TypeScript source and the .mjs Node
// runs name the same routes and methods.
func TestExampleClientsStayAlike(t *testing.T) {
	ts, err := os.ReadFile("../docs/examples/typescript/corral-client.ts")
	require.NoError(t, err)
	mjs, err := os.ReadFile("../docs/examples/typescript/corral-client.mjs")
	require.NoError(t, err)
	calls := func(src []byte) []string {
		var out []string
		for _, l := range strings.Split(string(src), "\n") {
			l = strings.TrimSpace(l)
			if i := strings.Index(l, `this.call("`); i >= 0 {
				out = append(out, l[i:])
			}
			if i := strings.Index(l, `await c.`); i >= 0 {
				out = append(out, strings.SplitN(l[i:], "(", 2)[0])
			}
		}
		return out
	}
	require.Equal(t, calls(ts), calls(mjs))
	require.NotEmpty(t, calls(ts))
}

// TestDaemonSocketActivation: started by systemd-socket-activate (the
// protocol of systemd's .socket units: LISTEN_FDS), the daemon serves on
// the socket it was passed.
func TestDaemonSocketActivation(t *testing.T) {
	activate, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		testutil.Missing(t, "systemd-socket-activate is not installed")
		return
	}
	testutil.Executor(t)
	require.NoError(t, testutil.BuildCorral())
	state, sock := daemonDirs(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(sock), 0o755))
	// systemd-socket-activate passes no environment but what -E names.
	cmd := exec.Command(activate, "-l", sock, "-E", "CORRAL_INIT="+os.Getenv("CORRAL_INIT"),
		testutil.CorralPath(), "--address", testutil.Address(), "--namespace", testutil.Namespace, "--state-dir", state,
		"--image", testutil.TestImageRef, "daemon", "--socket", filepath.Join(filepath.Dir(sock), "unused.sock"))
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+testutil.Address())
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			require.NoError(t, err, stderr.String())
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("the activated daemon did not stop:\n%s", stderr.String())
		}
		requireDaemonLeftNothing(t, state)
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(sock); return err == nil }, 10*time.Second, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := client.New(sock)
	defer c.Close()
	v, err := c.Version(ctx)
	require.NoError(t, err, stderr.String())
	require.Equal(t, "v1", v.API)
	// The daemon wrote the line before it answered, but its standard error
	// reaches the buffer through a pipe and a copying goroutine.
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "(from systemd)") }, 10*time.Second, 20*time.Millisecond, stderr.String())
	_, err = os.Stat(filepath.Join(filepath.Dir(sock), "unused.sock"))
	require.True(t, os.IsNotExist(err), "with a socket passed, --socket is not made")
}

// TestDaemonStopCancelsAfterGrace: SIGTERM lets a call in flight run for
// --grace, then cancels it (its container killed and reaped), and the
// daemon exits 0 keeping the session.
func TestDaemonStopCancelsAfterGrace(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock, "--grace", "2s")
	c := d.client()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"README.md": "# r\n", "slow.txt": slowLine()})
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { _, err := c.Exec(ctx, s.ID, slowArgv, io.Discard, nil); done <- err }()
	require.Eventually(t, func() bool { return len(runningContainers(t, state)) == 1 }, 60*time.Second, 100*time.Millisecond)
	start := time.Now()
	d.stop(true)
	took := time.Since(start)
	require.GreaterOrEqual(t, took, 2*time.Second, "calls in flight get the grace")
	require.Less(t, took, 45*time.Second)
	require.Error(t, <-done)
	require.Contains(t, d.stderr.String(), "canceling the calls still running after 2s")
	require.Empty(t, runningContainers(t, state), "the canceled call's container is gone")

	d2 := startDaemon(t, state, sock)
	c2 := d2.client()
	_, err = c2.Session(ctx, s.ID)
	require.NoError(t, err, "SIGTERM keeps the session")
	_, err = c2.RemoveSession(ctx, s.ID)
	require.NoError(t, err)
	d2.stop(true)
	requireDaemonLeftNothing(t, state)
}
