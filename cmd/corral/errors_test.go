package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/stretchr/testify/require"
)

// TestErrorLines pins the exact line the CLI prints for the faults users
// met (issue 11 item 5): one line, the problem and the fix, no repeated
// errdefs category, no Go type name, the right YAML line.
func TestErrorLines(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	require.NoError(t, os.Mkdir(repo, 0o755))
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	unknown := write("unknown.yaml", "name: x\ncommands: [cat]\nbogus: 1\n")
	nested := write("nested.yaml", "name: x\ncommands: [cat]\nresources:\n  memry: 1g\n")
	syntax := write("syntax.yaml", "name: x\ncommands: [cat\nresources: {}\n")
	second := write("second.yaml", "name: x\ncommands: [cat]\n---\ncommands: [\n")
	memory := write("memory.yaml", "name: x\ncommands: [cat]\nresources:\n  memory: 12zz\n")
	kind := write("kind.yaml", "name: x\ncommands: cat\n")
	conf := write("config.yaml", "namespace: corral\nstate-dir: /var/lib/corral\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"category once", []string{"check", "--repo", repo, "--profile", memory, "--", "cat", "a"},
			`corral: profile {dir}/memory.yaml: resources.memory "12zz": want a size from 16MiB to 64GiB`},
		{"unknown profile key", []string{"check", "--repo", repo, "--profile", unknown, "--", "cat", "a"},
			`corral: {dir}/unknown.yaml:3: unknown key "bogus" (known: ` + profileKeys() + `)`},
		{"unknown nested key", []string{"check", "--repo", repo, "--profile", nested, "--", "cat", "a"},
			`corral: {dir}/nested.yaml:4: unknown key "resources.memry" (known: cpus, memory, output, pids, timeout, tmp, write_area, write_inodes)`},
		{"wrong kind, no Go type", []string{"check", "--repo", repo, "--profile", kind, "--", "cat", "a"},
			`corral: {dir}/kind.yaml:2: commands: want a list, got a string "cat"`},
		{"YAML line of an unclosed list", []string{"check", "--repo", repo, "--profile", syntax, "--", "cat", "a"},
			`corral: {dir}/syntax.yaml:2: YAML syntax: did not find expected ',' or ']'`},
		{"malformed second document", []string{"check", "--repo", repo, "--profile", second, "--", "cat", "a"},
			`corral: {dir}/second.yaml:5: YAML syntax: did not find expected node content`},
		{"repository does not exist", []string{"check", "--repo", filepath.Join(dir, "gone"), "--", "cat", "a"},
			`corral: repository {dir}/gone does not exist; pass the root directory of a repository with --repo`},
		{"repository is a file", []string{"check", "--repo", unknown, "--", "cat", "a"},
			`corral: repository {dir}/unknown.yaml is not a directory; pass the root directory of a repository with --repo`},
		{"repository is /", []string{"check", "--repo", "/", "--", "cat", "a"},
			`corral: the repository is /, the whole machine; name the directory of one repository`},
		{"one operand", []string{"check", "--repo", repo, "--", "grep"},
			`corral: refused (ARG): grep needs at least 1 operand`},
		{"two operands", []string{"check", "--repo", repo, "--", "diff", "a"},
			`corral: refused (ARG): diff needs at least 2 operands`},
		{"unknown config key", []string{"check", "--config", conf, "--repo", repo, "--", "cat", "a"},
			`corral: {dir}/config.yaml:2: unknown key "state-dir" (known: address, allow_foreign_namespace, daemon_socket, image, kept_patch_retention, kubelet_root, log_level, max_connections, max_kept_patch_bytes, max_memory, max_sessions, namespace, runtime, state_dir)`},
		{"Docker's namespace", []string{"gc", "--namespace", "moby"},
			`corral: namespace "moby" (flag --namespace): it is Docker's, and corral's containers would mix with that engine's, which manages them as its own; use corral's own (default "corral"), or pass --allow-foreign-namespace (config allow_foreign_namespace: true) if you mean it`},
		{"unknown profile", []string{"check", "--repo", repo, "--profile", "nope", "--", "cat", "a"},
			`corral: profile "nope": not found (built-ins: docs)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(context.Background(), tc.args, strings.NewReader(""), &stdout, &stderr)
			require.NotZero(t, code)
			require.Equal(t, strings.ReplaceAll(tc.want, "{dir}", dir)+"\n", stderr.String())
		})
	}
}

func TestErrorLineCategories(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("profile x: %w: resources.memory: %w: want a size", errdefs.ErrInvalidArgument, errdefs.ErrInvalidArgument), "profile x: resources.memory: want a size"},
		{fmt.Errorf("%w: no containerd answers", errdefs.ErrUnavailable), "no containerd answers"},
		{fmt.Errorf("getting image x: %w", errdefs.ErrNotFound), "getting image x: not found"},
		{fmt.Errorf("open x: %w", os.ErrPermission), "open x: permission denied"},
		{errdefs.ErrInvalidArgument, "invalid argument"},
		{fmt.Errorf("a\nb"), "a; b"},
	} {
		require.Equal(t, tc.want, errorLine(tc.err))
	}
}

// profileKeys lists the top-level keys of a profile file, as the unknown
// key error names them (sorted yaml tags of profiles.Profile).
func profileKeys() string {
	var keys []string
	t := reflect.TypeOf(profiles.Profile{})
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
