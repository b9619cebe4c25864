package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// nobodyIDs returns nobody's uid and gid.
func nobodyIDs(t *testing.T) (uid, gid int) {
	t.Helper()
	nobody, err := user.Lookup("nobody")
	require.NoError(t, err)
	uid, _ = strconv.Atoi(nobody.Uid)
	gid, _ = strconv.Atoi(nobody.Gid)
	return uid, gid
}

// TestDaemonCopiesOnlyWhatTheCallerCanRead: a session copies its write
// directory (or its page) out of the repository as root, owned by the
// container's uid. Another uid naming a repository it may read, whose
// openwiki/ holds a file it may not (0600, or below a 0700 directory),
// is refused at creation, naming the path — it never reads the file
// through its session's tools — and nothing is left behind. Once the
// files are readable to it, the same request makes a session.
func TestDaemonCopiesOnlyWhatTheCallerCanRead(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock)
	c := d.client()
	uid, gid := nobodyIDs(t)
	bin := daemonClientPath(t)
	repo := openRepo(t, map[string]string{
		"README.md": "readme\n", "openwiki/index.md": "# i\n",
		"openwiki/secret.md": "root only\n", "openwiki/private/notes.md": "below a 0700 directory\n",
	})
	require.NoError(t, os.Chmod(filepath.Join(repo, "openwiki/secret.md"), 0o600))
	require.NoError(t, os.Chmod(filepath.Join(repo, "openwiki/private"), 0o700))

	for _, tc := range []struct {
		req  api.CreateSession
		path string
	}{
		{api.CreateSession{Repo: repo}, "openwiki/private"}, // sorted: private before secret.md
		{api.CreateSession{Repo: repo, Scope: "openwiki/private"}, "openwiki/private"},
		{api.CreateSession{Repo: repo, Page: "openwiki/secret.md"}, "openwiki/secret.md"},
		{api.CreateSession{Repo: repo, Page: "openwiki/private/notes.md"}, "openwiki/private"},
	} {
		req, err := json.Marshal(tc.req)
		require.NoError(t, err)
		o := asUID(t, bin, uid, gid, sock, "create-json", string(req))
		if o.Kind == "" {
			var s api.Session
			require.NoError(t, json.Unmarshal(o.Result, &s))
			leak := asUID(t, bin, uid, gid, sock, "read", s.ID, tc.path)
			t.Errorf("%s: uid %d made a session; reading %s through it: %s%s", req, uid, tc.path, leak.Result, leak.Message)
			asUID(t, bin, uid, gid, sock, "remove", s.ID)
			continue
		}
		require.Equal(t, api.KindRefused, o.Kind, "%s: %s", req, o.Message)
		require.Equal(t, 403, o.Status)
		require.Equal(t, fmt.Sprintf("repository path %q: permission denied: uid %d (the caller) may not access it", tc.path, uid), o.Message)
	}
	list, err := c.Sessions(context.Background())
	require.NoError(t, err)
	require.Empty(t, list, "a refused creation leaves no session")
	require.Empty(t, sessionEntries(t, state), "a refused creation leaves no session directory")

	require.NoError(t, os.Chmod(filepath.Join(repo, "openwiki/secret.md"), 0o644))
	require.NoError(t, os.Chmod(filepath.Join(repo, "openwiki/private"), 0o755))
	o := asUID(t, bin, uid, gid, sock, "create", repo)
	require.Empty(t, o.Kind, o.Message)
	var s api.Session
	require.NoError(t, json.Unmarshal(o.Result, &s))
	o = asUID(t, bin, uid, gid, sock, "remove", s.ID)
	require.Empty(t, o.Kind, o.Message)
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}

// TestDaemonApplyNeverReplacesWhatTheCallerCouldNot: an apply writes as
// root. In a sticky directory (mode 1777, as /tmp) the caller may create
// files but not replace or remove another user's (the kernel's
// restricted deletion, unlink(2)); the daemon must not do it for it.
// Nobody's modification and deletion of root's files there are refused
// (403, nothing written); its new file is applied.
func TestDaemonApplyNeverReplacesWhatTheCallerCouldNot(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock)
	uid, gid := nobodyIDs(t)
	bin := daemonClientPath(t)
	repo := openRepo(t, map[string]string{"README.md": "readme\n", "openwiki/victim.md": "root's page\n", "openwiki/gone.md": "root's other page\n"})
	require.NoError(t, os.Chmod(filepath.Join(repo, "openwiki"), os.ModeSticky|0o777))

	o := asUID(t, bin, uid, gid, sock, "create", repo)
	require.Empty(t, o.Kind, o.Message)
	var s api.Session
	require.NoError(t, json.Unmarshal(o.Result, &s))
	o = asUID(t, bin, uid, gid, sock, "write", s.ID, "openwiki/victim.md", "nobody was here\n")
	require.Empty(t, o.Kind, o.Message)
	o = asUID(t, bin, uid, gid, sock, "exec", s.ID, "rm", "openwiki/gone.md")
	require.Empty(t, o.Kind, o.Message)
	o = asUID(t, bin, uid, gid, sock, "write", s.ID, "openwiki/mine.md", "nobody's own\n")
	require.Empty(t, o.Kind, o.Message)
	o = asUID(t, bin, uid, gid, sock, "review", s.ID)
	require.Empty(t, o.Kind, o.Message)
	var rep api.Report
	require.NoError(t, json.Unmarshal(o.Result, &rep))
	tokens := map[string]string{}
	for _, it := range rep.Items {
		tokens[it.Path] = it.Token
	}
	require.Len(t, tokens, 3, "%s", o.Result)
	for _, p := range []string{"openwiki/victim.md", "openwiki/gone.md"} {
		o = asUID(t, bin, uid, gid, sock, "apply", s.ID, tokens[p])
		require.Equal(t, api.KindRefused, o.Kind, "%s: %s", p, o.Message)
		require.Equal(t, 403, o.Status)
		require.Equal(t, fmt.Sprintf("repository file %q: permission denied: uid %d (the caller) may not replace or remove it (sticky directory, another user's file)", p, uid), o.Message)
	}
	got, err := os.ReadFile(filepath.Join(repo, "openwiki/victim.md"))
	require.NoError(t, err)
	require.Equal(t, "root's page\n", string(got))
	got, err = os.ReadFile(filepath.Join(repo, "openwiki/gone.md"))
	require.NoError(t, err)
	require.Equal(t, "root's other page\n", string(got))
	o = asUID(t, bin, uid, gid, sock, "apply", s.ID, tokens["openwiki/mine.md"])
	require.Empty(t, o.Kind, o.Message)
	got, err = os.ReadFile(filepath.Join(repo, "openwiki/mine.md"))
	require.NoError(t, err)
	require.Equal(t, "nobody's own\n", string(got))
	o = asUID(t, bin, uid, gid, sock, "remove", s.ID)
	require.Empty(t, o.Kind, o.Message)
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}

// TestDaemonRemoveCancelsCallsInFlight: a session removed (by another
// client) while one of its calls runs cancels that call — its container
// killed and reaped — instead of waiting out the call's timeout; the
// call answers 404 as for a session that does not exist, the removal
// keeps the change set written before it, and nothing is left.
func TestDaemonRemoveCancelsCallsInFlight(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock)
	c, c2 := d.client(), d.client()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"README.md": "# r\n", "slow.txt": slowLine(), "openwiki/index.md": "# i\n"})
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: repo})
	require.NoError(t, err)
	_, err = c.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: "kept\n"})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { _, err := c.Exec(ctx, s.ID, slowArgv, nil, nil); done <- err }()
	require.Eventually(t, func() bool { return len(runningContainers(t, state)) == 1 }, 60*time.Second, 100*time.Millisecond)
	start := time.Now()
	rm, err := c2.RemoveSession(ctx, s.ID)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 20*time.Second, "the removal does not wait out the call")
	require.Equal(t, 1, rm.Changes)
	select {
	case err := <-done:
		requireAPIKind(t, err, api.KindNotFound)
		require.Equal(t, "session "+s.ID+": not found", err.Error())
	case <-time.After(20 * time.Second):
		t.Fatal("the call outlived its session's removal")
	}
	require.Empty(t, daemonContainers(t, state), "the call's container is reaped")
	list, err := c.Sessions(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}

// TestDaemonRemountsOnlyTheSameRepository: a session whose mounts are
// gone (a reboot) is mounted again from its record's repository path at
// the next start. Its owner (another uid) controls that path: replaced
// by a symbolic link to a directory only root may read, the session must
// refuse (409, naming why) instead of mounting root's directory as the
// owner's repository; nothing of it is read, nothing left mounted.
func TestDaemonRemountsOnlyTheSameRepository(t *testing.T) {
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock)
	uid, gid := nobodyIDs(t)
	bin := daemonClientPath(t)
	parent := openRepo(t, nil)
	require.NoError(t, os.Chown(parent, uid, gid))
	repo := filepath.Join(parent, "proj")
	require.NoError(t, os.Mkdir(repo, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("nobody's\n"), 0o644))
	require.NoError(t, os.Chown(repo, uid, gid))
	// An open directory below one only root may search: out of nobody's
	// reach by any path.
	rootOnly := newRepo(t, map[string]string{"inner/README.md": "root's secret\n"})
	require.NoError(t, os.Chmod(rootOnly, 0o700))
	require.NoError(t, os.Chmod(filepath.Join(rootOnly, "inner"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(rootOnly, "inner/README.md"), 0o644))

	o := asUID(t, bin, uid, gid, sock, "create-json", `{"repo":"`+repo+`","read_only":true}`)
	require.Empty(t, o.Kind, o.Message)
	var s api.Session
	require.NoError(t, json.Unmarshal(o.Result, &s))
	o = asUID(t, bin, uid, gid, sock, "exec", s.ID, "cat", "README.md")
	require.Empty(t, o.Kind, o.Message)
	d.stop(true)

	// A reboot: the session's host mounts are gone.
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(state))
	require.NoError(t, err)
	for i := len(ms) - 1; i >= 0; i-- {
		require.NoError(t, unix.Unmount(ms[i].Mountpoint, unix.MNT_DETACH))
	}
	// Nobody may do this: the parent is its own.
	require.NoError(t, os.RemoveAll(repo))
	require.NoError(t, os.Symlink(filepath.Join(rootOnly, "inner"), repo))

	d = startDaemon(t, state, sock)
	o = asUID(t, bin, uid, gid, sock, "exec", s.ID, "cat", "README.md")
	if o.Kind == "" {
		var er api.ExecResult
		require.NoError(t, json.Unmarshal(o.Result, &er))
		t.Fatalf("uid %d's session mounted the directory its path now links to: exit %d, stdout %q, stderr %q", uid, er.ExitCode, er.Stdout, er.Stderr)
	}
	require.Equal(t, api.KindConflict, o.Kind, o.Message)
	require.Equal(t, 409, o.Status)
	require.Equal(t, fmt.Sprintf("session %[1]s: repository %[2]s: failed precondition: it is not the directory the session was made on (replaced, or a symbolic link now); remove it with `corral session rm %[1]s`", s.ID, repo), o.Message)
	o = asUID(t, bin, uid, gid, sock, "remove", s.ID)
	require.Empty(t, o.Kind, o.Message)
	d.stop(true)
	requireDaemonLeftNothing(t, state)
}
