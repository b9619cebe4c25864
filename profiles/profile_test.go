package profiles

import (
	"testing"

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
