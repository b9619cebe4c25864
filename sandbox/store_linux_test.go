package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestSweepStagingAtOnce: a staging directory (.new-<id>) a crash left
// is removed by the next sweep (every start's), however young, when no
// live creator can hold it; one whose inuse a live process holds stays,
// and so does a young one while a creator is between its mkdir and its
// inuse lock (the creators' lock held). Before, every staging directory
// younger than a minute was left for a later sweep.
func TestSweepStagingAtOnce(t *testing.T) {
	state := t.TempDir()
	e := &Executor{cfg: Config{StateDir: state}}
	sessions := e.sessionsDir()
	mk := func(name string) string {
		dir := filepath.Join(sessions, name)
		require.NoError(t, os.MkdirAll(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, inUseFile), nil, 0o600))
		return dir
	}
	crashed := mk(newPrefix + "aaaaaaaaaaa1")
	bare := filepath.Join(sessions, newPrefix+"aaaaaaaaaaa2") // a crash before inuse
	require.NoError(t, os.Mkdir(bare, 0o700))
	held := mk(newPrefix + "aaaaaaaaaaa3")
	f, err := lockInUse(held, false)
	require.NoError(t, err)
	defer f.Close()

	// A creator in its window: nothing young is taken.
	unlock, err := lockCreators(sessions, unix.LOCK_SH)
	require.NoError(t, err)
	rep, err := e.Sweep(context.Background())
	require.NoError(t, err)
	require.Empty(t, rep.Sessions)
	require.DirExists(t, crashed)
	unlock()

	rep, err = e.Sweep(context.Background())
	require.NoError(t, err)
	require.ElementsMatch(t, []string{filepath.Base(crashed), filepath.Base(bare)}, rep.Sessions)
	require.NoDirExists(t, crashed)
	require.NoDirExists(t, bare)
	require.DirExists(t, held, "a live creator holds it")
	require.FileExists(t, filepath.Join(sessions, CreatorsLock), "the lock file is no session")
}

// TestCreateStoreHoldsItsStaging: a sweep running while a store is made
// never takes its staging directory: the creator holds the creators'
// lock until it holds inuse.
func TestCreateStoreHoldsItsStaging(t *testing.T) {
	state := t.TempDir()
	e := &Executor{cfg: Config{StateDir: state}}
	st, err := createStore(e.sessionsDir(), SessionRecord{ID: "bbbbbbbbbbb1"}, nil)
	require.NoError(t, err)
	defer st.release()
	rep, err := e.Sweep(context.Background())
	require.NoError(t, err)
	require.Empty(t, rep.Sessions)
	require.DirExists(t, filepath.Join(e.sessionsDir(), "bbbbbbbbbbb1"))
}
