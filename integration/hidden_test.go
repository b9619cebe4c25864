package integration

// The view's hidden set end to end (issue 9 items 2-7): hard links of
// hidden files, symlinks that leave the repository, directories that look
// alike, the steering files of today's agents, and the built-in secrets
// and .gitignore lists, each through the policy, the file tools and the
// kernel.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

const hlSecret = "SECRET-HARDLINK-7f3a"

// TestHardLinkOfHiddenFileIsHidden is item 2: `ln secrets/key.pem
// notes.txt` before the session starts makes notes.txt a second name for
// hidden bytes; it is absent from ls, grep -r, find and the file tools,
// and a direct reference is refused naming the rule. Links between
// visible files stay visible.
func TestHardLinkOfHiddenFileIsHidden(t *testing.T) {
	repo := newRepo(t, map[string]string{
		".openwikiignore":   "secrets/\n",
		"secrets/key.pem":   hlSecret,
		"README.md":         "# readme\n",
		"docs/a.md":         "a\n",
		"openwiki/index.md": "# index\n",
	})
	require.NoError(t, os.Link(filepath.Join(repo, "secrets/key.pem"), filepath.Join(repo, "notes.txt")))
	require.NoError(t, os.Link(filepath.Join(repo, "docs/a.md"), filepath.Join(repo, "docs/a-copy.md")))
	s := newSession(t, repo)
	ctx := context.Background()
	const rule = "hard link of hidden secrets/key.pem"

	_, err := s.Exec(ctx, []string{"cat", "notes.txt"}, nil, nil)
	requireRefused(t, err, rule)
	_, err = s.Read(ctx, "notes.txt", sandbox.ReadOptions{})
	requireRefused(t, err, rule)

	for _, argv := range [][]string{{"ls", "-a"}, {"find", "."}, {"grep", "-r", "SECRET", "."}} {
		r := run(t, s, argv...)
		requireNoLeak(t, r, hlSecret, "notes.txt")
	}
	r := run(t, s, "cat", "docs/a-copy.md")
	require.Equal(t, "a\n", out(r), "a link between visible files stays visible")

	l, err := s.List(ctx, ".")
	require.NoError(t, err)
	require.NotContains(t, paths(l.Entries), "notes.txt")
	g, err := s.Glob(ctx, "*.txt", 0)
	require.NoError(t, err)
	require.Empty(t, g.Matches)
	m, err := s.Search(ctx, "SECRET", ".", sandbox.SearchOptions{})
	require.NoError(t, err)
	require.Empty(t, m.Matches)

	// The kernel: absent in the box.
	res := inBox(t, s, "cat", "notes.txt")
	require.NotEqual(t, 0, res.ExitCode)
	requireNoLeak(t, res, hlSecret)
	require.Contains(t, string(res.Stderr), "No such file")
}

// TestHardLinkMadeLaterStopsTheSession: a hard link to a hidden file
// made while the session lives is found by the repository watch (or the
// rescan of a reopened session), and the session refuses to run on.
func TestHardLinkMadeLaterStopsTheSession(t *testing.T) {
	repo := newRepo(t, map[string]string{
		".openwikiignore":   "secrets/\n",
		"secrets/key.pem":   hlSecret,
		"src/main.go":       "package main\n",
		"openwiki/index.md": "# index\n",
	})
	s := newSession(t, repo)
	require.Equal(t, 0, run(t, s, "ls", "src").ExitCode)
	require.NoError(t, os.Link(filepath.Join(repo, "secrets/key.pem"), filepath.Join(repo, "src/late.txt")))
	_, err := s.Exec(context.Background(), []string{"grep", "-r", "SECRET", "."}, nil, nil)
	require.Error(t, err)
	require.True(t, errdefs.IsFailedPrecondition(err), "%v", err)
	require.Contains(t, err.Error(), "src/late.txt appeared after it started (hard link of hidden secrets/key.pem)")
	require.NotContains(t, err.Error(), hlSecret)
}

// TestSymlinksLeavingTheRepositoryAreHidden is item 3's hidden part:
// links whose target leaves the repository are absent from the view, so
// tools that follow links found in directories (ls -RL, diff -r, find -L)
// never reach the container's own root or /proc; links that stay inside
// keep working.
func TestSymlinksLeavingTheRepositoryAreHidden(t *testing.T) {
	repo := newRepo(t, map[string]string{
		"README.md":         "# readme\n",
		"d/x":               "-> /",
		"d/e/y":             "-> ../../..",
		"d/z":               "-> /proc/self",
		"d/in":              "-> ../README.md",
		"d/sub/f.txt":       "f\n",
		"openwiki/index.md": "# index\n",
	})
	s := newSession(t, repo)
	ctx := context.Background()

	for _, p := range []string{"d/x", "d/e/y", "d/z", "d/x/etc/passwd", "d/z/environ"} {
		_, err := s.Exec(ctx, []string{"cat", p}, nil, nil)
		requireRefused(t, err, "symlink leaves the repository")
	}
	require.Equal(t, "# readme\n", out(run(t, s, "cat", "d/in")), "a link inside the repository still reads")
	r, err := s.Read(ctx, "d/in", sandbox.ReadOptions{})
	require.NoError(t, err)
	require.Equal(t, "# readme\n", r.Content)

	l, err := s.List(ctx, "d")
	require.NoError(t, err)
	require.Equal(t, []string{"d/e", "d/in", "d/sub"}, paths(l.Entries))

	// The kernel: whatever follows links in the box finds nothing of
	// them (run without the policy, which refuses these forms anyway).
	for _, argv := range [][]string{
		{"ls", "-RL", "d"},
		{"find", "-L", "d"},
		{"diff", "-r", "d", "d/sub"},
		{"ls", "-la", "d", "d/e"},
	} {
		res := inBox(t, s, argv...)
		for _, leak := range []string{"passwd", "environ", "mountinfo", "bin", "proc", "x ->", "y ->", "z ->"} {
			require.NotContains(t, string(res.Stdout), leak, "%q", argv)
		}
	}
	res := inBox(t, s, "ls", "d/x", "d/e/y", "d/z")
	require.NotEqual(t, 0, res.ExitCode)
	require.Empty(t, out(res))
}

// TestDirectoriesLookAlike is item 4: inside the container every
// directory reports st_nlink 1 and the same size, blocks and device, so
// `find -links 1` lists every directory and stat tells no directory with
// hidden entries from one without.
func TestDirectoriesLookAlike(t *testing.T) {
	repo := newRepo(t, map[string]string{
		".openwikiignore":   "secret.txt\n",
		"a/secret.txt":      "S",
		"a/visible.txt":     "",
		"a/sub/x.txt":       "",
		"b/visible.txt":     "",
		"b/sub/c/y.txt":     "",
		"c/.env":            "TOKEN=1",
		"d/.git/config":     "",
		"e/f/g/h/i.txt":     "",
		"openwiki/index.md": "# index\n",
	})
	s := newSession(t, repo)
	all := lines(out(run(t, s, "find", ".", "-type", "d")))
	ones := lines(out(run(t, s, "find", ".", "-type", "d", "-links", "1")))
	sort.Strings(all)
	sort.Strings(ones)
	require.Greater(t, len(all), 10)
	require.Equal(t, all, ones, "every directory reports one link")
	st := out(run(t, s, "stat", "-c", "%h %s %b %d", "a", "b", "c", "d", "e", "e/f", "a/sub", "b/sub/c", "."))
	ls := lines(st)
	require.Len(t, ls, 9)
	for _, l := range ls {
		require.Equal(t, ls[0], l, "stat (nlink size blocks dev) of every directory:\n%s", st)
	}
}

// steeringFiles holds one representative of every agent-config family of
// the name table, at the depth and in the spelling given.
func steeringFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	families := map[string]bool{}
	for _, e := range names.Entries() {
		if e.Hide != names.AgentConfig {
			continue
		}
		p := strings.ReplaceAll(e.Pattern, "*", "x")
		if strings.HasSuffix(p, "/") {
			p += "f.md"
		}
		// Every other family one level down.
		if len(families)%2 == 1 {
			p = "sub/" + p
		}
		families[e.Family] = true
		files[p] = "STEER-" + e.Family
	}
	require.Greater(t, len(families), 25)
	return files
}

// visibleTree returns what `find .` lists of tree (files and their
// directories) when the name table's lists hide their entries, sorted.
func visibleTree(tree map[string]string, lists ...names.List) []string {
	seen := map[string]bool{".": true}
	for p := range tree {
		comps := strings.Split(p, "/")
		for i := range comps {
			q := strings.Join(comps[:i+1], "/")
			if _, hidden := names.Hidden(q, i < len(comps)-1, lists...); hidden {
				break
			}
			seen[q] = true
		}
	}
	out := []string{}
	for p := range seen {
		if p != "." {
			p = "./" + p
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// TestSteeringFilesOfEveryFamilyHidden is item 6: with the default
// profile a representative of every agent-config family is absent from
// the view (ls -R, find, grep -r, the file tools) and refused by name;
// with `expose: [agent-config]` they are all visible.
func TestSteeringFilesOfEveryFamilyHidden(t *testing.T) {
	files := steeringFiles(t)
	tree := map[string]string{"README.md": "# readme\n", "openwiki/index.md": "# index\n"}
	for p, c := range files {
		tree[p] = c
	}
	repo := newRepo(t, tree)
	ctx := context.Background()

	s := newSession(t, repo)
	for _, argv := range [][]string{{"ls", "-aR"}, {"grep", "-r", "STEER", "."}} {
		r := run(t, s, argv...)
		require.NotContains(t, out(r), "STEER", "%q", argv)
	}
	// find lists exactly what the name table leaves visible.
	found := lines(out(run(t, s, "find", ".")))
	sort.Strings(found)
	require.Equal(t, visibleTree(tree, names.AgentConfig), found)
	var ps []string
	for p := range files {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	for _, p := range ps {
		_, err := s.Exec(ctx, []string{"cat", p}, nil, nil)
		requireRefused(t, err, "profile hides agent config")
		_, err = s.Read(ctx, p, sandbox.ReadOptions{})
		requireRefused(t, err, "profile hides agent config")
	}
	m, err := s.Search(ctx, "STEER", ".", sandbox.SearchOptions{})
	require.NoError(t, err)
	require.Empty(t, m.Matches)
	res := inBox(t, s, append([]string{"cat"}, ps...)...)
	require.NotContains(t, out(res), "STEER", "the kernel: absent in the box")

	// Exposed: every one of them reads back.
	prof, err := profiles.Parse([]byte(fmt.Sprintf("name: docs-agents\ncommands: [%s]\nexpose: [agent-config]\n",
		strings.Join(docsProfile(t).Commands, ", "))))
	require.NoError(t, err)
	s2 := newSession(t, repo, withProfile(prof))
	r := run(t, s2, append([]string{"cat"}, ps...)...)
	require.Equal(t, 0, r.ExitCode, string(r.Stderr))
	var want strings.Builder
	for _, p := range ps {
		want.WriteString(files[p])
	}
	require.Equal(t, want.String(), out(r))
}

// TestSecretsAndGitignoreHiddenByDefault is item 7: with no
// .openwikiignore, env files, private keys, registry credentials and
// gitignored build outputs are absent from the view; a profile that
// exposes the lists sees them.
func TestSecretsAndGitignoreHiddenByDefault(t *testing.T) {
	secrets := map[string]string{
		".env":                      "SECRET-ENV",
		".ssh/id_rsa":               "SECRET-SSH",
		".npmrc":                    "SECRET-NPM",
		"deploy/prod.tfvars":        "SECRET-TFVARS",
		"build/app.bin":             "SECRET-BUILD",
		"web/dist/bundle.js":        "SECRET-DIST",
		"src/generated.pb.go":       "SECRET-GEN",
		"config/.env.local":         "SECRET-ENVLOCAL",
		"certs/server.key":          "SECRET-KEY",
		".kube/config":              "SECRET-KUBE",
		".aws/credentials":          "SECRET-AWS",
		".docker/config.json":       "SECRET-DOCKER",
		"keys/service-account.json": "SECRET-GCP",
	}
	tree := map[string]string{
		".gitignore":        "build/\n*.pb.go\n",
		"web/.gitignore":    "dist/\n",
		".env.example":      "TOKEN=\n",
		"src/main.go":       "package main\n",
		"README.md":         "# readme\n",
		"openwiki/index.md": "# index\n",
	}
	for p, c := range secrets {
		tree[p] = c
	}
	repo := newRepo(t, tree)
	s := newSession(t, repo)
	ctx := context.Background()
	var leaks []string
	for _, c := range secrets {
		leaks = append(leaks, c)
	}
	for _, argv := range [][]string{{"ls", "-aR"}, {"grep", "-r", "SECRET", "."}} {
		requireNoLeak(t, run(t, s, argv...), leaks...)
	}
	found := lines(out(run(t, s, "find", ".")))
	sort.Strings(found)
	require.Equal(t, []string{".", "./.docker", "./.env.example", "./.gitignore", "./README.md", "./certs", "./config", "./deploy",
		"./keys", "./openwiki", "./openwiki/index.md", "./src", "./src/main.go", "./web", "./web/.gitignore"}, found)
	require.Equal(t, "TOKEN=\n", out(run(t, s, "cat", ".env.example")), "templates stay visible")
	for p := range secrets {
		_, err := s.Read(ctx, p, sandbox.ReadOptions{})
		require.Error(t, err, p)
	}
	_, err := s.Exec(ctx, []string{"cat", ".env"}, nil, nil)
	requireRefused(t, err, "built-in secrets list: .env")
	_, err = s.Exec(ctx, []string{"cat", "build/app.bin"}, nil, nil)
	requireRefused(t, err, ".gitignore:1 hides build/")
	_, err = s.Exec(ctx, []string{"cat", "web/dist/bundle.js"}, nil, nil)
	requireRefused(t, err, "web/.gitignore:1 hides web/dist/")

	// Exposing both lists shows them again.
	prof, err := profiles.Parse([]byte(fmt.Sprintf("name: docs-open\ncommands: [%s]\nexpose: [secrets, gitignore]\n",
		strings.Join(docsProfile(t).Commands, ", "))))
	require.NoError(t, err)
	s2 := newSession(t, repo, withProfile(prof))
	var ps []string
	for p := range secrets {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	r := run(t, s2, append([]string{"cat"}, ps...)...)
	require.Equal(t, 0, r.ExitCode, string(r.Stderr))
	for _, c := range leaks {
		require.Contains(t, out(r), c)
	}
}
