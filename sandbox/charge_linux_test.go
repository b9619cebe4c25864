package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-sandbox/corral/mounts"
	"github.com/stretchr/testify/require"
)

func TestChargeBlamesTheCallThatMadeAViolation(t *testing.T) {
	exe := mounts.Violation{Path: "openwiki/run.sh", Reason: "executable bit (mode 0755)"}
	link := mounts.Violation{Path: "openwiki/l", Reason: "symbolic link"}

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, lockFile), nil, 0o600))
	// Two sessions over one store: two corral processes.
	a := &Session{store: &sessionStore{dir: dir}}
	b := &Session{store: &sessionStore{dir: dir}}
	one := &Session{}

	for _, step := range []struct {
		s         *Session
		now, want []mounts.Violation
	}{
		{a, nil, nil},
		{a, []mounts.Violation{exe}, []mounts.Violation{exe}},
		{a, []mounts.Violation{exe}, nil},
		{b, []mounts.Violation{exe}, nil},
		{b, []mounts.Violation{link, exe}, []mounts.Violation{link}},
		{a, []mounts.Violation{link}, nil},
		{a, nil, nil},
		{b, []mounts.Violation{exe}, []mounts.Violation{exe}},
		{one, []mounts.Violation{exe, link}, []mounts.Violation{exe, link}},
		{one, []mounts.Violation{exe, link}, nil},
		{one, []mounts.Violation{exe}, nil},
		{one, []mounts.Violation{exe, link}, []mounts.Violation{link}},
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
