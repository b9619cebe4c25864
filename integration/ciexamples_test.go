//go:build ciexamples

package integration

// The CI examples of docs/ci.md, run step by step so that they cannot rot:
// docs/examples/github-actions.yml as a GitHub-hosted runner would run it
// (here, on this machine, as root, against this machine's containerd), and
// docs/examples/gitlab-ci.yml as a GitLab runner's Docker executor would run
// it (in corral's image, in a privileged job, with the containerd the
// image's entry point starts). `make test-ci-examples` runs them after
// building the image; they need root, containerd, and for GitLab Docker
// (DOCKER_HOST) with the image named by CORRAL_CI_IMAGE.
//
// Only what the examples use is emulated, and anything else in the files
// fails the test rather than being skipped: a step the emulation does not
// know would be a step nobody ran.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/config"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// stepTimeout bounds one step (a GitHub step, or a whole GitLab script).
const stepTimeout = 15 * time.Minute

// requireNoCorralSetting fails when a variable a CI file sets carries the
// name of one of corral's settings (config.EnvNames) for another purpose:
// corral inside the job would read it (a project variable CORRAL_IMAGE
// naming the job's image once made corral look for that image as its
// tools image). meant lists the settings the file sets on purpose.
func requireNoCorralSetting(t *testing.T, where string, vars map[string]string, meant ...string) {
	t.Helper()
	for _, name := range config.EnvNames() {
		if _, ok := vars[name]; ok && !slices.Contains(meant, name) {
			t.Fatalf("%s sets %s, which corral reads as a setting (docs/operating.md); name the variable otherwise", where, name)
		}
	}
}

// strictDecode decodes YAML into v, refusing fields v does not have.
func strictDecode(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(v))
}

// moduleDir is the repository root (tests run in integration/).
func moduleDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	require.NoError(t, err)
	return dir
}

// gitCheckout copies src into dst as a one-commit git repository, as a CI
// checkout leaves it.
func gitCheckout(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o755))
	out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput()
	require.NoError(t, err, string(out))
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "-A"},
		{"-c", "user.name=ci", "-c", "user.email=ci@example.com", "commit", "-q", "-m", "checkout"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dst
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
}

// copySource copies corral's own tree (tracked and untracked files that
// git does not ignore, as they are on disk) into dst: what a checkout of
// this commit plus the work in progress would hold.
func copySource(t *testing.T, dst string) {
	t.Helper()
	root := moduleDir(t)
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err)
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		fi, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		require.NoError(t, err)
		d := filepath.Join(dst, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(d), 0o755))
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			require.NoError(t, err)
			require.NoError(t, os.Symlink(target, d))
			continue
		}
		data, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(d, data, fi.Mode().Perm()))
	}
}

// checkPatch requires a non-empty patch that applies to the demo repository.
func checkPatch(t *testing.T, patch string) {
	t.Helper()
	data, err := os.ReadFile(patch)
	require.NoError(t, err, "artifact %s", patch)
	require.NotEmpty(t, data, "artifact %s is empty", patch)
	require.Contains(t, string(data), "diff --git a/openwiki/", "artifact %s", patch)
	gitApplyCheck(t, demoRepo(t), data)
}

// untracked lists what `git status` shows in a checkout: the files a job
// left in the repository.
func untracked(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.Command("git", "status", "--porcelain", "--untracked-files=all")
	cmd.Dir = dir
	out, err := cmd.Output()
	require.NoError(t, err)
	files := lines(string(out))
	sort.Strings(files)
	return files
}

// runLogged runs cmd, logs its combined output and duration, and returns
// its error.
func runLogged(t *testing.T, what string, cmd *exec.Cmd) error {
	t.Helper()
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	start := time.Now()
	err := cmd.Run()
	t.Logf("--- %s (%.1f s, %v)\n%s", what, time.Since(start).Seconds(), err, buf.String())
	return err
}

// GitHub Actions

type ghWorkflow struct {
	Name string            `yaml:"name"`
	On   yaml.Node         `yaml:"on"`
	Jobs map[string]ghJob  `yaml:"jobs"`
	Env  map[string]string `yaml:"env"`
}

type ghJob struct {
	RunsOn   string            `yaml:"runs-on"`
	Env      map[string]string `yaml:"env"`
	Defaults struct {
		Run struct {
			Shell string `yaml:"shell"`
		} `yaml:"run"`
	} `yaml:"defaults"`
	Steps []ghStep `yaml:"steps"`
}

type ghStep struct {
	Name string            `yaml:"name"`
	Uses string            `yaml:"uses"`
	With map[string]string `yaml:"with"`
	Run  string            `yaml:"run"`
	If   string            `yaml:"if"`
	Env  map[string]string `yaml:"env"`
}

// sudoShim is sudo for a runner that is already root, with sudo's
// environment rules (env_reset, secure_path as on GitHub's Ubuntu images):
// without -E only a few variables pass; PATH is secure_path either way.
const sudoShim = `#!/bin/sh
keep=0
while [ $# -gt 0 ]; do
	case "$1" in
	-E | --preserve-env) keep=1; shift ;;
	-n | -H) shift ;;
	--) shift; break ;;
	-*) echo "sudo (test shim): unsupported option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
secure=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
if [ "$keep" = 1 ]; then
	exec env PATH="$secure" "$@"
fi
exec env -i PATH="$secure" HOME=/root TERM="${TERM:-dumb}" LANG="${LANG:-C.UTF-8}" "$@"
`

// readGitHubEnv parses a $GITHUB_ENV file: NAME=value lines and
// NAME<<DELIMITER blocks.
func readGitHubEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	env := map[string]string{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return env
	}
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if name, delim, ok := strings.Cut(l, "<<"); ok && !strings.Contains(name, "=") {
			var val []string
			for sc.Scan() && sc.Text() != delim {
				val = append(val, sc.Text())
			}
			env[name] = strings.Join(val, "\n")
			continue
		}
		name, val, ok := strings.Cut(l, "=")
		require.True(t, ok, "GITHUB_ENV line %q", l)
		env[name] = val
	}
	require.NoError(t, sc.Err())
	return env
}

func TestCIExampleGitHubActions(t *testing.T) {
	testutil.RequireContainerd(t)
	data, err := os.ReadFile("../docs/examples/github-actions.yml")
	require.NoError(t, err)
	var wf ghWorkflow
	strictDecode(t, data, &wf)
	require.Len(t, wf.Jobs, 1, "one job")
	require.Empty(t, wf.Env, "workflow-level env: not emulated")
	require.NotContains(t, string(data), "${{", "expressions are not emulated")

	for name, job := range wf.Jobs {
		t.Run(name, func(t *testing.T) { runGitHubJob(t, job) })
	}
}

func runGitHubJob(t *testing.T, job ghJob) {
	require.True(t, strings.HasPrefix(job.RunsOn, "ubuntu-"), "runs-on %q: a Linux runner", job.RunsOn)
	require.Equal(t, "bash", job.Defaults.Run.Shell, "the steps are written for bash (-eo pipefail)")

	// The runner's layout: the workspace, its temp directory beside it.
	home := t.TempDir()
	ws := filepath.Join(home, "work", "repo", "repo")
	temp := filepath.Join(home, "work", "_temp")
	bin := filepath.Join(home, "bin")
	for _, d := range []string{ws, temp, bin} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(bin, "sudo"), []byte(sudoShim), 0o755))
	githubEnv := filepath.Join(temp, "github_env")
	githubPath := filepath.Join(temp, "github_path")

	// The runner's environment. One substitution: the runner's containerd
	// answers at the default socket, this machine's at $CONTAINERD_ADDRESS.
	base := map[string]string{
		"CI": "true", "GITHUB_ACTIONS": "true", "RUNNER_OS": "Linux", "RUNNER_ARCH": "X64",
		"GITHUB_WORKSPACE": ws, "RUNNER_TEMP": temp, "HOME": home,
		"GITHUB_ENV": githubEnv, "GITHUB_PATH": githubPath,
		"GITHUB_OUTPUT": filepath.Join(temp, "github_output"), "GITHUB_STEP_SUMMARY": filepath.Join(temp, "summary"),
		"GITHUB_REPOSITORY": "example/repo", "GITHUB_SHA": strings.Repeat("0", 40),
		"PATH": bin + ":" + os.Getenv("PATH"),
		"LANG": "C.UTF-8",
	}
	// This machine's Go caches (a runner's HOME would start empty): the
	// build reuses them instead of downloading every module again.
	goenv, err := exec.Command("go", "env", "GOPATH", "GOMODCACHE", "GOCACHE", "GOPROXY", "GOFLAGS").Output()
	require.NoError(t, err)
	for i, v := range lines(string(goenv)) {
		if v != "" {
			base[[]string{"GOPATH", "GOMODCACHE", "GOCACHE", "GOPROXY", "GOFLAGS"}[i]] = v
		}
	}
	if v, ok := os.LookupEnv("TMPDIR"); ok {
		base["TMPDIR"] = v
	}
	override := map[string]string{"CONTAINERD_ADDRESS": testutil.Address()}

	var artifacts []string
	failed := false
	for i, st := range job.Steps {
		what := st.Name
		if what == "" {
			what = st.Uses
		}
		what = fmt.Sprintf("step %d: %s", i+1, what)
		switch st.If {
		case "", "success()":
			if failed {
				t.Logf("--- %s: skipped after a failure", what)
				continue
			}
		case "always()":
		case "failure()":
			if !failed {
				continue
			}
		default:
			t.Fatalf("%s: if: %q is not emulated", what, st.If)
		}
		require.True(t, (st.Uses == "") != (st.Run == ""), "%s: exactly one of uses and run", what)

		if st.Uses != "" {
			require.Empty(t, st.Env, "%s: env on a uses step is not emulated", what)
			if err := githubAction(t, st, ws, &artifacts); err != nil {
				t.Errorf("%s: %v", what, err)
				failed = true
			}
			continue
		}

		// The job points corral at the runner's containerd on purpose.
		for _, m := range []map[string]string{job.Env, st.Env, readGitHubEnv(t, githubEnv)} {
			requireNoCorralSetting(t, what, m, "CONTAINERD_ADDRESS")
		}
		env := map[string]string{}
		for _, m := range []map[string]string{base, job.Env, st.Env, readGitHubEnv(t, githubEnv), override} {
			for k, v := range m {
				env[k] = v
			}
		}
		if extra, err := os.ReadFile(githubPath); err == nil {
			for _, p := range lines(string(extra)) {
				env["PATH"] = p + ":" + env["PATH"]
			}
		}
		script := filepath.Join(temp, fmt.Sprintf("step-%d.sh", i+1))
		require.NoError(t, os.WriteFile(script, []byte(st.Run), 0o644))
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		// GitHub's `shell: bash` is `bash --noprofile --norc -eo pipefail
		// {0}`; -u on top catches a misspelt variable in the docs.
		cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-euo", "pipefail", script)
		cmd.Dir = ws
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if err := runLogged(t, what, cmd); err != nil {
			t.Errorf("%s: %v", what, err)
			failed = true
		}
		cancel()
	}
	require.False(t, failed, "the workflow failed")

	// The artifacts: patches that apply to the repository; the
	// repository's checkout itself untouched.
	require.NotEmpty(t, artifacts)
	for _, a := range artifacts {
		checkPatch(t, a)
	}
	require.Empty(t, untracked(t, filepath.Join(ws, "repo")), "the job changed the repository's checkout")
}

// githubAction emulates the actions the example uses.
func githubAction(t *testing.T, st ghStep, ws string, artifacts *[]string) error {
	t.Helper()
	name, _, _ := strings.Cut(st.Uses, "@")
	switch name {
	case "actions/checkout":
		for k := range st.With {
			if !slices.Contains([]string{"path", "repository", "ref"}, k) {
				return fmt.Errorf("with.%s is not emulated", k)
			}
		}
		dst := filepath.Join(ws, st.With["path"])
		switch st.With["repository"] {
		case "": // the repository the workflow belongs to: the demo
			gitCheckout(t, demoRepo(t), dst)
		case "corral-sandbox/corral":
			copySource(t, dst)
		default:
			return fmt.Errorf("repository %q is not emulated", st.With["repository"])
		}
		return nil
	case "actions/setup-go":
		want := st.With["go-version"]
		out, err := exec.Command("go", "env", "GOVERSION").Output()
		if err != nil {
			return err
		}
		if have := strings.TrimSpace(string(out)); have != "go"+want {
			return fmt.Errorf("go-version %s, this machine has %s", want, have)
		}
		return nil
	case "actions/upload-artifact":
		if st.With["if-no-files-found"] != "error" {
			return fmt.Errorf("upload-artifact without if-no-files-found: error would hide a missing patch")
		}
		for _, p := range lines(st.With["path"]) {
			p = filepath.Join(ws, strings.TrimSpace(p))
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			if fi.Size() == 0 {
				return fmt.Errorf("%s is empty", p)
			}
			*artifacts = append(*artifacts, p)
		}
		return nil
	}
	return fmt.Errorf("action %s is not emulated", st.Uses)
}

// GitLab CI

// glReserved are .gitlab-ci.yml's top-level keywords that are not jobs.
var glReserved = []string{"stages", "variables", "default", "include", "workflow", "image", "services",
	"before_script", "after_script", "cache"}

type glJob struct {
	Image        yaml.Node         `yaml:"image"`
	Tags         []string          `yaml:"tags"`
	Variables    map[string]string `yaml:"variables"`
	Stage        string            `yaml:"stage"`
	BeforeScript []string          `yaml:"before_script"`
	Script       []string          `yaml:"script"`
	Artifacts    struct {
		Paths    []string `yaml:"paths"`
		ExpireIn string   `yaml:"expire_in"`
		Name     string   `yaml:"name"`
	} `yaml:"artifacts"`
}

func TestCIExampleGitLab(t *testing.T) {
	testutil.RequireRoot(t)
	image := os.Getenv("CORRAL_CI_IMAGE")
	if image == "" || os.Getenv("DOCKER_HOST") == "" {
		testutil.Missing(t, "CORRAL_CI_IMAGE and DOCKER_HOST name corral's image and the Docker that has it (`make test-ci-examples`)")
	}
	if out, err := exec.Command("docker", "image", "inspect", image).CombinedOutput(); err != nil {
		testutil.Missing(t, fmt.Sprintf("docker has no image %s: %v: %s", image, err, out))
	}
	data, err := os.ReadFile("../docs/examples/gitlab-ci.yml")
	require.NoError(t, err)
	var top map[string]yaml.Node
	require.NoError(t, yaml.Unmarshal(data, &top))
	jobs := 0
	for name, node := range top {
		if strings.HasPrefix(name, ".") {
			continue
		}
		require.NotContains(t, glReserved, name, "top-level %s: not emulated", name)
		raw, err := yaml.Marshal(&node)
		require.NoError(t, err)
		var job glJob
		strictDecode(t, raw, &job)
		jobs++
		t.Run(name, func(t *testing.T) { runGitLabJob(t, name, job, image) })
	}
	require.Equal(t, 1, jobs)
}

func runGitLabJob(t *testing.T, name string, job glJob, image string) {
	require.Empty(t, job.BeforeScript, "before_script: not emulated")
	require.NotEmpty(t, job.Script)
	require.Contains(t, job.Tags, "privileged", "the job needs a runner that allows privileged jobs")

	// Variables: the predefined ones, the job's, then the project's CI/CD
	// variables (which win over the file's): the image to use.
	const projectDir = "/builds/example/repo"
	vars := map[string]string{
		"CI": "true", "GITLAB_CI": "true", "CI_JOB_NAME": name, "CI_PROJECT_DIR": projectDir,
		"CI_BUILDS_DIR": "/builds", "CI_PROJECT_NAME": "repo", "CI_COMMIT_SHA": strings.Repeat("0", 40),
	}
	for k, v := range job.Variables {
		vars[k] = v
	}

	var ref string
	var entrypoint []string
	switch job.Image.Kind {
	case yaml.ScalarNode:
		ref = job.Image.Value
	case yaml.MappingNode:
		var img struct {
			Name       string   `yaml:"name"`
			Entrypoint []string `yaml:"entrypoint"`
		}
		require.NoError(t, job.Image.Decode(&img))
		ref, entrypoint = img.Name, img.Entrypoint
	default:
		t.Fatal("image: a name or {name, entrypoint}")
	}
	// The image is a project variable the file names ($NAME), set to the
	// image this CI built, as a project's CI/CD variable would be.
	require.True(t, strings.HasPrefix(ref, "$") && !strings.ContainsAny(ref[1:], "${}/:"),
		"image: %q: one project variable naming the image", ref)
	vars[ref[1:]] = image
	requireNoCorralSetting(t, "the job's variables", vars)
	ref = os.Expand(ref, func(k string) string { return vars[k] })
	require.Equal(t, image, ref)

	// The project's checkout, bound where the runner clones it.
	proj := filepath.Join(t.TempDir(), "repo")
	gitCheckout(t, demoRepo(t), proj)

	flags, err := exec.Command("../hack/corral-image.sh", "flags").Output()
	require.NoError(t, err)
	// The Docker executor runs the build container from the job's image
	// with its entry point (with-containerd) and a shell as the command.
	// This Docker has no bridge (hack/docker-containerd.sh), so the job
	// gets no network; corral needs none.
	args := []string{"run", "--rm", "--network", "none", "-v", proj + ":" + projectDir, "-w", projectDir}
	args = append(args, lines(string(flags))...)
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-e", k+"="+vars[k])
	}
	if entrypoint != nil {
		args = append(args, "--entrypoint", strings.Join(entrypoint, " "))
	}
	args = append(args, ref, "bash", "-euo", "pipefail", "-c", strings.Join(job.Script, "\n"))
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	require.NoError(t, runLogged(t, "script", exec.CommandContext(ctx, "docker", args...)))

	// The artifacts are patches in the checkout that apply to the
	// repository, and the only files the job added there.
	var want []string
	for _, p := range job.Artifacts.Paths {
		checkPatch(t, filepath.Join(proj, p))
		want = append(want, "?? "+p)
	}
	sort.Strings(want)
	require.Equal(t, want, untracked(t, proj), "the job changed the checkout beyond its artifacts")
}
