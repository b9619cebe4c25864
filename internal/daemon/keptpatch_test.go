package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// TestPodModePatchBudget: in Pod mode a session a Pod ends without
// discard keeps its patch with the Pod's kept patches, which the Pod
// (and no other) lists, fetches and removes; a DELETE over
// --max-kept-patch-bytes is refused and removes nothing; an idle expiry
// keeps the patch whatever its size, audits the Pod over budget and
// refuses its creations until it removes kept patches.
func TestPodModePatchBudget(t *testing.T) {
	root := kubeletRoot(t)
	var state string
	const budget = 400
	e := newEnv(t, func(o *Options) { o.KubeletRoot = root; state = o.StateDir; o.MaxKeptPatchBytes = budget })
	e.fake.patchDir = filepath.Join(state, "patches")
	ctx := context.Background()
	a, _ := e.client("1000:1000::" + podA)
	b, _ := e.client("1000:1000::" + podB)
	admin, _ := e.client("0:0")
	vol := &api.Volume{Name: "work", SubPath: "repo"}
	podDir := filepath.Join(state, "patches", podA)

	// A small patch: kept with the Pod's, listed to it alone.
	s1, err := a.CreateSession(ctx, api.CreateSession{Volume: vol})
	require.NoError(t, err)
	_, err = a.Write(ctx, s1.ID, api.Write{Path: "openwiki/a.md", Content: "small\n"})
	require.NoError(t, err)
	p1, err := fakePatch(ctx, e.fake, s1.ID)
	require.NoError(t, err)
	rm, err := a.RemoveSession(ctx, s1.ID)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(podDir, s1.ID+".patch"), rm.Patch)
	require.NoFileExists(t, filepath.Join(state, "patches", s1.ID+".patch"), "no patch outside the Pod's")
	mine, err := a.Patches(ctx)
	require.NoError(t, err)
	require.Len(t, mine, 1)
	require.Equal(t, api.PodPatch{ID: s1.ID, PodUID: podA, OwnedBy: "pod:" + podA, Volume: vol, Ended: mine[0].Ended, Files: []string{"openwiki/a.md"}, Path: rm.Patch}, mine[0])
	got, err := a.PodPatch(ctx, s1.ID)
	require.NoError(t, err)
	require.Equal(t, string(p1), string(got))
	others, err := b.Patches(ctx)
	require.NoError(t, err)
	require.Empty(t, others, "another Pod lists none of it")
	_, err = b.PodPatch(ctx, s1.ID)
	requireKind(t, err, api.KindNotFound, 404)
	require.EqualError(t, err, "patch "+s1.ID+": not found")
	_, err = b.RemovePatch(ctx, s1.ID)
	requireKind(t, err, api.KindNotFound, 404)
	require.FileExists(t, rm.Patch, "another Pod removes nothing")
	all, err := admin.Patches(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)

	// A patch that would pass the budget: refused, nothing removed.
	s2, err := a.CreateSession(ctx, api.CreateSession{Volume: vol})
	require.NoError(t, err)
	_, err = a.Write(ctx, s2.ID, api.Write{Path: "openwiki/b.md", Content: strings.Repeat("x", 300) + "\n"})
	require.NoError(t, err)
	p2, err := fakePatch(ctx, e.fake, s2.ID)
	require.NoError(t, err)
	_, err = a.RemoveSession(ctx, s2.ID)
	requireKind(t, err, api.KindLimit, 422)
	require.Equal(t, fmt.Sprintf("session %s: its patch (%s) would put the kept patches of pod:%s (%s) over the daemon's --max-kept-patch-bytes 400B; nothing was removed: fetch its diff (GET /v1/sessions/%s/diff?format=patch) and remove it with ?discard=true, or remove kept patches first (DELETE /v1/patches/{id})",
		s2.ID, size(int64(len(p2))), podA, size(int64(len(p1))), s2.ID), err.Error())
	still, err := a.Session(ctx, s2.ID)
	require.NoError(t, err, "the session stays")
	require.Equal(t, s2.ID, still.ID)
	rd, err := a.Read(ctx, s2.ID, api.Read{Path: "openwiki/b.md"})
	require.NoError(t, err, "its writes stay")
	require.Contains(t, rd.Content, "xxx")
	entries, err := os.ReadDir(podDir)
	require.NoError(t, err)
	require.Len(t, entries, 2, "only s1's patch and record")

	// Its idle TTL passes: no one to ask, so the patch is kept, the Pod
	// recorded over budget and refused new sessions.
	e.srv.now = func() time.Time { return time.Now().Add(48 * time.Hour) }
	pruned, err := e.srv.PruneExpired(ctx)
	require.NoError(t, err)
	require.Len(t, pruned.Pruned, 1)
	require.Equal(t, filepath.Join(podDir, s2.ID+".patch"), pruned.Pruned[0].Patch)
	kept := int64(len(p1) + len(p2))
	require.Contains(t, e.fake.audited, audit.Event(&audit.SessionEnded{Reason: "idle past its TTL", Pod: podA, Patch: pruned.Pruned[0].Patch, Files: []string{"openwiki/b.md"}}))
	require.Contains(t, e.fake.audited, audit.Event(&audit.PatchBudget{Owner: "pod:" + podA, Kept: kept, Budget: budget, Patch: pruned.Pruned[0].Patch}))
	_, err = a.CreateSession(ctx, api.CreateSession{Volume: vol})
	requireKind(t, err, api.KindLimit, 422)
	require.Equal(t, fmt.Sprintf("kept patches of pod:%s: %s, over the daemon's --max-kept-patch-bytes 400B: no new session until they are under it; fetch what you need (GET /v1/patches, GET /v1/patches/{id}) and remove them (DELETE /v1/patches/{id})",
		podA, size(kept)), err.Error())
	_, err = b.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "other"}})
	require.NoError(t, err, "another Pod's budget is its own")

	// The Pod fetches and removes its kept patches: under budget again.
	got, err = a.PodPatch(ctx, s2.ID)
	require.NoError(t, err)
	require.Equal(t, string(p2), string(got))
	rmp, err := a.RemovePatch(ctx, s2.ID)
	require.NoError(t, err)
	require.Equal(t, api.Removed{Removed: s2.ID, Patch: filepath.Join(podDir, s2.ID+".patch")}, *rmp)
	require.NoFileExists(t, rmp.Patch)
	require.Contains(t, e.fake.audited, audit.Event(&audit.PatchRemoved{Reason: "removed by its owner Pod", Pod: podA, Patch: rmp.Patch, Files: []string{"openwiki/b.md"}}))
	_, err = a.CreateSession(ctx, api.CreateSession{Volume: vol})
	require.NoError(t, err)
	mine, err = a.Patches(ctx)
	require.NoError(t, err)
	require.Len(t, mine, 1)
	require.Equal(t, s1.ID, mine[0].ID)
}

// TestPodModeKeptPatchRetention: a kept patch (a Pod's own DELETE, or a
// deleted Pod's) goes on the sweep once its session ended
// --kept-patch-retention ago, audited; a younger one stays.
func TestPodModeKeptPatchRetention(t *testing.T) {
	root := kubeletRoot(t)
	var state string
	e := newEnv(t, func(o *Options) { o.KubeletRoot = root; state = o.StateDir; o.KeptPatchRetention = time.Hour })
	e.fake.patchDir = filepath.Join(state, "patches")
	ctx := context.Background()
	a, _ := e.client("1000:1000::" + podA)
	b, _ := e.client("1000:1000::" + podB)
	admin, _ := e.client("0:0")

	s1, err := a.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "work"}})
	require.NoError(t, err)
	_, err = a.Write(ctx, s1.ID, api.Write{Path: "openwiki/a.md", Content: "old\n"})
	require.NoError(t, err)
	rm1, err := a.RemoveSession(ctx, s1.ID)
	require.NoError(t, err)
	s2, err := b.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "other"}})
	require.NoError(t, err)
	_, err = b.Write(ctx, s2.ID, api.Write{Path: "openwiki/b.md", Content: "deleted Pod\n"})
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(root, "pods", podB)))
	kept, err := e.srv.EndGonePods(ctx)
	require.NoError(t, err)
	require.Len(t, kept, 1)

	// Younger than the retention: kept.
	require.NoError(t, e.srv.SweepKeptPatches(ctx))
	all, err := admin.Patches(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)

	// An hour later a third ends; the sweep takes the first two only.
	later := time.Now().Add(time.Hour + time.Minute)
	e.srv.now = func() time.Time { return later }
	s3, err := a.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "work"}})
	require.NoError(t, err)
	_, err = a.Write(ctx, s3.ID, api.Write{Path: "openwiki/c.md", Content: "new\n"})
	require.NoError(t, err)
	rm3, err := a.RemoveSession(ctx, s3.ID)
	require.NoError(t, err)
	require.NoError(t, e.srv.SweepKeptPatches(ctx))
	all, err = admin.Patches(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, s3.ID, all[0].ID)
	require.FileExists(t, rm3.Patch)
	require.NoFileExists(t, rm1.Patch)
	require.NoFileExists(t, kept[0].Path)
	require.NoDirExists(t, filepath.Join(state, "patches", podB), "the deleted Pod's directory goes with its last patch")
	reason := "ended more than --kept-patch-retention 1h0m0s ago"
	require.Contains(t, e.fake.audited, audit.Event(&audit.PatchRemoved{Reason: reason, Pod: podA, Patch: rm1.Patch, Files: []string{"openwiki/a.md"}}))
	require.Contains(t, e.fake.audited, audit.Event(&audit.PatchRemoved{Reason: reason, Pod: podB, Patch: kept[0].Path, Files: []string{"openwiki/b.md"}}))
}

// TestPodModeOwnEndKilledAtEveryStep: a daemon killed at any step of a
// live Pod's own DELETE without discard leaves what the next daemon
// needs: after its start (ForgetMissing, EndGonePods) the patch is
// listed to the Pod, whole, beside its record, counted and removable —
// never counted against the Pod's budget while hidden from it.
func TestPodModeOwnEndKilledAtEveryStep(t *testing.T) {
	for _, step := range []string{"recorded", "ended", "moved", "completed"} {
		t.Run(step, func(t *testing.T) {
			root := kubeletRoot(t)
			var opts Options
			e := newEnv(t, func(o *Options) { o.KubeletRoot = root; o.MaxKeptPatchBytes = 1 << 20; opts = *o })
			e.fake.patchDir = filepath.Join(opts.StateDir, "patches")
			ctx := context.Background()
			a, _ := e.client("1000:1000::" + podA)
			s, err := a.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "work", SubPath: "repo"}})
			require.NoError(t, err)
			_, err = a.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: "kept\n"})
			require.NoError(t, err)
			killed := errors.New("killed")
			e.srv.endPodHook = func(at string) error {
				if at == step {
					return killed
				}
				return nil
			}
			_, err = e.srv.removeSession(ctx, s.ID, false, endByDelete)
			require.ErrorIs(t, err, killed)

			// The next daemon, on the same state directory.
			srv, pps := restartKept(t, e.fake, opts)
			if step == "recorded" {
				// Killed before the backend's removal: the session
				// goes on, nothing kept yet.
				require.Empty(t, pps)
				require.Equal(t, []string{s.ID}, srv.owners.ofPod(podA))
				return
			}
			require.Len(t, pps, 1)
			require.Equal(t, s.ID, pps[0].ID)
			require.Equal(t, podA, pps[0].PodUID)
			require.Empty(t, pps[0].Error)
			require.Equal(t, []string{"openwiki/a.md"}, pps[0].Files)
			require.Equal(t, filepath.Join(opts.StateDir, "patches", podA, s.ID+".patch"), pps[0].Path)
			require.FileExists(t, pps[0].Path)
			require.NoFileExists(t, filepath.Join(opts.StateDir, "patches", s.ID+".patch"))
			require.Empty(t, srv.owners.ofPod(podA))
		})
	}
}

// TestPodModePruneIsSizedLikeDelete: a Pod's own POST
// /v1/sessions/prune is a request like its DELETE, so a patch that would
// pass --max-kept-patch-bytes is refused there too (the session stays,
// nothing removed), and what it does end is audited as the owner's
// prune, not as an idle expiry. Before, prune ended its sessions as the
// idle timer does: kept whatever their size, the budget's refusal
// bypassed, and audited "idle past its TTL".
func TestPodModePruneIsSizedLikeDelete(t *testing.T) {
	root := kubeletRoot(t)
	var state string
	const budget = 400
	e := newEnv(t, func(o *Options) { o.KubeletRoot = root; state = o.StateDir; o.MaxKeptPatchBytes = budget })
	e.fake.patchDir = filepath.Join(state, "patches")
	ctx := context.Background()
	a, _ := e.client("1000:1000::" + podA)
	vol := &api.Volume{Name: "work", SubPath: "repo"}

	small, err := a.CreateSession(ctx, api.CreateSession{Volume: vol})
	require.NoError(t, err)
	_, err = a.Write(ctx, small.ID, api.Write{Path: "openwiki/a.md", Content: "small\n"})
	require.NoError(t, err)
	big, err := a.CreateSession(ctx, api.CreateSession{Volume: vol})
	require.NoError(t, err)
	_, err = a.Write(ctx, big.ID, api.Write{Path: "openwiki/b.md", Content: strings.Repeat("x", 600) + "\n"})
	require.NoError(t, err)

	out, err := a.Prune(ctx, "0s")
	require.Error(t, err, "the big session's patch would pass the budget")
	require.Contains(t, err.Error(), "--max-kept-patch-bytes")
	require.Nil(t, out)
	still, err := a.Session(ctx, big.ID)
	require.NoError(t, err, "the over-budget session stays")
	require.Equal(t, big.ID, still.ID)
	kept, err := e.srv.keptBytes("pod:" + podA)
	require.NoError(t, err)
	require.LessOrEqual(t, kept, int64(budget), "prune kept no patch over the budget")
	_, err = a.CreateSession(ctx, api.CreateSession{Volume: vol})
	require.NoError(t, err, "the Pod is not over budget")
	_, err = a.Session(ctx, small.ID)
	requireKind(t, err, api.KindNotFound, 404)
	mine, err := a.Patches(ctx)
	require.NoError(t, err)
	require.Len(t, mine, 1, "the small session's patch is kept")
	require.Equal(t, small.ID, mine[0].ID)
	require.Contains(t, e.fake.audited, audit.Event(&audit.SessionEnded{Reason: endByPrune, Pod: podA, Patch: mine[0].Path, Files: []string{"openwiki/a.md"}}))
	for _, ev := range e.fake.audited {
		if se, ok := ev.(*audit.SessionEnded); ok {
			require.NotEqual(t, endByIdle, se.Reason, "a prune the Pod asked for is not an idle expiry")
		}
	}
}

// TestPodModePatchGoneMidFetch: a kept patch whose file goes between the
// listing and the read (the retention sweep or its owner's DELETE racing
// a GET) answers 404 like a patch that does not exist, not a 500 naming
// the node's state directory; a patch that is there is served whole.
func TestPodModePatchGoneMidFetch(t *testing.T) {
	root := kubeletRoot(t)
	var state string
	e := newEnv(t, func(o *Options) { o.KubeletRoot = root; state = o.StateDir })
	e.fake.patchDir = filepath.Join(state, "patches")
	ctx := context.Background()
	a, _ := e.client("1000:1000::" + podA)
	s, err := a.CreateSession(ctx, api.CreateSession{Volume: &api.Volume{Name: "work"}})
	require.NoError(t, err)
	big := strings.Repeat("line of a large patch\n", 50000)
	_, err = a.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: big})
	require.NoError(t, err)
	rm, err := a.RemoveSession(ctx, s.ID)
	require.NoError(t, err)
	got, err := a.PodPatch(ctx, s.ID)
	require.NoError(t, err)
	want, err := os.ReadFile(rm.Patch)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))

	require.NoError(t, os.Remove(rm.Patch)) // as a sweep between list and read
	_, err = a.PodPatch(ctx, s.ID)
	requireKind(t, err, api.KindNotFound, 404)
	require.EqualError(t, err, "patch "+s.ID+": not found")
	require.NotContains(t, err.Error(), state)
}

// restartKept is the next daemon's start on the same state directory, as
// Run makes it (pending creations and ends finished, gone Pods' sessions
// ended), and the kept patches it then lists.
func restartKept(t *testing.T, fake *fakeBackend, opts Options) (*Server, []api.PodPatch) {
	t.Helper()
	ctx := context.Background()
	srv, err := NewServer(fake, opts)
	require.NoError(t, err)
	require.NoError(t, srv.ForgetMissing(ctx))
	_, err = srv.EndGonePods(ctx)
	require.NoError(t, err)
	pps, err := srv.keptPatches()
	require.NoError(t, err)
	return srv, pps
}
