package hidden

import (
	"encoding/json"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/stretchr/testify/require"
)

// TestHiddenSetJSONRoundTrip: a persisted set answers exactly as the one
// computed from the repository, also after the repository's ignore files
// changed (a reopened session never re-reads them).
func TestHiddenSetJSONRoundTrip(t *testing.T) {
	dir := t.TempDir()
	buildTree(t, dir, tree{
		".openwikiignore":         "# top\nsecrets/\n*.pem\n!keep.pem\nbuild/**/out\n",
		"secrets/key":             "K",
		"a.pem":                   "",
		"keep.pem":                "",
		"docs/.openwikiignore":    "draft-*\n/local.md\n",
		"docs/draft-1.md":         "",
		"docs/local.md":           "",
		"docs/sub/local.md":       "",
		"build/x/out/y":           "",
		"openwiki/.claims/a.lock": "",
		"openwiki/page.md":        "",
		"AGENTS.md":               "",
		".git/config":             "",
	}, "")
	h, err := Compute(dir, Options{Lists: allLists})
	require.NoError(t, err)
	data, err := json.Marshal(h)
	require.NoError(t, err)
	h2, err := Unmarshal(data)
	require.NoError(t, err)
	require.Equal(t, h.Hides(), h2.Hides())
	require.Equal(t, h.Options(), h2.Options())

	// The repository's rules change after the session started.
	buildTree(t, dir, tree{".openwikiignore": "!*\n", "docs/.openwikiignore": "", "new.pem": ""}, "")
	v1, v2 := NewView(dir, h), NewView(dir, h2)
	for _, p := range []string{
		"secrets", "secrets/key", "a.pem", "keep.pem", "new.pem", "docs/draft-2.md", "docs/local.md",
		"docs/sub/local.md", "build/x/out/y", "build/out", "openwiki/.claims", "openwiki/.CLAIMS/x",
		"openwiki/page.md", "openwiki/agents/a/.git/x", "AGENTS.md", "sub/CLAUDE.md", "README.md",
	} {
		r1, h1 := v1.Hidden(p)
		r2, hh2 := v2.Hidden(p)
		require.Equal(t, h1, hh2, p)
		require.Equal(t, r1, r2, p)
	}
	_, hidden := v2.Hidden("new.pem")
	require.True(t, hidden, "rules of the persisted set, not the repository's new ones")

	data2, err := json.Marshal(h2)
	require.NoError(t, err)
	require.JSONEq(t, string(data), string(data2))
}

func TestUnmarshalHiddenSetErrors(t *testing.T) {
	for _, in := range []string{
		`{`,
		`{"version":3}`,
		`{"version":2,"options":{"lists":["everything"]}}`,
		`{"version":1,"options":{"write_dir":"../x"}}`,
		`{"version":1,"hides":[{"path":"../etc"}]}`,
		`{"version":1,"hides":[{"path":"."}]}`,
		`{"version":1,"ignore_files":[{"dir":"/","source":"x"}]}`,
	} {
		_, err := Unmarshal([]byte(in))
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument, in)
	}
}

// TestUnmarshalVersion1: a session record written before the built-in
// hide lists is still read; its forced patterns were the agent-config
// list's.
func TestUnmarshalVersion1(t *testing.T) {
	h, err := Unmarshal([]byte(`{"version":1,"options":{"ignore_file_name":".openwikiignore","write_dir":"openwiki","forced":["AGENTS.md",".claude/"]},` +
		`"ignore_files":[{"dir":".","source":".openwikiignore","patterns":[{"line":1,"text":"secrets/"}]}],` +
		`"hides":[{"path":"AGENTS.md","rule":"profile hides agent config AGENTS.md"},{"path":"secrets","rule":".openwikiignore:1 hides secrets/","dir":true}]}`))
	require.NoError(t, err)
	require.Equal(t, []names.List{names.AgentConfig}, h.Options().Lists)
	v := NewView(t.TempDir(), h)
	for p, want := range map[string]string{
		"AGENTS.md":      "profile hides agent config AGENTS.md",
		"sub/agents.md":  "profile hides agent config AGENTS.md (AGENTS.md)",
		"secrets/x":      ".openwikiignore:1 hides secrets/",
		".env":           "",
		"sub/.git/HEAD":  ".git is hidden at any depth",
		"docs/readme.md": "",
	} {
		rule, hidden := v.Hidden(p)
		require.Equal(t, want, rule, p)
		require.Equal(t, want != "", hidden, p)
	}
	h, err = Unmarshal([]byte(`{"version":1,"options":{"forced":null}}`))
	require.NoError(t, err)
	require.Empty(t, h.Options().Lists)
}
