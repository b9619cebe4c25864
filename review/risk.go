package review

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/mounts/changeset"
)

// Level is a risk class. The zero value is invalid; Low < Medium < High.
type Level int

// The risk classes.
const (
	Low Level = iota + 1
	Medium
	High
)

func (l Level) String() string {
	switch l {
	case Low:
		return "low"
	case Medium:
		return "medium"
	case High:
		return "high"
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// MarshalText writes the level's name.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads "low", "medium" or "high".
func (l *Level) UnmarshalText(b []byte) error {
	v, err := ParseLevel(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// ParseLevel reads "low", "medium" or "high" (any letter case).
func ParseLevel(s string) (Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "low":
		return Low, nil
	case "medium":
		return Medium, nil
	case "high":
		return High, nil
	}
	return 0, fmt.Errorf("unknown risk class %q (low, medium, high)", s)
}

// Risk is a change's class and every reason that raised it.
type Risk struct {
	Level   Level    `json:"level"`
	Reasons []string `json:"reasons"`
}

// riskBuilder collects reasons with their levels.
type riskBuilder struct {
	reasons []reason
}

type reason struct {
	level Level
	text  string
}

func (b *riskBuilder) add(l Level, format string, args ...any) {
	b.reasons = append(b.reasons, reason{l, fmt.Sprintf(format, args...)})
}

func (b *riskBuilder) level() Level {
	var l Level
	for _, r := range b.reasons {
		l = max(l, r.level)
	}
	return l
}

// risk returns the level and the reasons, highest first, stable within a
// level, without duplicates.
func (b *riskBuilder) risk() Risk {
	rs := slices.Clone(b.reasons)
	slices.SortStableFunc(rs, func(x, y reason) int { return int(y.level) - int(x.level) })
	out := Risk{Level: b.level(), Reasons: make([]string, 0, len(rs))}
	for _, r := range rs {
		if !slices.Contains(out.Reasons, r.text) {
			out.Reasons = append(out.Reasons, r.text)
		}
	}
	return out
}

// docExtensions are the file types a documentation agent is expected to
// write; anything else is at least Medium.
var docExtensions = map[string]bool{
	".md": true, ".markdown": true, ".mdx": true, ".txt": true, ".rst": true,
	".adoc": true, ".asciidoc": true, ".org": true, ".textile": true,
}

// steeringDirs are directory names (any component, any letter case) whose
// files tools and agents load on their own: agent and editor configuration,
// CI definitions, hooks.
var steeringDirs = map[string]string{
	".github":       "CI and repository configuration",
	".gitlab":       "CI configuration",
	".circleci":     "CI configuration",
	".buildkite":    "CI configuration",
	".husky":        "git hooks",
	".githooks":     "git hooks",
	".vscode":       "editor configuration",
	".idea":         "editor configuration",
	".zed":          "editor configuration",
	".devcontainer": "container configuration",
	".claude":       "agent configuration",
	".cursor":       "agent configuration",
	".opencode":     "agent configuration",
	".continue":     "agent configuration",
	".windsurf":     "agent configuration",
	".gemini":       "agent configuration",
	".codex":        "agent configuration",
	".roo":          "agent configuration",
	".kiro":         "agent configuration",
	".amazonq":      "agent configuration",
	".aider":        "agent configuration",
	".cline":        "agent configuration",
	".junie":        "agent configuration",
	"node_modules":  "a package manager tree",
}

// steeringFiles are file names (last component, any letter case) that
// tools and agents read or run on their own.
var steeringFiles = map[string]string{
	// agents
	"agents.md": "agent instructions", "agent.md": "agent instructions",
	"claude.md": "agent instructions", "claude.local.md": "agent instructions", "agents.override.md": "agent instructions",
	"gemini.md": "agent instructions", "copilot-instructions.md": "agent instructions",
	"opencode.json": "agent configuration", "opencode.jsonc": "agent configuration",
	".mcp.json": "agent configuration", "mcp.json": "agent configuration",
	".cursorrules": "agent instructions", ".windsurfrules": "agent instructions",
	".clinerules": "agent instructions", ".roomodes": "agent configuration",
	".aider.conf.yml": "agent configuration",
	// package managers and builds
	"package.json": "package manifest (install scripts)", "package-lock.json": "package lock",
	"npm-shrinkwrap.json": "package lock", "yarn.lock": "package lock",
	"pnpm-lock.yaml": "package lock", "pnpm-workspace.yaml": "package manifest",
	".npmrc": "package manager configuration", ".yarnrc": "package manager configuration",
	".yarnrc.yml": "package manager configuration", "bunfig.toml": "package manager configuration",
	"pyproject.toml": "build configuration", "setup.py": "build script",
	"setup.cfg": "build configuration", "conftest.py": "test hooks", "tox.ini": "build configuration",
	"noxfile.py": "build script", "requirements.txt": "dependency list",
	"go.mod": "module manifest", "go.sum": "module checksums", "go.work": "module manifest",
	"cargo.toml": "build manifest", "build.rs": "build script", "build.gradle": "build script",
	"build.gradle.kts": "build script", "settings.gradle": "build script", "pom.xml": "build manifest",
	"gemfile": "dependency list", "rakefile": "build script", "makefile": "build script",
	"gnumakefile": "build script", "justfile": "build script", "taskfile.yml": "build script",
	"cmakelists.txt": "build script", "meson.build": "build script", "build.bazel": "build script",
	"module.bazel": "build script",
	// containers, CI, environment
	"dockerfile": "container build", "containerfile": "container build",
	"docker-compose.yml": "container configuration", "docker-compose.yaml": "container configuration",
	"compose.yml": "container configuration", "compose.yaml": "container configuration",
	"jenkinsfile": "CI definition", ".gitlab-ci.yml": "CI definition", ".travis.yml": "CI definition",
	"azure-pipelines.yml": "CI definition", "bitbucket-pipelines.yml": "CI definition",
	".pre-commit-config.yaml": "git hooks", ".envrc": "shell environment (direnv)",
	".env": "environment file", ".tool-versions": "tool versions", "mise.toml": "tool configuration",
	".mise.toml": "tool configuration", "devcontainer.json": "container configuration",
	"codeowners": "review rules", ".editorconfig": "editor configuration",
	".gitattributes": "git attributes (filters run programs)", ".gitmodules": "git submodules",
	".gitconfig": "git configuration", ".lfsconfig": "git configuration",
	"netlify.toml": "deploy configuration", "vercel.json": "deploy configuration",
}

// scriptExtensions are files that some tool may execute or import.
var scriptExtensions = map[string]bool{
	".sh": true, ".bash": true, ".zsh": true, ".fish": true, ".ps1": true, ".bat": true, ".cmd": true,
	".py": true, ".js": true, ".mjs": true, ".cjs": true, ".ts": true, ".mts": true, ".tsx": true,
	".jsx": true, ".rb": true, ".pl": true, ".php": true, ".lua": true, ".go": true,
	".exe": true, ".so": true, ".dll": true, ".jar": true, ".wasm": true,
}

// largeChange is the after size above which a change is at least Medium.
const largeChange = 256 << 10

// Classify computes the risk of ch in scope from its path, its kind and its
// bytes (Before, After); it never reads a class or flag from metadata. The
// kind is only as true as the repository says: Apply checks it against the
// repository (a create must find nothing, a modify or delete the exact
// before bytes) before a classified change is written.
//
// Rules, the highest one winning:
//   - High: a deletion (a rename is a deletion plus a creation); any path
//     component that tools or agents load on their own (agent
//     instructions and configuration such as AGENTS.md, .mcp.json,
//     .claude/; package manifests such as package.json; build scripts,
//     CI definitions such as .github/workflows/; environment files); any
//     dotfile or dot-directory, ignore files included; content with
//     bidirectional or invisible format characters (Trojan Source) or
//     terminal control characters; in page mode, any path but the page.
//   - Medium: a new file outside page mode; a file type other than text
//     documentation (.md, .txt, .rst, …), scripts and extension-less files
//     included; a file larger than 256 KiB.
//   - Low: editing an existing documentation file, or writing the
//     assigned page in page mode.
//
// Reasons lists every rule that matched, in the order above, and is never
// empty.
func Classify(ch changeset.Change, scope allowlist.Scope) Risk {
	var r riskBuilder
	p := ch.Path
	inPage := scope.Page != "" && p == scope.Page
	if scope.Page != "" && !inPage {
		r.add(High, "outside the assigned page %s", scope.Page)
	}
	switch ch.Kind {
	case changeset.Delete:
		r.add(High, "deletes a file")
	case changeset.Create, changeset.Modify:
	default:
		r.add(High, "unknown change kind %q", ch.Kind)
	}
	parts := strings.Split(p, "/")
	for i, c := range parts {
		lc := strings.ToLower(strings.TrimRight(c, ". "))
		last := i == len(parts)-1
		if why, ok := steeringDirs[lc]; ok && !last {
			r.add(High, "%s/ holds %s that tools load on their own", strings.Join(parts[:i+1], "/"), why)
			continue
		}
		if why, ok := steeringFiles[lc]; ok && last {
			r.add(High, "%s is %s that tools read on their own", c, why)
			continue
		}
		if strings.HasPrefix(c, ".") {
			switch {
			case last && strings.HasSuffix(lc, "ignore"):
				r.add(High, "%s is an ignore file: it changes what tools see", c)
			case last:
				r.add(High, "%s is a dotfile: tools read dotfiles as configuration", c)
			default:
				r.add(High, "%s/ is a dot-directory: tools read them as configuration", strings.Join(parts[:i+1], "/"))
			}
		}
	}
	if lp := strings.ToLower(p); strings.Contains(lp, "/workflows/") || strings.HasPrefix(lp, "workflows/") {
		r.add(High, "a workflows/ directory holds CI definitions")
	}
	if why := suspiciousText(ch.After); why != "" {
		r.add(High, "new content %s", why)
	}

	if ch.Kind == changeset.Create && !inPage {
		r.add(Medium, "creates a new file")
	}
	ext := strings.ToLower(path.Ext(p))
	switch {
	case scriptExtensions[ext]:
		r.add(Medium, "%s files are code that tools may run or import", ext)
	case ext == "" && ch.Kind != changeset.Delete:
		r.add(Medium, "no file extension: not recognisably documentation")
	case !docExtensions[ext] && ch.Kind != changeset.Delete:
		r.add(Medium, "%s is not a documentation file type", ext)
	}
	if len(ch.After) > largeChange {
		r.add(Medium, "large file (%d bytes)", len(ch.After))
	}

	if r.level() == 0 {
		if inPage {
			r.add(Low, "writes the assigned page")
		} else {
			r.add(Low, "edits an existing documentation file")
		}
	}
	return r.risk()
}

// suspiciousText describes characters in b that make text look other than
// it is, or "": bidirectional controls and invisible format characters
// (Trojan Source, hidden prompt text), and terminal control characters
// other than tab, newline, carriage return and form feed (escape sequences
// that rewrite what a reviewer's terminal shows).
func suspiciousText(b []byte) string {
	s := string(b)
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n' || r == '\r' || r == '\f':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			return fmt.Sprintf("holds control character %U (terminal escape sequences)", r)
		case unicode.Is(unicode.Cf, r) && r != 0xad && r != 0x200d:
			// Soft hyphens and zero-width joiners (emoji sequences) are
			// common in prose; every other format character hides text
			// or reorders it.
			return fmt.Sprintf("holds invisible or bidirectional format character %U", r)
		case r == 0x2028 || r == 0x2029:
			return fmt.Sprintf("holds line separator %U", r)
		}
	}
	return ""
}
