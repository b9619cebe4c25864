package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/stretchr/testify/require"
)

func TestChargeBlamesTheCallThatMadeAViolation(t *testing.T) {
	exe := changeset.Problem{Path: "openwiki/run.sh", Reason: "executable bit (mode 0755)"}
	link := changeset.Problem{Path: "openwiki/l", Reason: "symbolic link"}

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, lockFile), nil, 0o600))
	// Two sessions over one store: two corral processes.
	a := &Session{store: &store{dir: dir}}
	b := &Session{store: &store{dir: dir}}
	one := &Session{record: SessionRecord{Ephemeral: true}}

	for _, step := range []struct {
		s         *Session
		now, want []changeset.Problem
	}{
		{a, nil, nil},
		{a, []changeset.Problem{exe}, []changeset.Problem{exe}},
		{a, []changeset.Problem{exe}, nil},
		{b, []changeset.Problem{exe}, nil},
		{b, []changeset.Problem{link, exe}, []changeset.Problem{link}},
		{a, []changeset.Problem{link}, nil},
		{a, nil, nil},
		{b, []changeset.Problem{exe}, []changeset.Problem{exe}},
		{one, []changeset.Problem{exe, link}, []changeset.Problem{exe, link}},
		{one, []changeset.Problem{exe, link}, nil},
		{one, []changeset.Problem{exe}, nil},
		{one, []changeset.Problem{exe, link}, []changeset.Problem{link}},
	} {
		got, err := step.s.charge(step.now)
		require.NoError(t, err)
		require.Equal(t, step.want, got)
	}
	data, err := os.ReadFile(filepath.Join(dir, chargedFile))
	require.NoError(t, err)
	require.JSONEq(t, `[{"path":"openwiki/run.sh","reason":"executable bit (mode 0755)"}]`, string(data))

	require.NoError(t, os.WriteFile(filepath.Join(dir, chargedFile), []byte("{"), 0o600))
	_, err = a.charge(nil)
	require.ErrorContains(t, err, "data loss")
}
