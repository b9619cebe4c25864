package names

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFold(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{".git", ".git"},
		{".GIT", ".git"},
		{".git.", ".git"},
		{".git ", ".git"},
		{".git . .", ".git"},
		{".git::$INDEX_ALLOCATION", ".git"},
		{".ｇｉｔ", ".git"},             // full-width letters
		{"．claims", ".claims"},       // full-width full stop
		{"ＡＧＥＮＴＳ.md", "agents.md"},   // full-width capitals
		{".claims\u3000", ".claims"}, // ideographic space, NFKC to ' '
		{".claims\u00a0", ".claims"}, // no-break space
		{".g\u200cit", ".git"},       // zero-width non-joiner (HFS+ ignores it)
		{".gi\u034ft", ".git"},       // combining grapheme joiner
		{"CLAUDE\ufe0f.md", "claude.md"},
		{"Straße.md", "strasse.md"},        // full case folding
		{"ﬁle.md", "file.md"},              // compatibility ligature
		{"e\u0301.md", "\u00e9.md"},        // combining form composes
		{"\u212Bngstrom", "\u00e5ngstrom"}, // Kelvin/Ångström signs
		{"...", ""},
		{"a.md", "a.md"},
	} {
		assert.Equal(t, tc.want, Fold(tc.in), "%q", tc.in)
	}
}

// Every look-alike spelling of a reserved name is reserved, and the rule
// names the path as written.
func TestReserved(t *testing.T) {
	for _, name := range []string{
		".git", ".GIT", ".git.", ".git ", ".ｇｉｔ", "git~1", "GIT~1",
		".claims", ".Claims", ".claims.", ".claims ", "．claims", ".ｃｌａｉｍｓ", ".cla\u200bims",
		".gitignore", ".GitIgnore", ".openwikiignore", ".openwikiignore.",
		".gitattributes", ".gitmodules", ".gitmodules ", ".corral-apply-0123", ".Corral-Apply-x",
	} {
		assert.NotEmpty(t, Reserved(name), "%q", name)
	}
	for _, name := range []string{"a.md", "git", ".gitx", "claims", ".claims2", "AGENTS.md", ".env"} {
		assert.Empty(t, Reserved(name), "%q", name)
	}
	assert.Equal(t, "openwiki/.claims. is owned by corral", ReservedPath("openwiki/.claims./x"))
	assert.Equal(t, "openwiki/.claims  is owned by corral", ReservedPath("openwiki/.claims /x"))
	assert.Equal(t, "a/.GIT is owned by git and never writable", ReservedPath("a/.GIT/config"))
	assert.Empty(t, ReservedPath("openwiki/pages/a.md"))
}

// A representative of every family, hidden by its list (and only when the
// list is enabled), in look-alike spellings too.
func TestHiddenFamilies(t *testing.T) {
	tests := []struct {
		family string
		path   string
		isDir  bool
		list   List
	}{
		{"git", "vendor/lib/.git/config", false, always},
		{"AGENTS.md", "sub/agents.md", false, AgentConfig},
		{"OpenAI Codex", "AGENTS.override.md", false, AgentConfig},
		{"OpenAI Codex", ".codex/config.toml", false, AgentConfig},
		{"agent skills", ".agents/skills/x/SKILL.md", false, AgentConfig},
		{"Claude Code", "sub/Claude.md", false, AgentConfig},
		{"Claude Code", "CLAUDE.local.md", false, AgentConfig},
		{"Claude Code", ".claude/settings.json", false, AgentConfig},
		{"Claude Code", ".claude/commands/deploy.md", false, AgentConfig},
		{"Claude Code", ".claude-plugin/marketplace.json", false, AgentConfig},
		{"MCP", ".mcp.json", false, AgentConfig},
		{"MCP", "tools/mcp.json", false, AgentConfig},
		{"Gemini CLI", "GEMINI.md", false, AgentConfig},
		{"Gemini CLI", ".gemini/settings.json", false, AgentConfig},
		{"Gemini CLI", ".geminiignore", false, AgentConfig},
		{"GitHub Copilot", ".github/copilot-instructions.md", false, AgentConfig},
		{"GitHub Copilot", ".github/instructions/go.instructions.md", false, AgentConfig},
		{"GitHub Copilot", ".github/prompts/release.prompt.md", false, AgentConfig},
		{"GitHub Copilot", ".github/chatmodes/plan.chatmode.md", false, AgentConfig},
		{"GitHub Copilot", ".github/agents/reviewer.agent.md", false, AgentConfig},
		{"GitHub Copilot", ".github/skills/x/SKILL.md", false, AgentConfig},
		{"Cursor", ".cursor/rules/go.mdc", false, AgentConfig},
		{"Cursor", ".cursor/mcp.json", false, AgentConfig},
		{"Cursor", ".cursorrules", false, AgentConfig},
		{"Cursor", ".cursorignore", false, AgentConfig},
		{"Cursor", ".cursorindexingignore", false, AgentConfig},
		{"Windsurf", ".windsurfrules", false, AgentConfig},
		{"Windsurf", ".windsurf/rules/a.md", false, AgentConfig},
		{"Windsurf", ".codeiumignore", false, AgentConfig},
		{"Cline", ".clinerules", false, AgentConfig},
		{"Cline", ".clinerules/01-style.md", false, AgentConfig},
		{"Cline", ".clinerules-code", false, AgentConfig},
		{"Cline", ".cline/rules/a.md", false, AgentConfig},
		{"Cline", ".clineignore", false, AgentConfig},
		{"Roo Code", ".roo/rules/a.md", false, AgentConfig},
		{"Roo Code", ".roomodes", false, AgentConfig},
		{"Roo Code", ".roorules", false, AgentConfig},
		{"Roo Code", ".roorules-code", false, AgentConfig},
		{"Roo Code", ".rooignore", false, AgentConfig},
		{"Continue", ".continue/rules/a.md", false, AgentConfig},
		{"Continue", ".continuerules", false, AgentConfig},
		{"Continue", ".continueignore", false, AgentConfig},
		{"Aider", ".aider.conf.yml", false, AgentConfig},
		{"Aider", ".aider.model.settings.yml", false, AgentConfig},
		{"Aider", ".aider.model.metadata.json", false, AgentConfig},
		{"Aider", ".aiderignore", false, AgentConfig},
		{"Zed", ".rules", false, AgentConfig},
		{"Zed", "AGENT.md", false, AgentConfig},
		{"Zed", ".zed/tasks.json", false, AgentConfig},
		{"JetBrains Junie", ".junie/guidelines.md", false, AgentConfig},
		{"Amazon Q Developer", ".amazonq/rules/a.md", false, AgentConfig},
		{"Kiro", ".kiro/steering/product.md", false, AgentConfig},
		{"OpenCode", "opencode.json", false, AgentConfig},
		{"OpenCode", "opencode.jsonc", false, AgentConfig},
		{"OpenCode", ".opencode/agent/x.md", false, AgentConfig},
		{"Augment", ".augment/rules/a.md", false, AgentConfig},
		{"Augment", ".augment-guidelines", false, AgentConfig},
		{"Augment", ".augmentignore", false, AgentConfig},
		{"Trae", ".trae/rules/project_rules.md", false, AgentConfig},
		{"Goose", ".goosehints", false, AgentConfig},
		{"Goose", ".goosehints.local", false, AgentConfig},
		{"Qwen Code", "QWEN.md", false, AgentConfig},
		{"Qwen Code", ".qwen/settings.json", false, AgentConfig},
		{"Warp", "WARP.md", false, AgentConfig},
		{"Crush", "CRUSH.md", false, AgentConfig},
		{"Crush", "CRUSH.local.md", false, AgentConfig},
		{"Crush", ".crush.json", false, AgentConfig},
		{"Crush", "crush.json", false, AgentConfig},
		{"Crush", ".crushignore", false, AgentConfig},
		{"Kilo Code", ".kilocode/rules/a.md", false, AgentConfig},
		{"Kilo Code", ".kilocoderules", false, AgentConfig},
		{"Firebase Studio", ".idx/airules.md", false, AgentConfig},
		{"Firebase Studio", ".aiexclude", false, AgentConfig},
		{"VS Code", ".vscode/tasks.json", false, AgentConfig},
		{"VS Code", "project.code-workspace", false, AgentConfig},
		{"Dev Containers", ".devcontainer/devcontainer.json", false, AgentConfig},
		{"Dev Containers", ".devcontainer.json", false, AgentConfig},
		{"JetBrains IDEs", ".idea/runConfigurations/x.xml", false, AgentConfig},
		{"JetBrains IDEs", ".run/Build.run.xml", false, AgentConfig},
		{"JetBrains Fleet", ".fleet/run.json", false, AgentConfig},
		{"Gitpod", ".gitpod.yml", false, AgentConfig},
		{"environment files", ".env", false, Secrets},
		{"environment files", "config/.env.production", false, Secrets},
		{"environment files", ".envrc", false, Secrets},
		{"private keys", ".ssh/id_rsa", false, Secrets},
		{"private keys", "keys/id_dsa", false, Secrets},
		{"private keys", "id_ecdsa", false, Secrets},
		{"private keys", "id_ecdsa_sk", false, Secrets},
		{"private keys", "deploy/id_ed25519", false, Secrets},
		{"private keys", "id_ed25519_sk", false, Secrets},
		{"private keys", "secrets/signing-key.pem", false, Secrets},
		{"private keys", "tls/server.key", false, Secrets},
		{"private keys", "cert.p12", false, Secrets},
		{"private keys", "cert.pfx", false, Secrets},
		{"private keys", "app.jks", false, Secrets},
		{"private keys", "release.keystore", false, Secrets},
		{"private keys", "putty.ppk", false, Secrets},
		{"private keys", "home/.gnupg/pubring.kbx", false, Secrets},
		{"cloud credentials", ".aws/credentials", false, Secrets},
		{"cloud credentials", ".azure/accessTokens.json", false, Secrets},
		{"cloud credentials", "home/.config/gcloud/credentials.db", false, Secrets},
		{"cloud credentials", "application_default_credentials.json", false, Secrets},
		{"cloud credentials", "service-account-prod.json", false, Secrets},
		{"cloud credentials", "service_account.json", false, Secrets},
		{"cloud credentials", "serviceAccountKey.json", false, Secrets},
		{"cloud credentials", "client_secret_123.apps.googleusercontent.com.json", false, Secrets},
		{"cloud credentials", ".boto", false, Secrets},
		{"cloud credentials", ".s3cfg", false, Secrets},
		{"cloud credentials", ".oci/config", false, Secrets},
		{"registry credentials", ".npmrc", false, Secrets},
		{"registry credentials", ".pypirc", false, Secrets},
		{"registry credentials", ".netrc", false, Secrets},
		{"registry credentials", "_netrc", false, Secrets},
		{"registry credentials", ".git-credentials", false, Secrets},
		{"registry credentials", ".docker/config.json", false, Secrets},
		{"registry credentials", ".dockercfg", false, Secrets},
		{"registry credentials", ".cargo/credentials", false, Secrets},
		{"registry credentials", ".cargo/credentials.toml", false, Secrets},
		{"registry credentials", ".gem/credentials", false, Secrets},
		{"registry credentials", "auth.json", false, Secrets},
		{"registry credentials", ".terraformrc", false, Secrets},
		{"registry credentials", "terraform.rc", false, Secrets},
		{"registry credentials", ".config/gh/hosts.yml", false, Secrets},
		{"kubeconfigs", ".kube/config", false, Secrets},
		{"kubeconfigs", "kubeconfig", false, Secrets},
		{"kubeconfigs", "prod.kubeconfig", false, Secrets},
		{"Terraform state", "infra/terraform.tfstate", false, Secrets},
		{"Terraform state", "terraform.tfstate.backup", false, Secrets},
		{"Terraform state", "prod.tfvars", false, Secrets},
		{"Terraform state", "prod.tfvars.json", false, Secrets},
		{"password files", ".vault-token", false, Secrets},
		{"password files", ".pgpass", false, Secrets},
		{"password files", ".my.cnf", false, Secrets},
		{"password files", "www/.htpasswd", false, Secrets},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.family] = true
		rule, hidden := Hidden(tt.path, tt.isDir, AgentConfig, Secrets)
		assert.True(t, hidden, "%s (%s) is not hidden", tt.path, tt.family)
		if tt.list != always {
			want := "profile hides agent config "
			if tt.list == Secrets {
				want = "built-in secrets list: "
			}
			assert.True(t, strings.HasPrefix(rule, want), "%s: %s", tt.path, rule)
			assert.Contains(t, rule, "("+tt.family+")", tt.path)
			_, hidden = Hidden(tt.path, tt.isDir, otherList(tt.list))
			assert.False(t, hidden, "%s is hidden without its list %s", tt.path, tt.list)
		}
		// The same path, its last component in a look-alike spelling.
		i := strings.LastIndexByte(tt.path, '/')
		odd := tt.path[:i+1] + fullWidth(tt.path[i+1:]) + "."
		_, hidden = Hidden(odd, tt.isDir, AgentConfig, Secrets)
		assert.True(t, hidden, "%q (%s) is not hidden", odd, tt.family)
		// Every hide entry is high risk for review.
		assert.NotEmpty(t, Risk(tt.path), tt.path)
	}
	for _, e := range Entries() {
		if e.Hide != "" {
			assert.True(t, covered[e.Family], "family %s (%s) has no test", e.Family, e.Pattern)
		}
	}
}

// TestHiddenEntry: judging one entry of a visible directory agrees with
// Hidden on the whole path, for every test path of the table, its
// ancestors and look-alike spellings.
func TestHiddenEntry(t *testing.T) {
	var paths []string
	for _, e := range Entries() {
		p := strings.ReplaceAll(e.Pattern, "*", "x")
		paths = append(paths, strings.TrimSuffix(p, "/"), "a/"+p+"f", "sub/"+strings.TrimSuffix(p, "/"), fullWidth(strings.TrimSuffix(p, "/"))+".")
	}
	paths = append(paths, "README.md", ".env.example", "x/.GIT", "docs/agents.md", ".github/prompts/a.prompt.md", "a/.github/instructions")
	for _, p := range paths {
		comps := strings.Split(p, "/")
		var dir []string
		for i, c := range comps {
			q := strings.Join(comps[:i+1], "/")
			for _, isDir := range []bool{false, true} {
				for _, lists := range [][]List{nil, {AgentConfig}, {Secrets}, {AgentConfig, Secrets}} {
					wantRule, want := Hidden(q, isDir, lists...)
					gotRule, got := HiddenEntry(dir, Fold(c), isDir, lists...)
					if ancestorHidden(comps[:i], lists) {
						continue
					}
					assert.Equal(t, want, got, "%q isDir=%v lists=%v", q, isDir, lists)
					assert.Equal(t, wantRule, gotRule, "%q isDir=%v lists=%v", q, isDir, lists)
				}
			}
			dir = append(dir, Fold(c))
		}
	}
}

func ancestorHidden(comps []string, lists []List) bool {
	for i := range comps {
		if _, hidden := Hidden(strings.Join(comps[:i+1], "/"), true, lists...); hidden {
			return true
		}
	}
	return false
}

func BenchmarkHiddenEntry(b *testing.B) {
	dir := []string{"src", "internal", "pkg", "module"}
	for range b.N {
		HiddenEntry(dir, "file_test.go", false, AgentConfig, Secrets)
	}
}

func otherList(l List) List {
	if l == AgentConfig {
		return Secrets
	}
	return AgentConfig
}

// fullWidth spells ASCII letters in their full-width forms.
func fullWidth(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '!' && r <= '~' && r != '.' && r != '*' {
			r += 0xFF01 - '!'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func TestHiddenNot(t *testing.T) {
	for _, p := range []string{
		"README.md", "docs/agents.txt", "AGENTS.mdx", "src/claude.go",
		".env.example", ".env.sample", ".env.template", "config/.env.example",
		".ssh.md", "id_rsa.pub", "id_ed25519.pub", "keys.md", "public.pem.md",
		".github/workflows/ci.yml", ".github/prompts/readme.md", ".github/ISSUE_TEMPLATE/bug.md",
		"credentials.md", "account.json", "kube/config", "package.json",
		"git", "claims", "openwiki/.claims", // .claims is hidden by the view for its write directory only
	} {
		rule, hidden := Hidden(p, false, AgentConfig, Secrets)
		assert.False(t, hidden, "%s: %s", p, rule)
	}
}

// A directory pattern matches a directory, or anything below one of its
// name, never a file of that name.
func TestHiddenDirectoryPatterns(t *testing.T) {
	_, hidden := Hidden(".claude", false, AgentConfig)
	assert.False(t, hidden, "a file named .claude")
	_, hidden = Hidden(".claude", true, AgentConfig)
	assert.True(t, hidden)
	_, hidden = Hidden(".github/instructions", true, AgentConfig)
	assert.True(t, hidden)
	_, hidden = Hidden(".github/instructions", false, AgentConfig)
	assert.False(t, hidden)
	// A name pattern hides a directory of that name and everything in it.
	_, hidden = Hidden("AGENTS.md/x", false, AgentConfig)
	assert.True(t, hidden)
	rule, hidden := Hidden(".GIT./hooks/pre-commit", false)
	assert.True(t, hidden)
	assert.Equal(t, ".git is hidden at any depth", rule)
	assert.Equal(t, ".git is hidden at any depth", mustRule(t, "a/b/.git", true))
}

func mustRule(t *testing.T, p string, isDir bool) string {
	t.Helper()
	rule, hidden := Hidden(p, isDir)
	require.True(t, hidden, p)
	return rule
}

func TestMatchAndRisk(t *testing.T) {
	hits := Match("openwiki/.github/copilot-instructions.md", false)
	require.Len(t, hits, 2)
	assert.Equal(t, "openwiki/.github", hits[0].Path)
	assert.True(t, hits[0].Below)
	assert.Equal(t, "openwiki/.github/copilot-instructions.md", hits[1].Path)
	assert.False(t, hits[1].Below)
	assert.Equal(t, AgentConfig, hits[1].Hide)
	assert.Equal(t, []string{
		"openwiki/.github/ holds CI and repository configuration that tools load on their own",
		"openwiki/.github/copilot-instructions.md is agent instructions that agents load on their own",
	}, Risk("openwiki/.github/copilot-instructions.md"))
	assert.Equal(t, []string{"openwiki/ci/workflows/ holds CI definitions that tools load on their own"}, Risk("openwiki/ci/workflows/x.yml"))
	assert.Equal(t, []string{"openwiki/pages/Agents.MD is agent instructions that agents load on their own"}, Risk("openwiki/pages/Agents.MD"))
	assert.Equal(t, []string{"openwiki/ＭＡＫＥＦＩＬＥ is a build script that tools run on their own"}, Risk("openwiki/ＭＡＫＥＦＩＬＥ"))
	assert.Empty(t, Risk("openwiki/pages/a.md"))
	assert.Empty(t, Match(".", true))
}

func TestLists(t *testing.T) {
	for _, l := range Lists() {
		got, err := ParseList(string(l))
		require.NoError(t, err)
		assert.Equal(t, l, got)
	}
	_, err := ParseList("agent_config")
	assert.ErrorContains(t, err, `"agent_config"`)
	_, err = ParseList(string(always))
	assert.Error(t, err, "the always-hidden entries are no list a profile can name")
}

func TestPatterns(t *testing.T) {
	p := Patterns(AgentConfig)
	assert.Contains(t, p, "AGENTS.md")
	assert.Contains(t, p, ".claude/")
	assert.Contains(t, p, "**/.github/copilot-instructions.md")
	assert.Contains(t, p, "**/.github/instructions/")
	assert.NotContains(t, p, ".env")
	assert.Contains(t, Patterns(Secrets), ".env")
	assert.Empty(t, Patterns(Gitignore))
}

// Every entry's pattern compiles, and the table holds no duplicates.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Entries() {
		var lits []string
		for _, p := range e.parts {
			lits = append(lits, p.lit)
		}
		key := strings.Join(lits, "/")
		if e.dir {
			key += "/"
		}
		assert.False(t, seen[key], "duplicate entry %s", e.Pattern)
		seen[key] = true
		assert.NotEmpty(t, e.Family, e.Pattern)
		assert.NotEmpty(t, e.Risk, "%s: every special name is high risk", e.Pattern)
	}
}

func BenchmarkHidden(b *testing.B) {
	for range b.N {
		Hidden("src/internal/pkg/module/file_test.go", false, AgentConfig, Secrets)
	}
}
