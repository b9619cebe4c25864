package sandbox

import (
	"testing"

	"github.com/corral-sandbox/corral/profiles"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

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
