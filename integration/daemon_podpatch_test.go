package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// TestDaemonPodPatchBudget: in Pod mode a Pod's DELETE without discard
// keeps the session's patch with the Pod's kept patches on the node; one
// that would pass --max-kept-patch-bytes is refused (422) and removes
// nothing; the Pod lists, fetches and removes its own kept patches, and
// another Pod gets 404 for them.
func TestDaemonPodPatchBudget(t *testing.T) {
	const (
		podA = "0f8e7d6c-5b4a-4938-8271-6a5b4c3d2e1f"
		podB = "11111111-2222-3333-4444-555555555555"
	)
	kubelet, err := os.MkdirTemp("", "corral-it-kubelet-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(kubelet, 0o755))
	t.Cleanup(func() { os.RemoveAll(kubelet) })
	a := newFakePod(t, kubelet, podA, "work", map[string]string{"repo/README.md": "# a\n", "repo/openwiki/index.md": "# index\n"})
	b := newFakePod(t, kubelet, podB, "other", map[string]string{"repo/README.md": "# b\n"})
	state, sock := daemonDirs(t)
	d := startDaemon(t, state, sock, "--kubelet-root", kubelet, "--max-kept-patch-bytes", "4KiB")
	bin := daemonClientPath(t)
	podDir := filepath.Join(state, "patches", podA)

	create := func() string {
		o := a.run(t, bin, sock, "create-volume", "work", "repo")
		require.Empty(t, o.Kind, o.Message)
		var s api.Session
		require.NoError(t, json.Unmarshal(o.Result, &s))
		return s.ID
	}
	// A small patch: kept with the Pod's.
	s1 := create()
	o := a.run(t, bin, sock, "write", s1, "openwiki/small.md", strings.Repeat("s", 1000)+"\n")
	require.Empty(t, o.Kind, o.Message)
	o = a.run(t, bin, sock, "remove", s1)
	require.Empty(t, o.Kind, o.Message)
	var rm api.Removed
	require.NoError(t, json.Unmarshal(o.Result, &rm))
	require.Equal(t, filepath.Join(podDir, s1+".patch"), rm.Patch)
	st, err := os.Stat(rm.Patch)
	require.NoError(t, err)
	kept := st.Size()
	require.NoFileExists(t, filepath.Join(state, "patches", s1+".patch"))

	// A patch over the budget: refused, the session and its writes stay.
	s2 := create()
	o = a.run(t, bin, sock, "write", s2, "openwiki/big.md", strings.Repeat("b", 5000)+"\n")
	require.Empty(t, o.Kind, o.Message)
	o = a.run(t, bin, sock, "remove", s2)
	require.Equal(t, api.KindLimit, o.Kind, o.Message)
	require.Equal(t, 422, o.Status)
	require.Contains(t, o.Message, "session "+s2+": its patch (")
	require.Contains(t, o.Message, "would put the kept patches of pod:"+podA+" (")
	require.Contains(t, o.Message, "over the daemon's --max-kept-patch-bytes 4KiB; nothing was removed: fetch its diff (GET /v1/sessions/"+s2+"/diff?format=patch) and remove it with ?discard=true")
	o = a.run(t, bin, sock, "read", s2, "openwiki/big.md")
	require.Empty(t, o.Kind, "the session and its writes stay: %s", o.Message)
	entries, err := os.ReadDir(podDir)
	require.NoError(t, err)
	require.Len(t, entries, 2, "s1's patch and record only")

	// The Pod lists and fetches its own; another Pod: 404.
	o = a.run(t, bin, sock, "patches")
	require.Empty(t, o.Kind, o.Message)
	var pps []api.PodPatch
	require.NoError(t, json.Unmarshal(o.Result, &pps))
	require.Len(t, pps, 1)
	require.Equal(t, s1, pps[0].ID)
	require.Equal(t, []string{"openwiki/small.md"}, pps[0].Files)
	o = a.run(t, bin, sock, "patch", s1)
	require.Empty(t, o.Kind, o.Message)
	require.Contains(t, string(o.Result), "+sss")
	for _, op := range []string{"patch", "rmpatch"} {
		o = b.run(t, bin, sock, op, s1)
		require.Equal(t, api.KindNotFound, o.Kind, "%s: %s", op, o.Message)
		require.Equal(t, "patch "+s1+": not found", o.Message)
	}
	o = b.run(t, bin, sock, "patches")
	require.Empty(t, o.Kind, o.Message)
	require.JSONEq(t, "[]", string(o.Result))

	// The Pod removes its kept patch (audited) and discards the big one.
	o = a.run(t, bin, sock, "rmpatch", s1)
	require.Empty(t, o.Kind, o.Message)
	require.NoFileExists(t, rm.Patch)
	o = a.run(t, bin, sock, "discard", s2)
	require.Empty(t, o.Kind, o.Message)
	require.NoDirExists(t, podDir, "nothing kept")
	recs, err := audit.Read(filepath.Join(state, audit.FileName))
	require.NoError(t, err)
	var removed []*audit.PatchRemoved
	for _, rec := range recs {
		if ev, ok := rec.Event.(*audit.PatchRemoved); ok && rec.Session == s1 {
			removed = append(removed, ev)
			require.Equal(t, podA, rec.Peer.Pod)
		}
	}
	require.Equal(t, []*audit.PatchRemoved{{Reason: "removed by its owner Pod", Pod: podA, Patch: rm.Patch, Files: []string{"openwiki/small.md"}}}, removed)
	require.NotZero(t, kept)
	require.Contains(t, d.stderr.String(), "kept patches per owner 4KiB")
}
