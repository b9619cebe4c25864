package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

const (
	podA = "0f8e7d6c-5b4a-4938-8271-6a5b4c3d2e1f"
	podB = "11111111-2222-3333-4444-555555555555"
)

// kubeletRoot is a fake kubelet tree: Pod A has the emptyDir "work"
// holding repo/, Pod B the emptyDir "other".
func kubeletRoot(t *testing.T) string {
	root := t.TempDir()
	for _, d := range []string{
		"pods/" + podA + "/volumes/kubernetes.io~empty-dir/work/repo/openwiki",
		"pods/" + podB + "/volumes/kubernetes.io~empty-dir/other/repo",
	} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	return root
}

// TestPodMode: in Pod mode a session belongs to the calling Pod, its
// repository is that Pod's own volume and nothing else, another Pod gets
// 404, a caller in no Pod is refused unless root, and the Pod's deletion
// ends the session and keeps its patch for the admins.
func TestPodMode(t *testing.T) {
	root := kubeletRoot(t)
	var state string
	e := newEnv(t, func(o *Options) { o.KubeletRoot = root; state = o.StateDir })
	e.fake.patchDir = filepath.Join(state, "patches")
	ctx := context.Background()
	a, _ := e.client("1000:1000::" + podA)
	b, _ := e.client("1000:1000::" + podB)
	host, _ := e.client("1000:1000")
	admin, _ := e.client("0:0")

	s, err := a.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "work", SubPath: "repo"}})
	require.NoError(t, err)
	require.Equal(t, "pod:"+podA, s.OwnedBy)
	require.Equal(t, &api.Volume{Name: "work", SubPath: "repo"}, s.Volume)
	require.Equal(t, filepath.Join(root, "pods", podA, "volumes/kubernetes.io~empty-dir/work/repo"), s.Repo)

	for _, tc := range []struct {
		name string
		req  api.CreateSession
		kind string
		code int
		msg  string
	}{
		{"a repo path", api.CreateSession{Repo: e.repo}, api.KindInvalid, 400, "in Pod mode the repository is one of the calling Pod's volumes"},
		{"both", api.CreateSession{Repo: e.repo, Volume: &api.Volume{Name: "work"}}, api.KindInvalid, 400, "never a node path"},
		{"no volume", api.CreateSession{}, api.KindInvalid, 400, "volume: invalid argument: required in Pod mode"},
		{"another Pod's volume", api.CreateSession{Volume: &api.Volume{Name: "other"}}, api.KindInvalid, 400, `volume "other": invalid argument: the calling Pod has no such volume`},
		{"escape by subPath", api.CreateSession{Volume: &api.Volume{Name: "work", SubPath: "../../../../" + podB + "/volumes"}}, api.KindInvalid, 400, "without \"..\""},
		{"a profile file", api.CreateSession{Volume: &api.Volume{Name: "work"}, Profile: "/etc/corral/p.yaml"}, api.KindInvalid, 400, "never a node path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.CreateSession(ctx, tc.req)
			requireKind(t, err, tc.kind, tc.code)
			require.ErrorContains(t, err, tc.msg)
		})
	}

	// Pod B, with the same uid: the session does not exist for it.
	_, err = b.Session(ctx, s.ID)
	requireKind(t, err, api.KindNotFound, 404)
	_, err = b.Read(ctx, s.ID, api.Read{Path: "openwiki/a.md"})
	requireKind(t, err, api.KindNotFound, 404)
	list, err := b.Sessions(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
	pps, err := b.Patches(ctx)
	require.NoError(t, err)
	require.Empty(t, pps, "a Pod lists its own kept patches only")

	// A caller in no Pod that is not root: refused, whatever it asks.
	_, err = host.Version(ctx)
	requireKind(t, err, api.KindRefused, 403)
	require.ErrorContains(t, err, "uid 1000 (pid 1) is in no Kubernetes Pod")
	_, err = host.Session(ctx, s.ID)
	requireKind(t, err, api.KindRefused, 403)

	// Root on the node: an admin.
	got, err := admin.Session(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, "pod:"+podA, got.OwnedBy)
	_, err = admin.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "work"}})
	requireKind(t, err, api.KindRefused, 403)

	// The Pod writes, then is deleted: its session ends, the patch stays.
	_, err = a.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: "kept\n"})
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(root, "pods", podA)))
	kept, err := e.srv.EndGonePods(ctx)
	require.NoError(t, err)
	require.Len(t, kept, 1)
	_, err = admin.Session(ctx, s.ID)
	requireKind(t, err, api.KindNotFound, 404)
	pps, err = admin.Patches(ctx)
	require.NoError(t, err)
	require.Len(t, pps, 1)
	require.Equal(t, s.ID, pps[0].ID)
	require.Equal(t, podA, pps[0].PodUID)
	require.Equal(t, []string{"openwiki/a.md"}, pps[0].Files)
	require.Equal(t, filepath.Join(state, "patches", podA, s.ID+".patch"), pps[0].Path)
	require.Empty(t, pps[0].Error)
	patch, err := admin.PodPatch(ctx, s.ID)
	require.NoError(t, err)
	require.Contains(t, string(patch), "+kept")
	var rec api.PodPatch
	data, err := os.ReadFile(filepath.Join(state, "patches", podA, s.ID+".json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &rec))
	require.Equal(t, pps[0].Files, rec.Files)
	_, err = b.PodPatch(ctx, s.ID)
	requireKind(t, err, api.KindNotFound, 404)
	require.Equal(t, []audit.Event{&audit.SessionEnded{Reason: "its owner Pod was deleted", Pod: podA, Patch: pps[0].Path, Files: []string{"openwiki/a.md"}}}, e.fake.audited)
}

// TestPodModeOwnPod: a process in the daemon's own Pod (kubectl exec into
// it), whatever its uid, is an admin; a Pod whose identity could not be
// read is refused.
func TestPodModeOwnPod(t *testing.T) {
	const own = "22222222-3333-4444-5555-666666666666"
	root := kubeletRoot(t)
	e := newEnv(t, func(o *Options) { o.KubeletRoot = root })
	e.srv.ownPod = own
	ctx := context.Background()
	a, _ := e.client("1000:1000::" + podA)
	s, err := a.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "work"}})
	require.NoError(t, err)
	inOwn, _ := e.client("1000:1000::" + own)
	got, err := inOwn.Session(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, "pod:"+podA, got.OwnedBy)
	_, err = inOwn.Patches(ctx)
	require.NoError(t, err)

	require.Error(t, e.srv.refusePeer(Peer{UID: 0, PID: 7, PodErr: errors.New("pid 7: the calling process exited")}))
	require.ErrorContains(t, e.srv.refusePeer(Peer{UID: 0, PID: 7, PodErr: errors.New("gone")}), "permission denied: telling the caller's Pod (uid 0, pid 7): gone")
	require.NoError(t, e.srv.refusePeer(Peer{UID: 0, PID: 7}))
	require.NoError(t, e.srv.refusePeer(Peer{UID: 1000, PID: 7, Pod: podB}))
}

// TestPodModeEndKilledAtEveryStep: a daemon killed at any step of ending
// a deleted Pod's session — inside the backend's removal (the session
// ended, its patch kept, nothing recorded yet), or after each step of
// endKeptSession — leaves what the next daemon needs: after its start
// (ForgetMissing, EndGonePods) the patch is listed once, whole, beside
// its record, and the session's owner record is gone. Before, a kill
// after the backend's removal lost the patch from the listing (the
// owner record was dropped with the session, then no record was
// written).
func TestPodModeEndKilledAtEveryStep(t *testing.T) {
	for _, step := range []string{"in the backend's removal", "recorded", "ended", "moved", "completed"} {
		t.Run(step, func(t *testing.T) {
			root := kubeletRoot(t)
			var opts Options
			e := newEnv(t, func(o *Options) { o.KubeletRoot = root; opts = *o })
			e.fake.patchDir = filepath.Join(opts.StateDir, "patches")
			ctx := context.Background()
			a, _ := e.client("1000:1000::" + podA)
			s, err := a.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "work", SubPath: "repo"}})
			require.NoError(t, err)
			_, err = a.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: "kept\n"})
			require.NoError(t, err)
			require.NoError(t, os.RemoveAll(filepath.Join(root, "pods", podA)))

			killed := errors.New("killed")
			if step == "in the backend's removal" {
				_, err := e.fake.Remove(ctx, s.ID, false)
				require.NoError(t, err)
			} else {
				e.srv.endPodHook = func(at string) error {
					if at == step {
						return killed
					}
					return nil
				}
				_, err := e.srv.EndGonePods(ctx)
				require.ErrorIs(t, err, killed)
			}
			if step == "recorded" || step == "ended" || step == "moved" {
				pps, err := e.srv.keptPatches()
				require.NoError(t, err)
				require.Empty(t, pps, "a session being ended has no kept patch listed yet")
			}

			// The next daemon, on the same state directory.
			srv, pps := restartKept(t, e.fake, opts)
			require.Len(t, pps, 1)
			require.Equal(t, s.ID, pps[0].ID)
			require.Equal(t, podA, pps[0].PodUID)
			require.Empty(t, pps[0].Error)
			require.Equal(t, []string{"openwiki/a.md"}, pps[0].Files)
			require.Equal(t, filepath.Join(opts.StateDir, "patches", podA, s.ID+".patch"), pps[0].Path)
			require.FileExists(t, pps[0].Path)
			require.NoFileExists(t, filepath.Join(opts.StateDir, "patches", s.ID+".patch"))
			require.Empty(t, srv.owners.ofPod(podA))
			require.NoFileExists(t, filepath.Join(opts.StateDir, "daemon", "sessions", s.ID+".json"))
		})
	}
}

// TestPodModeApplyBelowTheVolume: in Pod mode an apply's write check is
// made as the caller from the Pod's volume down, never through the
// kubelet's directory on the node, which the caller may not search (here
// the test's temporary directory, root's alone); below the volume the
// caller's own access still counts.
func TestPodModeApplyBelowTheVolume(t *testing.T) {
	root := kubeletRoot(t)
	e := newEnv(t, func(o *Options) { o.KubeletRoot = root })
	ctx := context.Background()
	a, _ := e.client("1000:1000::" + podA)
	repo := filepath.Join(root, "pods", podA, "volumes/kubernetes.io~empty-dir/work/repo")
	s, err := a.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "work", SubPath: "repo"}})
	require.NoError(t, err)
	_, err = a.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: "x\n"})
	require.NoError(t, err)

	// The repository root is root's 0755: the caller may not write it.
	_, err = a.Apply(ctx, s.ID, api.Apply{Approve: []string{fakeToken}})
	requireKind(t, err, api.KindRefused, 403)
	require.ErrorContains(t, err, "uid 1000 (the caller) may not access it")

	require.NoError(t, os.Chown(repo, 1000, 1000))
	rep, err := a.Apply(ctx, s.ID, api.Apply{Approve: []string{fakeToken}})
	require.NoError(t, err)
	require.False(t, rep.DryRun)
}
