// Package testutil holds the shared set-up of corral's integration tests:
// finding containerd (and failing, not skipping, when CI=true), a state
// directory, the test image, and declarative hostile trees.
package testutil

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/corral-sandbox/corral/internal/testhook"
	"github.com/corral-sandbox/corral/sandbox"
)

// Namespace is the containerd namespace integration tests use.
const Namespace = "corral-test"

// TestImageRef is the default tools image plus busybox and the probe. Its
// tag names the checkout, so test runs of two checkouts on one machine never
// rebuild each other's image under a running container.
var TestImageRef = "localhost/corral/test:" + checkoutTag

// checkoutTag is a short hash of the module root the test binary runs in
// (its working directory is its package's directory, below the root).
var checkoutTag = func() string {
	dir, err := os.Getwd()
	if err != nil {
		return "unknown"
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir = d
			break
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	sum := sha256.Sum256([]byte(dir))
	return hex.EncodeToString(sum[:4])
}()

// scratch is this checkout's directory for the binaries tests build.
func scratch(name string) string {
	return filepath.Join(os.TempDir(), "corral-it-"+checkoutTag, name)
}

// RequireRoot skips without root, or fails when CI=true.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, "root is required")
	}
}

// Missing skips the test for a missing prerequisite, or fails it when
// CI=true: integration tests may not skip in CI.
func Missing(t testing.TB, why string) {
	t.Helper()
	missing(t, why)
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s, and CI=true: integration tests may not skip", why)
	}
	t.Skip(why)
}

// Address returns the containerd address the tests use: $CONTAINERD_ADDRESS,
// else the default socket.
func Address() string { return sandbox.ResolveAddress("") }

// RequireContainerd skips when no containerd answers, or fails when CI=true.
func RequireContainerd(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	c, err := containerd.New(Address(), containerd.WithTimeout(3*time.Second))
	if err != nil {
		missing(t, "no containerd at "+Address()+": "+err.Error()+" (run `make setup`)")
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := c.Version(ctx); err != nil {
		missing(t, "containerd at "+Address()+" does not answer: "+err.Error())
	}
}

var (
	stateOnce sync.Once
	stateDir  string
)

// StateDir is one state directory for the whole test binary
// ($CORRAL_IT_STATE_DIR when set, so a child supervisor can share it).
func StateDir(t testing.TB) string {
	stateOnce.Do(func() {
		if d := os.Getenv("CORRAL_IT_STATE_DIR"); d != "" {
			stateDir = d
			return
		}
		d, err := os.MkdirTemp("", "corral-it-")
		if err != nil {
			t.Fatal(err)
		}
		stateDir = d
	})
	return stateDir
}

// StateDirIfMade returns the state directory if a test made it, else "".
func StateDirIfMade() string { return stateDir }

var (
	imageOnce sync.Once
	imageErr  error
)

// Executor connects to containerd for a test, with the test image built
// once per test binary. It is closed in t.Cleanup.
func Executor(t testing.TB) *sandbox.Executor {
	t.Helper()
	return ExecutorWith(t)
}

// ExecutorWith is Executor with the test configuration (namespace, state
// directory, test image) adjusted by opts, applied in order: e.g. another
// containerd runtime. It is closed in t.Cleanup.
func ExecutorWith(t testing.TB, opts ...func(*sandbox.Config)) *sandbox.Executor {
	t.Helper()
	RequireContainerd(t)
	ctx := context.Background()
	// The reap cgroup as the daemon and the MCP server use it.
	cfg := sandbox.Config{Namespace: Namespace, StateDir: StateDir(t), Image: TestImageRef, ReapCgroup: sandbox.DefaultReapCgroup}
	for _, o := range opts {
		o(&cfg)
	}
	e, err := sandbox.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	imageOnce.Do(func() { imageErr = buildTestImage(e) })
	if imageErr != nil {
		t.Fatalf("building the test image: %v", imageErr)
	}
	return e
}

// CorralPath is where BuildCorral builds corral for the tests.
func CorralPath() string { return scratch("corral") }

var (
	corralOnce sync.Once
	corralErr  error
)

// BuildCorral builds ./cmd/corral to CorralPath, once per test binary.
func BuildCorral() error {
	corralOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			corralErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", CorralPath(), "./cmd/corral")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			corralErr = &buildError{out: string(out), err: err}
		}
	})
	return corralErr
}

// ProbePath is where the probe binary is built on the host.
func ProbePath() string { return scratch("probe") }

func buildTestImage(e *sandbox.Executor) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	initPath := scratch("corral-init")
	wrapperPath := scratch("corral-runsc")
	for out, pkg := range map[string]string{ProbePath(): "./integration/probe", initPath: "./cmd/corral-init", wrapperPath: "./cmd/corral-runsc"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return &buildError{out: string(out), err: err}
		}
	}
	// The launcher's environment (trusted) names corral-init, which every
	// container gets bound from the host.
	if os.Getenv("CORRAL_INIT") == "" {
		os.Setenv("CORRAL_INIT", initPath)
	}
	// And corral-runsc, the shim's binary for --runtime runsc.
	if os.Getenv("CORRAL_RUNSC_WRAPPER") == "" {
		os.Setenv("CORRAL_RUNSC_WRAPPER", wrapperPath)
	}
	// corral itself (cgo, for libseccomp) is the binary the CLI and MCP
	// tests run; in the image it keeps `corral fs` (the file tools'
	// in-container half, as corral-init's fs mode runs it) testable on its
	// own.
	if err := BuildCorral(); err != nil {
		return err
	}
	spec := sandbox.DefaultImageSpec()
	spec.Ref = TestImageRef
	spec.Files["/usr/bin/corral"] = CorralPath()
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return err
	}
	spec.Files["/usr/bin/busybox"] = busybox
	spec.Files["/usr/bin/probe"] = ProbePath()
	_, err = sandbox.BuildImage(e.Context(context.Background()), e.Client(), spec)
	return err
}

type buildError struct {
	out string
	err error
}

func (b *buildError) Error() string { return "building probe: " + b.err.Error() + ": " + b.out }

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// Tree creates files in dir from a declarative description, in the spirit
// of securejoin's CreateTree: "path" → content; content "-> target" makes a
// symlink; a path ending in "/" makes a directory.
func Tree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Snapshot hashes every entry under dir (type, mode, content or link
// target), for "the repository is byte-identical afterwards" checks.
func Snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link:" + target
		case info.IsDir():
			out[rel] = "dir:" + info.Mode().String()
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = info.Mode().String() + ":" + string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ExecWithoutPolicy runs argv in s with no allowlist check (the test-only
// seam internal/testhook): for the hostile cases' in_box steps, which
// test what the kernel enforces where the policy has a hole.
func ExecWithoutPolicy(ctx context.Context, s *sandbox.Session, argv []string, stdout, stderr io.Writer) (*sandbox.Result, error) {
	r, err := testhook.ExecWithoutPolicy(ctx, s, argv, stdout, stderr)
	res, _ := r.(*sandbox.Result)
	return res, err
}

// BuildTestImageOn builds the test image (the default tools plus busybox
// and the probe) into the containerd of e: for a test that starts a
// containerd of its own.
func BuildTestImageOn(e *sandbox.Executor) error {
	if err := BuildCorral(); err != nil {
		return err
	}
	spec := sandbox.DefaultImageSpec()
	spec.Ref = TestImageRef
	spec.Files["/usr/bin/corral"] = CorralPath()
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return err
	}
	spec.Files["/usr/bin/busybox"] = busybox
	spec.Files["/usr/bin/probe"] = ProbePath()
	client, err := e.Connect(context.Background())
	if err != nil {
		return err
	}
	_, err = sandbox.BuildImage(e.Context(context.Background()), client, spec)
	return err
}
