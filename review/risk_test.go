package review

import (
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	page := allowlist.Scope{Page: "openwiki/pages/a.md"}
	tests := []struct {
		name   string
		ch     changeset.Change
		scope  allowlist.Scope
		want   Level
		reason string
	}{
		{"edit existing page", modify("openwiki/pages/a.md", "a\n", "b\n"), dirScope, Low, "edits an existing documentation file"},
		{"assigned page", modify("openwiki/pages/a.md", "a\n", "b\n"), page, Low, "writes the assigned page"},
		{"assigned page created", create("openwiki/pages/a.md", "b\n"), page, Low, "writes the assigned page"},
		{"new page", create("openwiki/pages/new.md", "b\n"), dirScope, Medium, "creates a new file"},
		{"deletion", del("openwiki/pages/a.md", "a\n"), dirScope, High, "deletes a file"},
		{"script", modify("openwiki/x.sh", "a\n", "b\n"), dirScope, Medium, ".sh files are code"},
		{"no extension", modify("openwiki/LICENSE", "a\n", "b\n"), dirScope, Medium, "no file extension"},
		{"other type", modify("openwiki/data.csv", "a\n", "b\n"), dirScope, Medium, "not a documentation file type"},
		{"large", modify("openwiki/big.md", "a\n", strings.Repeat("x", largeChange+1)), dirScope, Medium, "large file"},
		{"bidi content", modify("openwiki/a.md", "a\n", "x\u202ey\n"), dirScope, High, "U+202E"},
		{"escape sequence", modify("openwiki/a.md", "a\n", "\x1b[2Jclean\n"), dirScope, High, "U+001B"},
		{"zero width joiner is prose", modify("openwiki/a.md", "a\n", "family 👨\u200d👩\n"), dirScope, Low, ""},
		{"dotfile", modify("openwiki/.prettierrc.md", "a\n", "b\n"), dirScope, High, "dotfile"},
		{"ignore file", create("openwiki/.dockerignore", "*\n"), dirScope, High, "ignore file"},
		{"workflow", create("openwiki/ci/workflows/x.yml", "on: push\n"), dirScope, High, "workflows/"},
		{"page mode sibling", modify("openwiki/pages/b.md", "a\n", "b\n"), page, High, "outside the assigned page"},
		{"agent instructions, any case", create("openwiki/pages/Agents.MD", "x\n"), dirScope, High, "agent instructions"},
		{"agent instructions, full width", create("openwiki/pages/ＡＧＥＮＴＳ.md", "x\n"), dirScope, High, "agent instructions"},
		{"agent configuration, trailing dot", create("openwiki/.Claude./settings.json", "x\n"), dirScope, High, "openwiki/.Claude./ holds agent configuration"},
		{"secret", create("openwiki/deploy/id_ed25519", "x\n"), dirScope, High, "a private key"},
		{"steering directory below a dot-directory is named once", create("openwiki/.cursor/rules/a.mdc", "x\n"), dirScope, High, "openwiki/.cursor/ holds agent configuration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Classify(tt.ch, tt.scope)
			assert.Equal(t, tt.want, r.Level, "%v", r.Reasons)
			require.NotEmpty(t, r.Reasons)
			if tt.reason != "" {
				assert.Contains(t, strings.Join(r.Reasons, "; "), tt.reason)
			}
		})
	}
}

// CFG-02: auto-loaded names planted inside openwiki/ are high risk (or
// refused outright by the name rules), never applied silently.
func TestClassifyCFG02(t *testing.T) {
	for _, p := range []string{
		"openwiki/.vscode/settings.json", "openwiki/AGENTS.md", "openwiki/.mcp.json",
		"openwiki/package.json", "openwiki/.envrc", "openwiki/.github/workflows/x.yml",
		"openwiki/.opencode/x", "openwiki/CLAUDE.md", "openwiki/.claude/settings.json",
		"openwiki/.cursor/mcp.json", "openwiki/.cUrSoR/mcp.json", "openwiki/opencode.json",
		"openwiki/.env", "openwiki/Makefile", "openwiki/node_modules/x/index.js",
	} {
		r := Classify(create(p, "{}\n"), dirScope)
		assert.Equal(t, High, r.Level, "%s: %v", p, r.Reasons)
	}
	// Refused by the name rules, as at collection and as by the write
	// policy, in every spelling that folds onto a reserved name.
	for _, p := range []string{
		"openwiki/.gitattributes", "openwiki/.gitignore", "openwiki/.openwikiignore", "openwiki/.git/hooks/x", "openwiki/.claims/a.lock",
		"openwiki/.claims./a.lock", "openwiki/.claims /a.lock", "openwiki/．claims/a.lock", "openwiki/.ｇｉｔ/config", "openwiki/GIT~1/x",
	} {
		assert.NotEmpty(t, checkPath(p, dirScope, nil), p)
	}
}

// Every name of a built-in hide list is high risk when written.
func TestClassifyHideListsAreHigh(t *testing.T) {
	for _, e := range names.Entries() {
		if e.Hide == "" {
			continue
		}
		p := "openwiki/" + strings.ReplaceAll(strings.TrimSuffix(e.Pattern, "/"), "*", "x")
		if strings.HasSuffix(e.Pattern, "/") {
			p += "/x.md"
		}
		r := Classify(create(p, "x\n"), dirScope)
		assert.Equal(t, High, r.Level, "%s: %v", p, r.Reasons)
	}
}

// The name rules here and in mounts agree: a path changeset.Patch refuses is
// refused here, and the reverse.
func TestNameRulesMatchMounts(t *testing.T) {
	for _, name := range []string{
		"a.md", ".git", ".GIT", ".git.", "git~1", ".claims", ".Claims", ".gitignore", ".openwikiignore",
		".gitattributes", ".gitmodules", "a\"b.md", "a\\b.md", "a\nb.md", "a\tb.md", "a\u202eb.md",
		"a\u200bb.md", "a\u2028b.md", "a\x7fb.md", "é.md", "a b.md", ".hidden", "x..md", "...",
	} {
		cs := set(create("openwiki/"+name+"/x.md", "x\n"))
		_, perr := changeset.Patch(cs)
		reason := checkPath("openwiki/"+name+"/x.md", dirScope, nil)
		assert.Equal(t, perr != nil, reason != "", "%q: mounts says %v, review says %q", name, perr, reason)
	}
}

func TestLevelText(t *testing.T) {
	for _, l := range []Level{Low, Medium, High} {
		b, err := l.MarshalText()
		require.NoError(t, err)
		var got Level
		require.NoError(t, got.UnmarshalText(b))
		assert.Equal(t, l, got)
	}
	_, err := ParseLevel("none")
	assert.Error(t, err)
}
