package sandbox

import (
	"testing"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func TestScopeDir(t *testing.T) {
	for _, tc := range []struct {
		cfg  SessionConfig
		want string
	}{
		{SessionConfig{}, "openwiki"},
		{SessionConfig{WriteDir: "openwiki/"}, "openwiki"},
		{SessionConfig{WriteDir: "./openwiki//guides/"}, "openwiki/guides"},
		{SessionConfig{AgentID: "alice"}, "openwiki/agents/alice"},
		{SessionConfig{AgentID: "a_1-b"}, "openwiki/agents/a_1-b"},
	} {
		got, err := scopeDir(tc.cfg)
		require.NoError(t, err, "%+v", tc.cfg)
		require.Equal(t, tc.want, got)
	}
	for _, cfg := range []SessionConfig{
		{WriteDir: "docs"},
		{WriteDir: "/openwiki"},
		{WriteDir: "openwiki/../docs"},
		{WriteDir: "openwiki/.claims"},
		{WriteDir: "openwiki/x/.GIT"},
		{WriteDir: "openwikix"},
		{AgentID: "Alice"},
		{AgentID: "../x"},
		{AgentID: "a/b"},
		{AgentID: "-a"},
		{AgentID: "alice", Page: "openwiki/a.md"},
		{AgentID: "alice", WriteDir: "openwiki"},
		{WriteDir: "openwiki", Page: "openwiki/a.md"},
	} {
		_, err := scopeDir(cfg)
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument, "%+v", cfg)
	}
}

// TestProfileSnapshotRoundTrip: the profile.yaml a persistent session
// records parses back to the same profile.
func TestProfileSnapshotRoundTrip(t *testing.T) {
	for _, name := range profiles.Builtins() {
		p, err := profiles.Load(name)
		require.NoError(t, err)
		data, err := yaml.Marshal(p)
		require.NoError(t, err)
		q, err := profiles.Parse(data)
		require.NoError(t, err, string(data))
		require.Equal(t, p, q, name)
	}
}
