package daemon

import (
	"context"
	"os"
	"testing"

	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
)

// TestWriteAreasPerUIDCapped: the write areas (tmpfs) of one uid's
// sessions add up to at most MaxWriteAreaPerUID: a creation over it is
// refused (422 limit, naming the figures and the flag) before anything is
// made, however many arrive at once; another uid has its own budget, root
// is not capped, a read-only session reserves nothing, and a removed
// session or a failed creation gives its bytes back. Before the cap, a
// uid's profile file could hold 16GiB of tmpfs per session (red team).
func TestWriteAreasPerUIDCapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a session as another uid checks the repository as that uid (setfsuid), which needs root")
	}
	e := newEnv(t, func(o *Options) { o.MaxWriteAreaPerUID, o.MaxRunning = 256<<20, 16 })
	ctx := context.Background()
	a, _ := e.client("1001:1001")

	const n = 10
	errs := make(chan error, n)
	ids := make(chan string, n)
	for range n {
		go func() {
			s, err := a.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "wa-64MiB"})
			if err == nil {
				ids <- s.ID
			}
			errs <- err
		}()
	}
	refused := 0
	for range n {
		if err := <-errs; err != nil {
			requireKind(t, err, api.KindLimit, 422)
			require.Equal(t, "write areas of uid 1001: 256MiB held, and this session's 64MiB would pass the daemon's --max-write-area-per-uid 256MiB; remove a session first, or use a profile with a smaller write_area (or a read-only session)", err.Error())
			refused++
		}
	}
	require.Equal(t, n-4, refused, "4 × 64MiB fit in 256MiB, parallel requests included")
	mine, err := a.Sessions(ctx)
	require.NoError(t, err)
	require.Len(t, mine, 4, "a refused creation makes nothing")

	_, err = a.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "wa-64MiB", ReadOnly: true})
	require.NoError(t, err, "a read-only session mounts no write area")
	_, err = a.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "wa-1MiB"})
	requireKind(t, err, api.KindLimit, 422)

	b, _ := e.client("1002:1002")
	_, err = b.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "wa-256MiB"})
	require.NoError(t, err, "another uid has its own budget")
	root, _ := e.client("0:0")
	_, err = root.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "wa-1GiB"})
	require.NoError(t, err, "root is not capped per uid")

	_, err = a.RemoveSession(ctx, <-ids)
	require.NoError(t, err)
	_, err = a.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "fail-after-reserve"})
	require.Error(t, err)
	_, err = a.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "wa-64MiB"})
	require.NoError(t, err, "a removed session and a failed creation give their bytes back")
}

// TestWriteAreasHostCapped: MaxWriteArea counts every session's write
// area, root's included.
func TestWriteAreasHostCapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a session as another uid checks the repository as that uid (setfsuid), which needs root")
	}
	e := newEnv(t, func(o *Options) { o.MaxWriteArea = 128 << 20 })
	ctx := context.Background()
	root, _ := e.client("0:0")
	a, _ := e.client("1001:1001")
	_, err := root.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "wa-100MiB"})
	require.NoError(t, err)
	_, err = a.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "wa-64MiB"})
	requireKind(t, err, api.KindLimit, 422)
	require.Equal(t, "write areas of this host: 100MiB held, and this session's 64MiB would pass the daemon's --max-write-area 128MiB; remove a session first, or use a profile with a smaller write_area (or a read-only session)", err.Error())
	_, err = root.CreateSession(ctx, api.CreateSession{Repo: e.repo, Profile: "wa-64MiB"})
	requireKind(t, err, api.KindLimit, 422)
}
