package profiles

import (
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const minimal = "name: t\ncommands: [ls]\n"

func TestHideListsDefault(t *testing.T) {
	p, err := Parse([]byte(minimal))
	require.NoError(t, err)
	assert.Equal(t, []names.List{names.AgentConfig, names.Secrets, names.Gitignore}, p.HideLists())
	for _, b := range Builtins() {
		p, err := Load(b)
		require.NoError(t, err)
		assert.Equal(t, names.Lists(), p.HideLists(), "built-in %s hides every list", b)
	}
}

func TestExpose(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []names.List
	}{
		{minimal + "expose: [agent-config]\n", []names.List{names.Secrets, names.Gitignore}},
		{minimal + "expose: [secrets, gitignore]\n", []names.List{names.AgentConfig}},
		{minimal + "expose: [agent-config, secrets, gitignore]\n", nil},
		{minimal + "expose_agent_config: true\n", []names.List{names.Secrets, names.Gitignore}},
		{minimal + "expose_agent_config: true\nexpose: [agent-config]\n", []names.List{names.Secrets, names.Gitignore}},
		{minimal + "expose: []\n", names.Lists()},
	} {
		p, err := Parse([]byte(tc.yaml))
		require.NoError(t, err, tc.yaml)
		assert.Equal(t, tc.want, p.HideLists(), tc.yaml)
	}
}

func TestExposeValidation(t *testing.T) {
	for yaml, want := range map[string]string{
		minimal + "expose: [agent_config]\n":     `"agent_config"`,
		minimal + "expose: [secrets, secrets]\n": `"secrets" listed twice`,
		minimal + "expose: [everything]\n":       `unknown hide list "everything"`,
		minimal + "expose: agent-config\n":       "expose: want a list, got a string",
		minimal + "expose: [\"(always)\"]\n":     `unknown hide list "(always)"`,
	} {
		_, err := Parse([]byte(yaml))
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument, yaml)
		assert.ErrorContains(t, err, want, yaml)
	}
}

func TestSessionFields(t *testing.T) {
	base := func() Profile {
		p, err := Load(DefaultName)
		require.NoError(t, err)
		return *p
	}
	p := base()
	require.Equal(t, DefaultIdleTTL, p.IdleTTL())
	require.Equal(t, DefaultPoolDepth, p.Depth())
	p.TTL, p.PoolDepth = "90m", 4
	require.NoError(t, p.Validate())
	require.Equal(t, 90*time.Minute, p.IdleTTL())
	require.Equal(t, 4, p.Depth())
	for _, bad := range []string{"0", "0s", "-1h", "500ms", "721h", "forever"} {
		p := base()
		p.TTL = bad
		require.ErrorIs(t, p.Validate(), errdefs.ErrInvalidArgument, bad)
	}
	for _, bad := range []int{-1, MaxPoolDepth + 1} {
		p := base()
		p.PoolDepth = bad
		require.ErrorIs(t, p.Validate(), errdefs.ErrInvalidArgument, "%d", bad)
	}
}

func TestPoolMaxDepth(t *testing.T) {
	base := func() Profile {
		p, err := Load(DefaultName)
		require.NoError(t, err)
		return *p
	}
	p := base()
	require.Equal(t, DefaultPoolMaxDepth, p.MaxDepth())
	p.PoolDepth = 12
	require.NoError(t, p.Validate())
	require.Equal(t, 12, p.MaxDepth(), "the default max never below the floor")
	p.PoolMaxDepth = 12
	require.NoError(t, p.Validate())
	require.Equal(t, 12, p.MaxDepth(), "max = floor: a fixed depth")
	p = base()
	p.PoolMaxDepth = MaxPoolDepth
	require.NoError(t, p.Validate())
	require.Equal(t, MaxPoolDepth, p.MaxDepth())
	for _, bad := range []struct{ floor, max int }{{0, -1}, {0, 1}, {4, 3}, {0, MaxPoolDepth + 1}} {
		p := base()
		p.PoolDepth, p.PoolMaxDepth = bad.floor, bad.max
		require.ErrorIs(t, p.Validate(), errdefs.ErrInvalidArgument, "%+v", bad)
	}
	// The key is read from YAML, and a bad value fails the load.
	y, err := Parse([]byte(minimal + "pool_depth: 3\npool_max_depth: 6\n"))
	require.NoError(t, err)
	require.Equal(t, 3, y.Depth())
	require.Equal(t, 6, y.MaxDepth())
	_, err = Parse([]byte(minimal + "pool_depth: 3\npool_max_depth: 2\n"))
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
}
