package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// TestUIDKeptPatchBudget: outside Pod mode a uid's session ended without
// discard keeps its patch with the uid's kept patches
// (STATE_DIR/patches/uid-N/<id>.patch and its record), under the same
// rules as a Pod's: the uid alone (and the admins) lists, fetches and
// removes them, another uid gets 404; a DELETE over
// --max-kept-patch-bytes is refused 422 and removes nothing; an idle
// expiry keeps the patch whatever its size and the uid may create no
// session until it removes kept patches, while another uid may; root is
// not capped and keeps the executor's STATE_DIR/patches/<id>.patch; a
// patch kept before owners had directories (no record) is root's, listed
// and served to the admins alone and never swept; --kept-patch-retention
// sweeps the uid's. Before, a uid's kept patches had no budget: a local
// uid could fill the state directory's disk by create, write, DELETE.
func TestUIDKeptPatchBudget(t *testing.T) {
	var state string
	const budget = 400
	e := newEnv(t, func(o *Options) { state = o.StateDir; o.MaxKeptPatchBytes = budget; o.KeptPatchRetention = time.Hour })
	e.fake.patchDir = filepath.Join(state, "patches")
	ctx := context.Background()
	a, _ := e.client("1000:1000")
	b, _ := e.client("1001:1001")
	admin, _ := e.client("0:0")
	dir := filepath.Join(state, "patches", "uid-1000")
	legacy := filepath.Join(state, "patches", "aaaaaaaaaaaa.patch")
	require.NoError(t, os.MkdirAll(filepath.Dir(legacy), 0o700))
	require.NoError(t, os.WriteFile(legacy, []byte("diff --git a/x b/x\n"), 0o600))

	// A small patch: kept with the uid's, listed to it alone.
	s1, err := a.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	_, err = a.Write(ctx, s1.ID, api.Write{Path: "openwiki/a.md", Content: "small\n"})
	require.NoError(t, err)
	p1, err := fakePatch(ctx, e.fake, s1.ID)
	require.NoError(t, err)
	rm, err := a.RemoveSession(ctx, s1.ID)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, s1.ID+".patch"), rm.Patch)
	require.NoFileExists(t, filepath.Join(state, "patches", s1.ID+".patch"))
	require.FileExists(t, filepath.Join(dir, s1.ID+".json"))
	mine, err := a.Patches(ctx)
	require.NoError(t, err)
	require.Len(t, mine, 1)
	require.Equal(t, api.PodPatch{ID: s1.ID, OwnedBy: "uid:1000", Ended: mine[0].Ended, Files: []string{"openwiki/a.md"}, Path: rm.Patch}, mine[0])
	got, err := a.PodPatch(ctx, s1.ID)
	require.NoError(t, err)
	require.Equal(t, string(p1), string(got))
	others, err := b.Patches(ctx)
	require.NoError(t, err)
	require.Empty(t, others, "another uid sees none of them")
	_, err = b.PodPatch(ctx, s1.ID)
	requireKind(t, err, api.KindNotFound, 404)
	_, err = b.RemovePatch(ctx, s1.ID)
	requireKind(t, err, api.KindNotFound, 404)
	_, err = a.PodPatch(ctx, "aaaaaaaaaaaa")
	requireKind(t, err, api.KindNotFound, 404)
	all, err := admin.Patches(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2, "the admins see every kept patch, root's too")
	old, err := admin.PodPatch(ctx, "aaaaaaaaaaaa")
	require.NoError(t, err)
	require.Equal(t, "diff --git a/x b/x\n", string(old), "a patch kept before owners had directories stays readable")

	// A DELETE over the budget is refused and removes nothing.
	s2, err := a.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	_, err = a.Write(ctx, s2.ID, api.Write{Path: "openwiki/b.md", Content: strings.Repeat("x", 600) + "\n"})
	require.NoError(t, err)
	_, err = a.RemoveSession(ctx, s2.ID)
	requireKind(t, err, api.KindLimit, 422)
	require.Contains(t, err.Error(), "kept patches of uid:1000")
	require.Contains(t, err.Error(), "--max-kept-patch-bytes")
	_, err = a.Session(ctx, s2.ID)
	require.NoError(t, err, "the refused DELETE removed nothing")

	// An idle expiry keeps it anyway; the uid is then over budget and
	// may create nothing, another uid may.
	_, err = e.srv.removeSession(ctx, s2.ID, false, endByIdle)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, s2.ID+".patch"))
	_, err = a.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	requireKind(t, err, api.KindLimit, 422)
	require.Contains(t, err.Error(), "kept patches of uid:1000")
	_, err = b.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)

	// Root is not capped and keeps the executor's layout.
	r, err := admin.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	_, err = admin.Write(ctx, r.ID, api.Write{Path: "openwiki/r.md", Content: strings.Repeat("r", 600) + "\n"})
	require.NoError(t, err)
	rrm, err := admin.RemoveSession(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(state, "patches", r.ID+".patch"), rrm.Patch)

	// Removing its own kept patch brings the uid under; retention sweeps
	// the uid's, never root's.
	_, err = a.RemovePatch(ctx, s2.ID)
	require.NoError(t, err)
	_, err = a.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	e.srv.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	require.NoError(t, e.srv.SweepKeptPatches(ctx))
	require.NoFileExists(t, filepath.Join(dir, s1.ID+".patch"))
	require.NoFileExists(t, filepath.Join(dir, s1.ID+".json"))
	require.FileExists(t, legacy)
	require.FileExists(t, rrm.Patch)
}

// TestSweptPatchGoesToItsOwner: a uid's session the sandbox's own sweep
// removed (it expired while no daemon held it), keeping its patch where
// the executor keeps patches (STATE_DIR/patches/ID.patch), is its
// owner's as the owner record says: the next forgetRemoved (at start,
// on the prune timer) moves the patch to the uid's kept patches with its
// record, which the uid lists and another uid does not. Before, the
// record was dropped and the patch left root's alone.
func TestSweptPatchGoesToItsOwner(t *testing.T) {
	var state string
	e := newEnv(t, func(o *Options) { state = o.StateDir })
	e.fake.patchDir = filepath.Join(state, "patches")
	ctx := context.Background()
	a, _ := e.client("1000:1000")
	b, _ := e.client("1001:1001")
	s, err := a.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	_, err = a.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: "swept\n"})
	require.NoError(t, err)
	_, err = e.fake.Remove(ctx, s.ID, false) // the sandbox's sweep
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(state, "patches", s.ID+".patch"))

	require.NoError(t, e.srv.forgetRemoved(ctx))
	dir := filepath.Join(state, "patches", "uid-1000")
	require.FileExists(t, filepath.Join(dir, s.ID+".patch"))
	require.FileExists(t, filepath.Join(dir, s.ID+".json"))
	require.NoFileExists(t, filepath.Join(state, "patches", s.ID+".patch"))
	require.Empty(t, e.srv.owners.all(), "the owner record goes with it")
	mine, err := a.Patches(ctx)
	require.NoError(t, err)
	require.Len(t, mine, 1)
	require.Equal(t, "uid:1000", mine[0].OwnedBy)
	require.Equal(t, []string{"openwiki/a.md"}, mine[0].Files)
	others, err := b.Patches(ctx)
	require.NoError(t, err)
	require.Empty(t, others)
}

// TestUIDEndKilledAtEveryStep: outside Pod mode, a daemon killed at any
// step of a uid's DELETE that keeps its patch (endKeptSession: record
// written pending, session ended, patch moved, record completed) leaves
// what the next daemon needs: after its start (ForgetMissing,
// EndGonePods) the patch is the uid's, listed once, whole, beside its
// record, and the session's owner record is gone (killed before the
// session ended, the session is still the uid's, and its next DELETE
// keeps the patch).
func TestUIDEndKilledAtEveryStep(t *testing.T) {
	for _, step := range []string{"recorded", "ended", "moved", "completed"} {
		t.Run(step, func(t *testing.T) {
			var opts Options
			e := newEnv(t, func(o *Options) { o.MaxKeptPatchBytes = 1 << 20; opts = *o })
			e.fake.patchDir = filepath.Join(opts.StateDir, "patches")
			ctx := context.Background()
			a, _ := e.client("1000:1000")
			s, err := a.CreateSession(ctx, api.CreateSession{Repo: e.repo})
			require.NoError(t, err)
			_, err = a.Write(ctx, s.ID, api.Write{Path: "openwiki/a.md", Content: "kept\n"})
			require.NoError(t, err)
			e.srv.endPodHook = func(at string) error {
				if at == step {
					return errors.New("killed")
				}
				return nil
			}
			_, err = a.RemoveSession(ctx, s.ID)
			require.Error(t, err)

			// The next daemon, on the same state directory.
			srv, pps := restartKept(t, e.fake, opts)
			if step == "recorded" {
				// Killed before the session ended: it is still the
				// uid's, and its next DELETE keeps the patch.
				require.Empty(t, pps)
				require.Equal(t, 1000, srv.owners.get(s.ID).UID)
				_, err := srv.removeSession(context.Background(), s.ID, false, endByDelete)
				require.NoError(t, err)
				pps, err = srv.keptPatches()
				require.NoError(t, err)
			}
			require.Len(t, pps, 1)
			require.Equal(t, s.ID, pps[0].ID)
			require.Equal(t, "uid:1000", pps[0].OwnedBy)
			require.Empty(t, pps[0].Error)
			require.Equal(t, []string{"openwiki/a.md"}, pps[0].Files)
			require.Equal(t, filepath.Join(opts.StateDir, "patches", "uid-1000", s.ID+".patch"), pps[0].Path)
			require.NoFileExists(t, filepath.Join(opts.StateDir, "patches", s.ID+".patch"))
			require.Empty(t, srv.owners.all())
		})
	}
}

// TestUnsizablePatchEndsAsAnExpiry: a DELETE without discard of a
// session whose change set cannot be collected for sizing (its
// repository replaced: failed precondition) is not refused: the session
// ends as an idle expiry does, keeping what can be kept, and the owner it
// puts over --max-kept-patch-bytes is refused new sessions. A busy slot
// still refuses (TestKeptPatchSizingTakesASlot).
func TestUnsizablePatchEndsAsAnExpiry(t *testing.T) {
	var state string
	e := newEnv(t, func(o *Options) { state = o.StateDir; o.MaxKeptPatchBytes = 100 })
	e.fake.patchDir = filepath.Join(state, "patches")
	ctx := context.Background()
	a, _ := e.client("1000:1000")
	s, err := a.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	require.NoError(t, err)
	_, err = a.Write(ctx, s.ID, api.Write{Path: "openwiki/unsizable.md", Content: strings.Repeat("u", 200) + "\n"})
	require.NoError(t, err)
	rm, err := a.RemoveSession(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(state, "patches", "uid-1000", s.ID+".patch"), rm.Patch)
	_, err = a.CreateSession(ctx, api.CreateSession{Repo: e.repo})
	requireKind(t, err, api.KindLimit, 422)
}
