package daemon

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// adoptRecorder is the fake backend that records which sessions existed
// when the daemon adopted its sessions.
type adoptRecorder struct {
	*fakeBackend
	mu      sync.Mutex
	adopted []string
	// warmOwners are the owner keys Adopt was given, by session.
	warmOwners map[string]string
	done       chan struct{}
}

func (a *adoptRecorder) Adopt(ctx context.Context, warmOwner func(id string) string) error {
	list, err := a.Sessions(ctx)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.warmOwners = map[string]string{}
	for _, s := range list {
		a.adopted = append(a.adopted, s.ID)
		a.warmOwners[s.ID] = warmOwner(s.ID)
	}
	close(a.done)
	return nil
}

// TestRunUndoesPendingCreatesBeforeAdopting: at start the daemon undoes a
// creation a stopped daemon left pending before it adopts the sessions,
// so that the undone session is never adopted (re-opened, its
// containers created ahead); a committed session is adopted. Before,
// Run adopted every session first and undid the pending one after.
func TestRunUndoesPendingCreatesBeforeAdopting(t *testing.T) {
	state := t.TempDir()
	fake := newFake()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for id, pending := range map[string]bool{"aaaaaaaaaaa1": true, "aaaaaaaaaaa2": false} {
		_, err := fake.Create(ctx, CreateConfig{ID: id})
		require.NoError(t, err)
		o, err := openOwners(state)
		require.NoError(t, err)
		require.NoError(t, o.add(id, ownerRecord{UID: 1000, GID: 1000, Pending: pending}))
	}
	rec := runUntilAdopted(t, ctx, cancel, state, fake)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, []string{"aaaaaaaaaaa2"}, rec.adopted, "the pending creation is undone before adoption")
	all, err := fake.Sessions(context.Background())
	require.NoError(t, err)
	require.Len(t, all, 1)
}

// TestRunAdoptsWithWarmOwners: the daemon adopts each session with its
// owner's key for the share of --max-warm its containers created ahead
// take (a uid's, a Pod's, whatever uid the Pod ran as; none for root's
// and for a session without a record, made by the CLI).
func TestRunAdoptsWithWarmOwners(t *testing.T) {
	state := t.TempDir()
	fake := newFake()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o, err := openOwners(state)
	require.NoError(t, err)
	want := map[string]string{}
	for id, tc := range map[string]struct {
		rec  *ownerRecord
		want string
	}{
		"aaaaaaaaaaa1": {&ownerRecord{UID: 1000, GID: 1000}, "uid:1000"},
		"aaaaaaaaaaa2": {&ownerRecord{UID: 1000, GID: 1000, Pod: podA}, "pod:" + podA},
		"aaaaaaaaaaa3": {&ownerRecord{UID: 0, GID: 0, Pod: podB}, "pod:" + podB},
		"aaaaaaaaaaa4": {&ownerRecord{UID: 0, GID: 0}, ""},
		"aaaaaaaaaaa5": {nil, ""},
	} {
		_, err := fake.Create(ctx, CreateConfig{ID: id})
		require.NoError(t, err)
		if tc.rec != nil {
			require.NoError(t, o.add(id, *tc.rec))
		}
		want[id] = tc.want
	}
	rec := runUntilAdopted(t, ctx, cancel, state, fake)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, want, rec.warmOwners)
}

// runUntilAdopted runs the daemon on state with fake as its backend until
// it adopted the sessions, then cancels it and checks it ended cleanly; it
// returns what the backend recorded.
func runUntilAdopted(t *testing.T, ctx context.Context, cancel context.CancelFunc, state string, fake *fakeBackend) *adoptRecorder {
	t.Helper()
	rec := &adoptRecorder{fakeBackend: fake, done: make(chan struct{})}
	dir, err := os.MkdirTemp("", "corral-daemon-run-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	ran := make(chan error, 1)
	go func() {
		ran <- Run(ctx, Config{Socket: filepath.Join(dir, "s.sock"), StateDir: state, MaxRunning: 1, Grace: time.Second},
			func(context.Context) (Backend, error) { return rec, nil })
	}()
	select {
	case <-rec.done:
	case err := <-ran:
		t.Fatalf("Run ended before adopting: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not adopt")
	}
	cancel()
	require.NoError(t, <-ran)
	return rec
}
