package names

// Risk phrases shared by many rows.
const (
	instructions = "agent instructions that agents load on their own"
	agentConfig  = "agent configuration that agents load on their own"
	agentIgnore  = "an agent ignore file: it changes what an agent sees"
	mcpConfig    = "MCP server configuration: agents start the servers it names"
	workspace    = "workspace configuration from which an editor runs tasks when the folder opens"
)

// table is THE name table. Each family cites where its names are
// documented. Patterns match folded and at any depth (see Entry).
var table = []Entry{
	// --- Reserved: owned by git or corral, never written by a sandbox. ---

	// git's own directory (a directory, or a "gitdir:" file in a worktree
	// or submodule) and its NTFS 8.3 short name:
	// https://git-scm.com/docs/gitrepository-layout,
	// https://git-scm.com/docs/git-config#Documentation/git-config.txt-coreprotectNTFS
	{Pattern: ".git", Family: "git", Hide: always, rule: ".git is hidden at any depth",
		Reserved: "is owned by git and never writable", Risk: "git's own metadata"},
	{Pattern: "git~1", Family: "git", Reserved: "is git's NTFS short name and never writable", Risk: "git's NTFS short name"},
	// corral's own claim files under the write directory, and the staging
	// directories of its applies.
	{Pattern: ".claims", Family: "corral", Reserved: "is owned by corral", Risk: "owned by corral"},
	{Pattern: ".corral-apply-*", Family: "corral", Reserved: "is owned by corral (an apply's staging directory)", Risk: "owned by corral"},
	// Ignore files decide what corral and git hide: the view is computed
	// from the base repository, and a sandbox may not change it.
	{Pattern: ".openwikiignore", Family: "corral", Reserved: "is an ignore file: ignore files cannot be changed from the sandbox",
		Risk: "an ignore file: it changes what tools see"},
	// https://git-scm.com/docs/gitignore
	{Pattern: ".gitignore", Family: "git", Reserved: "is an ignore file: ignore files cannot be changed from the sandbox",
		Risk: "an ignore file: it changes what tools see"},
	// Attributes name filter and diff drivers git runs; submodules name
	// repositories git fetches:
	// https://git-scm.com/docs/gitattributes, https://git-scm.com/docs/gitmodules
	{Pattern: ".gitattributes", Family: "git", Reserved: "is a git control file: git control files cannot be changed from the sandbox",
		Risk: "git attributes (filters run programs)"},
	{Pattern: ".gitmodules", Family: "git", Reserved: "is a git control file: git control files cannot be changed from the sandbox",
		Risk: "git submodules (git fetches what they name)"},

	// --- Agent steering: the agent-config list. ---

	// AGENTS.md, read by most agents: https://agents.md/ ; Codex adds
	// AGENTS.override.md and reads .codex/ and .agents/skills/:
	// https://developers.openai.com/codex/guides/agents-md,
	// https://developers.openai.com/codex/skills
	{Pattern: "AGENTS.md", Family: "AGENTS.md", Hide: AgentConfig, Risk: instructions},
	{Pattern: "AGENTS.override.md", Family: "OpenAI Codex", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".codex/", Family: "OpenAI Codex", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".agents/", Family: "agent skills", Hide: AgentConfig, Risk: agentConfig},
	// Claude Code: CLAUDE.md, CLAUDE.local.md, .claude/ (settings with
	// hooks that run commands, commands, agents, skills, rules), .mcp.json:
	// https://code.claude.com/docs/en/memory, https://code.claude.com/docs/en/settings
	{Pattern: "CLAUDE.md", Family: "Claude Code", Hide: AgentConfig, Risk: instructions},
	{Pattern: "CLAUDE.local.md", Family: "Claude Code", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".claude/", Family: "Claude Code", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".claude-plugin/", Family: "Claude Code", Hide: AgentConfig, Risk: agentConfig},
	// MCP configuration files: .mcp.json (Claude Code, VS Code's portable
	// form) and mcp.json (.vscode/, .cursor/, .idx/, .amazonq/ …):
	// https://code.visualstudio.com/docs/agents/reference/mcp-configuration
	{Pattern: ".mcp.json", Family: "MCP", Hide: AgentConfig, Risk: mcpConfig},
	{Pattern: "mcp.json", Family: "MCP", Hide: AgentConfig, Risk: mcpConfig},
	// Gemini CLI: GEMINI.md and .gemini/ (settings, commands, .env):
	// https://geminicli.com/docs/cli/gemini-md, https://geminicli.com/docs/cli/configuration
	{Pattern: "GEMINI.md", Family: "Gemini CLI", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".gemini/", Family: "Gemini CLI", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".geminiignore", Family: "Gemini CLI", Hide: AgentConfig, Risk: agentIgnore},
	// GitHub Copilot: repository and path-specific instructions, prompt
	// files, chat modes, custom agents, skills:
	// https://docs.github.com/en/copilot/how-tos/configure-custom-instructions-in-your-ide/add-repository-instructions-in-your-ide,
	// https://code.visualstudio.com/docs/agent-customization/prompt-files
	{Pattern: ".github/copilot-instructions.md", Family: "GitHub Copilot", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".github/instructions/", Family: "GitHub Copilot", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".github/prompts/*.prompt.md", Family: "GitHub Copilot", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".github/chatmodes/", Family: "GitHub Copilot", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".github/agents/", Family: "GitHub Copilot", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".github/skills/", Family: "GitHub Copilot", Hide: AgentConfig, Risk: instructions},
	// Cursor: .cursor/ (rules/*.mdc, mcp.json, commands), the legacy
	// .cursorrules, and its ignore files: https://cursor.com/help/customization/rules.md,
	// https://cursor.com/docs/mcp
	{Pattern: ".cursor/", Family: "Cursor", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".cursorrules", Family: "Cursor", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".cursorignore", Family: "Cursor", Hide: AgentConfig, Risk: agentIgnore},
	{Pattern: ".cursorindexingignore", Family: "Cursor", Hide: AgentConfig, Risk: agentIgnore},
	// Windsurf: .windsurf/ (rules, workflows), .windsurfrules, .codeiumignore:
	// https://docs.windsurf.com/windsurf/cascade/memories
	{Pattern: ".windsurf/", Family: "Windsurf", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".windsurfrules", Family: "Windsurf", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".codeiumignore", Family: "Windsurf", Hide: AgentConfig, Risk: agentIgnore},
	// Cline: .clinerules (a file or a directory), .cline/, .clineignore:
	// https://docs.cline.bot/customization/cline-rules, https://docs.cline.bot/getting-started/config
	{Pattern: ".clinerules", Family: "Cline", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".clinerules-*", Family: "Cline", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".cline/", Family: "Cline", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".clineignore", Family: "Cline", Hide: AgentConfig, Risk: agentIgnore},
	// Roo Code: .roo/ (rules, rules-<mode>), .roorules, .roorules-<mode>,
	// .roomodes, .rooignore: https://docs.roocode.com/features/custom-instructions
	{Pattern: ".roo/", Family: "Roo Code", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".roorules", Family: "Roo Code", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".roorules-*", Family: "Roo Code", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".roomodes", Family: "Roo Code", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".rooignore", Family: "Roo Code", Hide: AgentConfig, Risk: agentIgnore},
	// Continue: .continue/ (rules, prompts, mcpServers), .continuerules,
	// .continueignore: https://docs.continue.dev/customize/deep-dives/rules
	{Pattern: ".continue/", Family: "Continue", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".continuerules", Family: "Continue", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".continueignore", Family: "Continue", Hide: AgentConfig, Risk: agentIgnore},
	// Aider: .aider.conf.yml, model settings, .aiderignore:
	// https://aider.chat/docs/config/aider_conf.html
	{Pattern: ".aider.conf.yml", Family: "Aider", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".aider.model.settings.yml", Family: "Aider", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".aider.model.metadata.json", Family: "Aider", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".aiderignore", Family: "Aider", Hide: AgentConfig, Risk: agentIgnore},
	// Zed: .rules (first of its instruction files), AGENT.md, and .zed/
	// (settings with context servers, tasks.json): https://zed.dev/docs/ai/rules
	{Pattern: ".rules", Family: "Zed", Hide: AgentConfig, Risk: instructions},
	{Pattern: "AGENT.md", Family: "Zed", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".zed/", Family: "Zed", Hide: AgentConfig, Risk: workspace},
	// JetBrains Junie: .junie/ (guidelines.md, AGENTS.md, MCP):
	// https://www.jetbrains.com/help/junie/customize-guidelines.html
	{Pattern: ".junie/", Family: "JetBrains Junie", Hide: AgentConfig, Risk: agentConfig},
	// Amazon Q Developer: .amazonq/ (rules, agents, mcp.json):
	// https://docs.aws.amazon.com/amazonq/latest/qdeveloper-ug/context-project-rules.html
	{Pattern: ".amazonq/", Family: "Amazon Q Developer", Hide: AgentConfig, Risk: agentConfig},
	// Kiro: .kiro/ (steering, hooks that run on events, specs, MCP
	// settings): https://kiro.dev/docs/steering/
	{Pattern: ".kiro/", Family: "Kiro", Hide: AgentConfig, Risk: agentConfig},
	// OpenCode: opencode.json(c) and .opencode/ (agents, commands,
	// plugins): https://opencode.ai/docs/config/, https://opencode.ai/docs/rules/
	{Pattern: "opencode.json", Family: "OpenCode", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: "opencode.jsonc", Family: "OpenCode", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".opencode/", Family: "OpenCode", Hide: AgentConfig, Risk: agentConfig},
	// Augment: .augment/ (rules, guidelines), .augment-guidelines,
	// .augmentignore: https://docs.augmentcode.com/cli/rules
	{Pattern: ".augment/", Family: "Augment", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".augment-guidelines", Family: "Augment", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".augmentignore", Family: "Augment", Hide: AgentConfig, Risk: agentIgnore},
	// Trae: .trae/ (rules/project_rules.md):
	// https://docs.trae.ai/ide/rules-for-ai
	{Pattern: ".trae/", Family: "Trae", Hide: AgentConfig, Risk: agentConfig},
	// Goose: .goosehints (and its .local variant):
	// https://block.github.io/goose/docs/guides/using-goosehints
	{Pattern: ".goosehints", Family: "Goose", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".goosehints.*", Family: "Goose", Hide: AgentConfig, Risk: instructions},
	// Qwen Code: QWEN.md and .qwen/:
	// https://qwenlm.github.io/qwen-code-docs/en/users/configuration/settings
	{Pattern: "QWEN.md", Family: "Qwen Code", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".qwen/", Family: "Qwen Code", Hide: AgentConfig, Risk: agentConfig},
	// Warp: WARP.md (project rules): https://docs.warp.dev/agents/capabilities/rules.md
	{Pattern: "WARP.md", Family: "Warp", Hide: AgentConfig, Risk: instructions},
	// Crush: CRUSH.md, CRUSH.local.md, its configuration and ignore file:
	// https://github.com/charmbracelet/crush#readme
	{Pattern: "CRUSH.md", Family: "Crush", Hide: AgentConfig, Risk: instructions},
	{Pattern: "CRUSH.local.md", Family: "Crush", Hide: AgentConfig, Risk: instructions},
	{Pattern: ".crush.json", Family: "Crush", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: "crush.json", Family: "Crush", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".crushignore", Family: "Crush", Hide: AgentConfig, Risk: agentIgnore},
	// Kilo Code: .kilocode/ (rules, workflows, mcp.json), .kilocoderules:
	// https://kilo.ai/docs/customize/custom-rules
	{Pattern: ".kilocode/", Family: "Kilo Code", Hide: AgentConfig, Risk: agentConfig},
	{Pattern: ".kilocoderules", Family: "Kilo Code", Hide: AgentConfig, Risk: instructions},
	// Firebase Studio: .idx/ (airules.md, mcp.json, dev.nix with workspace
	// start hooks) and .aiexclude:
	// https://firebase.google.com/docs/studio/set-up-gemini
	{Pattern: ".idx/", Family: "Firebase Studio", Hide: AgentConfig, Risk: workspace},
	{Pattern: ".aiexclude", Family: "Firebase Studio", Hide: AgentConfig, Risk: agentIgnore},
	// Editors and workspaces that run tasks when a folder opens: VS Code
	// (.vscode/ tasks.json with runOn folderOpen, settings, mcp.json) and
	// *.code-workspace files: https://code.visualstudio.com/docs/debugtest/tasks,
	// https://code.visualstudio.com/docs/editing/workspaces/workspace-trust
	{Pattern: ".vscode/", Family: "VS Code", Hide: AgentConfig, Risk: workspace},
	{Pattern: "*.code-workspace", Family: "VS Code", Hide: AgentConfig, Risk: workspace},
	// Dev containers (initializeCommand runs on the host):
	// https://containers.dev/implementors/json_reference/
	{Pattern: ".devcontainer/", Family: "Dev Containers", Hide: AgentConfig, Risk: workspace},
	{Pattern: ".devcontainer.json", Family: "Dev Containers", Hide: AgentConfig, Risk: workspace},
	// JetBrains IDEs: .idea/ (run configurations, project prompts) and run
	// configurations stored as *.run.xml:
	// https://www.jetbrains.com/help/idea/run-debug-configuration.html
	{Pattern: ".idea/", Family: "JetBrains IDEs", Hide: AgentConfig, Risk: workspace},
	{Pattern: "*.run.xml", Family: "JetBrains IDEs", Hide: AgentConfig, Risk: workspace},
	// JetBrains Fleet run configurations: https://www.jetbrains.com/help/fleet/run-configs.html
	{Pattern: ".fleet/", Family: "JetBrains Fleet", Hide: AgentConfig, Risk: workspace},
	// Gitpod tasks run when a workspace starts: https://www.gitpod.io/docs/configure/workspaces/tasks
	{Pattern: ".gitpod.yml", Family: "Gitpod", Hide: AgentConfig, Risk: workspace},

	// --- Secrets: the secrets list. ---

	// Environment files (dotenv, direnv's .envrc runs in the shell);
	// templates stay visible: https://github.com/motdotla/dotenv#readme,
	// https://direnv.net/man/direnv-stdlib.1.html
	{Pattern: ".env", Family: "environment files", Hide: Secrets, Risk: "an environment file (secrets)"},
	{Pattern: ".env.*", Family: "environment files", Hide: Secrets, Risk: "an environment file (secrets)",
		Except: []string{".env.example", ".env.sample", ".env.template"}},
	{Pattern: ".envrc", Family: "environment files", Hide: Secrets, Risk: "a shell environment file (direnv runs it)"},
	// Private keys: OpenSSH identity files (ssh-keygen(1) FILES; the .pub
	// halves stay visible), PEM/PKCS#12/Java key stores, PuTTY keys, and
	// the ssh and GnuPG directories: https://man.openbsd.org/ssh-keygen#FILES,
	// https://www.gnupg.org/documentation/manuals/gnupg/GPG-Configuration.html
	{Pattern: "id_rsa", Family: "private keys", Hide: Secrets, Risk: "a private key"},
	{Pattern: "id_dsa", Family: "private keys", Hide: Secrets, Risk: "a private key"},
	{Pattern: "id_ecdsa", Family: "private keys", Hide: Secrets, Risk: "a private key"},
	{Pattern: "id_ecdsa_sk", Family: "private keys", Hide: Secrets, Risk: "a private key"},
	{Pattern: "id_ed25519", Family: "private keys", Hide: Secrets, Risk: "a private key"},
	{Pattern: "id_ed25519_sk", Family: "private keys", Hide: Secrets, Risk: "a private key"},
	{Pattern: "*.pem", Family: "private keys", Hide: Secrets, Risk: "a private key or certificate"},
	{Pattern: "*.key", Family: "private keys", Hide: Secrets, Risk: "a private key"},
	{Pattern: "*.p12", Family: "private keys", Hide: Secrets, Risk: "a key store"},
	{Pattern: "*.pfx", Family: "private keys", Hide: Secrets, Risk: "a key store"},
	{Pattern: "*.jks", Family: "private keys", Hide: Secrets, Risk: "a key store"},
	{Pattern: "*.keystore", Family: "private keys", Hide: Secrets, Risk: "a key store"},
	{Pattern: "*.ppk", Family: "private keys", Hide: Secrets, Risk: "a private key"},
	{Pattern: ".ssh/", Family: "private keys", Hide: Secrets, Risk: "SSH keys and configuration"},
	{Pattern: ".gnupg/", Family: "private keys", Hide: Secrets, Risk: "GnuPG keys"},
	// Cloud credentials: AWS (~/.aws/credentials), Azure CLI (~/.azure/),
	// Google Cloud (gcloud's configuration directory, application default
	// credentials, service-account and OAuth client key files by their
	// documented names), gsutil's .boto, s3cmd's .s3cfg, OCI's .oci/:
	// https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-files.html,
	// https://learn.microsoft.com/en-us/cli/azure/azure-cli-configuration,
	// https://cloud.google.com/docs/authentication/application-default-credentials,
	// https://docs.oracle.com/en-us/iaas/Content/API/Concepts/sdkconfig.htm
	{Pattern: ".aws/", Family: "cloud credentials", Hide: Secrets, Risk: "cloud credentials"},
	{Pattern: ".azure/", Family: "cloud credentials", Hide: Secrets, Risk: "cloud credentials"},
	{Pattern: ".config/gcloud/", Family: "cloud credentials", Hide: Secrets, Risk: "cloud credentials"},
	{Pattern: "application_default_credentials.json", Family: "cloud credentials", Hide: Secrets, Risk: "cloud credentials"},
	{Pattern: "service-account*.json", Family: "cloud credentials", Hide: Secrets, Risk: "a service-account key"},
	{Pattern: "service_account*.json", Family: "cloud credentials", Hide: Secrets, Risk: "a service-account key"},
	{Pattern: "serviceAccountKey.json", Family: "cloud credentials", Hide: Secrets, Risk: "a service-account key"},
	{Pattern: "client_secret*.json", Family: "cloud credentials", Hide: Secrets, Risk: "an OAuth client secret"},
	{Pattern: ".boto", Family: "cloud credentials", Hide: Secrets, Risk: "cloud credentials"},
	{Pattern: ".s3cfg", Family: "cloud credentials", Hide: Secrets, Risk: "cloud credentials"},
	{Pattern: ".oci/", Family: "cloud credentials", Hide: Secrets, Risk: "cloud credentials"},
	// Registry and service credentials: npm, PyPI, netrc (curl, git,
	// pip), git's credential store, Docker, Cargo, RubyGems, Composer's
	// auth.json, Terraform CLI tokens, GitHub CLI hosts:
	// https://docs.npmjs.com/cli/configuring-npm/npmrc,
	// https://packaging.python.org/en/latest/specifications/pypirc/,
	// https://everything.curl.dev/usingcurl/netrc.html,
	// https://git-scm.com/docs/git-credential-store#_storage_format,
	// https://docs.docker.com/reference/cli/docker/login/,
	// https://doc.rust-lang.org/cargo/reference/config.html#credentials,
	// https://guides.rubygems.org/command-reference/#gem-signin,
	// https://getcomposer.org/doc/articles/authentication-for-private-packages.md,
	// https://developer.hashicorp.com/terraform/cli/config/config-file#credentials,
	// https://cli.github.com/manual/gh_help_environment
	{Pattern: ".npmrc", Family: "registry credentials", Hide: Secrets, Risk: "package manager configuration (registry tokens)"},
	{Pattern: ".pypirc", Family: "registry credentials", Hide: Secrets, Risk: "registry credentials"},
	{Pattern: ".netrc", Family: "registry credentials", Hide: Secrets, Risk: "login credentials"},
	{Pattern: "_netrc", Family: "registry credentials", Hide: Secrets, Risk: "login credentials"},
	{Pattern: ".git-credentials", Family: "registry credentials", Hide: Secrets, Risk: "git credentials"},
	{Pattern: ".docker/config.json", Family: "registry credentials", Hide: Secrets, Risk: "registry credentials"},
	{Pattern: ".dockercfg", Family: "registry credentials", Hide: Secrets, Risk: "registry credentials"},
	{Pattern: ".cargo/credentials", Family: "registry credentials", Hide: Secrets, Risk: "registry credentials"},
	{Pattern: ".cargo/credentials.toml", Family: "registry credentials", Hide: Secrets, Risk: "registry credentials"},
	{Pattern: ".gem/credentials", Family: "registry credentials", Hide: Secrets, Risk: "registry credentials"},
	{Pattern: "auth.json", Family: "registry credentials", Hide: Secrets, Risk: "registry credentials (Composer)"},
	{Pattern: ".terraformrc", Family: "registry credentials", Hide: Secrets, Risk: "registry credentials"},
	{Pattern: "terraform.rc", Family: "registry credentials", Hide: Secrets, Risk: "registry credentials"},
	{Pattern: ".config/gh/", Family: "registry credentials", Hide: Secrets, Risk: "GitHub CLI tokens"},
	// Kubeconfigs: https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/
	{Pattern: ".kube/", Family: "kubeconfigs", Hide: Secrets, Risk: "cluster credentials"},
	{Pattern: "kubeconfig", Family: "kubeconfigs", Hide: Secrets, Risk: "cluster credentials"},
	{Pattern: "*.kubeconfig", Family: "kubeconfigs", Hide: Secrets, Risk: "cluster credentials"},
	// Terraform state and variable files hold secrets in clear text:
	// https://developer.hashicorp.com/terraform/language/state/sensitive-data
	{Pattern: "*.tfstate", Family: "Terraform state", Hide: Secrets, Risk: "Terraform state (secrets in clear text)"},
	{Pattern: "*.tfstate.*", Family: "Terraform state", Hide: Secrets, Risk: "Terraform state (secrets in clear text)"},
	{Pattern: "*.tfvars", Family: "Terraform state", Hide: Secrets, Risk: "Terraform variables (secrets)"},
	{Pattern: "*.tfvars.json", Family: "Terraform state", Hide: Secrets, Risk: "Terraform variables (secrets)"},
	// Vault, PostgreSQL, MySQL and Apache password files:
	// https://developer.hashicorp.com/vault/docs/commands#vault_token,
	// https://www.postgresql.org/docs/current/libpq-pgpass.html,
	// https://dev.mysql.com/doc/refman/8.4/en/option-files.html,
	// https://httpd.apache.org/docs/current/programs/htpasswd.html
	{Pattern: ".vault-token", Family: "password files", Hide: Secrets, Risk: "a Vault token"},
	{Pattern: ".pgpass", Family: "password files", Hide: Secrets, Risk: "database passwords"},
	{Pattern: ".my.cnf", Family: "password files", Hide: Secrets, Risk: "database passwords"},
	{Pattern: ".htpasswd", Family: "password files", Hide: Secrets, Risk: "password hashes"},

	// --- Tooling review rates high; hidden by no list. ---

	// CI, hooks and repository configuration.
	{Pattern: ".github/", Family: "GitHub", Risk: "CI and repository configuration that tools load on their own"},
	{Pattern: ".gitlab/", Family: "GitLab", Risk: "CI configuration that tools load on their own"},
	{Pattern: ".circleci/", Family: "CircleCI", Risk: "CI configuration that tools load on their own"},
	{Pattern: ".buildkite/", Family: "Buildkite", Risk: "CI configuration that tools load on their own"},
	{Pattern: "workflows/", Family: "CI", Risk: "CI definitions that tools load on their own"},
	{Pattern: ".husky/", Family: "git hooks", Risk: "git hooks that tools run on their own"},
	{Pattern: ".githooks/", Family: "git hooks", Risk: "git hooks that tools run on their own"},
	{Pattern: ".aider/", Family: "Aider", Risk: agentConfig},
	{Pattern: "node_modules/", Family: "npm", Risk: "a package manager tree that tools load on their own"},
	// Package managers and builds.
	{Pattern: "package.json", Family: "npm", Risk: "a package manifest (install scripts) that tools read on their own"},
	{Pattern: "package-lock.json", Family: "npm", Risk: "a package lock that tools read on their own"},
	{Pattern: "npm-shrinkwrap.json", Family: "npm", Risk: "a package lock that tools read on their own"},
	{Pattern: "yarn.lock", Family: "Yarn", Risk: "a package lock that tools read on their own"},
	{Pattern: "pnpm-lock.yaml", Family: "pnpm", Risk: "a package lock that tools read on their own"},
	{Pattern: "pnpm-workspace.yaml", Family: "pnpm", Risk: "a package manifest that tools read on their own"},
	{Pattern: ".yarnrc", Family: "Yarn", Risk: "package manager configuration that tools read on their own"},
	{Pattern: ".yarnrc.yml", Family: "Yarn", Risk: "package manager configuration that tools read on their own"},
	{Pattern: "bunfig.toml", Family: "Bun", Risk: "package manager configuration that tools read on their own"},
	{Pattern: "pyproject.toml", Family: "Python", Risk: "build configuration that tools read on their own"},
	{Pattern: "setup.py", Family: "Python", Risk: "a build script that tools run on their own"},
	{Pattern: "setup.cfg", Family: "Python", Risk: "build configuration that tools read on their own"},
	{Pattern: "conftest.py", Family: "pytest", Risk: "test hooks that tools run on their own"},
	{Pattern: "tox.ini", Family: "Python", Risk: "build configuration that tools read on their own"},
	{Pattern: "noxfile.py", Family: "Python", Risk: "a build script that tools run on their own"},
	{Pattern: "requirements.txt", Family: "Python", Risk: "a dependency list that tools read on their own"},
	{Pattern: "go.mod", Family: "Go", Risk: "a module manifest that tools read on their own"},
	{Pattern: "go.sum", Family: "Go", Risk: "module checksums that tools read on their own"},
	{Pattern: "go.work", Family: "Go", Risk: "a module manifest that tools read on their own"},
	{Pattern: "Cargo.toml", Family: "Cargo", Risk: "a build manifest that tools read on their own"},
	{Pattern: "build.rs", Family: "Cargo", Risk: "a build script that tools run on their own"},
	{Pattern: "build.gradle", Family: "Gradle", Risk: "a build script that tools run on their own"},
	{Pattern: "build.gradle.kts", Family: "Gradle", Risk: "a build script that tools run on their own"},
	{Pattern: "settings.gradle", Family: "Gradle", Risk: "a build script that tools run on their own"},
	{Pattern: "pom.xml", Family: "Maven", Risk: "a build manifest that tools read on their own"},
	{Pattern: "Gemfile", Family: "Bundler", Risk: "a dependency list that tools read on their own"},
	{Pattern: "Rakefile", Family: "Rake", Risk: "a build script that tools run on their own"},
	{Pattern: "Makefile", Family: "make", Risk: "a build script that tools run on their own"},
	{Pattern: "GNUmakefile", Family: "make", Risk: "a build script that tools run on their own"},
	{Pattern: "justfile", Family: "just", Risk: "a build script that tools run on their own"},
	{Pattern: "Taskfile.yml", Family: "Task", Risk: "a build script that tools run on their own"},
	{Pattern: "CMakeLists.txt", Family: "CMake", Risk: "a build script that tools run on their own"},
	{Pattern: "meson.build", Family: "Meson", Risk: "a build script that tools run on their own"},
	{Pattern: "BUILD.bazel", Family: "Bazel", Risk: "a build script that tools run on their own"},
	{Pattern: "MODULE.bazel", Family: "Bazel", Risk: "a build script that tools run on their own"},
	// Containers, CI, environment, editors, deploys.
	{Pattern: "Dockerfile", Family: "containers", Risk: "a container build that tools run on their own"},
	{Pattern: "Containerfile", Family: "containers", Risk: "a container build that tools run on their own"},
	{Pattern: "docker-compose.yml", Family: "containers", Risk: "container configuration that tools read on their own"},
	{Pattern: "docker-compose.yaml", Family: "containers", Risk: "container configuration that tools read on their own"},
	{Pattern: "compose.yml", Family: "containers", Risk: "container configuration that tools read on their own"},
	{Pattern: "compose.yaml", Family: "containers", Risk: "container configuration that tools read on their own"},
	{Pattern: "devcontainer.json", Family: "Dev Containers", Risk: workspace},
	{Pattern: "Jenkinsfile", Family: "Jenkins", Risk: "a CI definition that tools run on their own"},
	{Pattern: ".gitlab-ci.yml", Family: "GitLab", Risk: "a CI definition that tools run on their own"},
	{Pattern: ".travis.yml", Family: "Travis CI", Risk: "a CI definition that tools run on their own"},
	{Pattern: "azure-pipelines.yml", Family: "Azure Pipelines", Risk: "a CI definition that tools run on their own"},
	{Pattern: "bitbucket-pipelines.yml", Family: "Bitbucket", Risk: "a CI definition that tools run on their own"},
	{Pattern: ".pre-commit-config.yaml", Family: "pre-commit", Risk: "git hooks that tools run on their own"},
	{Pattern: ".tool-versions", Family: "asdf", Risk: "tool versions that tools read on their own"},
	{Pattern: "mise.toml", Family: "mise", Risk: "tool configuration that tools read on their own"},
	{Pattern: ".mise.toml", Family: "mise", Risk: "tool configuration that tools read on their own"},
	{Pattern: "CODEOWNERS", Family: "GitHub", Risk: "review rules that tools read on their own"},
	{Pattern: ".editorconfig", Family: "EditorConfig", Risk: "editor configuration that tools read on their own"},
	{Pattern: ".gitconfig", Family: "git", Risk: "git configuration that tools read on their own"},
	{Pattern: ".lfsconfig", Family: "git", Risk: "git configuration that tools read on their own"},
	{Pattern: "netlify.toml", Family: "Netlify", Risk: "deploy configuration that tools read on their own"},
	{Pattern: "vercel.json", Family: "Vercel", Risk: "deploy configuration that tools read on their own"},
}
