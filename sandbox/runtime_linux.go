package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"

	"github.com/containerd/containerd/api/types/runc/options"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/wrapper"
	"github.com/corral-sandbox/corral/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ociRuntime is an executor's runtime, resolved once in New: the table
// entry, the binary the shim runs and the shim's state root.
type ociRuntime struct {
	info RuntimeInfo
	// binary is the absolute path of the OCI runtime ("" for the shim's
	// default); for a wrapped runtime, the one the wrapper runs.
	binary string
	// root is the runc v2 shim's state root, StateDir/<name>: the shim
	// otherwise shares /run/containerd/runc with every containerd on the
	// host. "" for other shims.
	root string

	mu      sync.Mutex
	wrapper string // the installed wrapper (see wrapperPath)

	// bpf caches seccompBPF's programs, base64, by the SHA-256 of the
	// seccomp section's JSON.
	bpfMu sync.Mutex
	bpf   map[[sha256.Size]byte]string
}

// maxBPFCache bounds ociRuntime.bpf: a daemon's sessions usually share one
// or two profiles; past the bound the cache starts over.
const maxBPFCache = 16

// resolveRuntime resolves Config.Runtime and Config.RuntimeBinary: the
// name or shim type (LookupRuntime), and the binary (--runtime-binary, a
// path or a command name in PATH) for the shims that take one, which must
// exist. It fails with errdefs.ErrInvalidArgument for an unknown name or a
// binary the shim cannot take, errdefs.ErrNotFound for a missing binary.
func resolveRuntime(name, binary, stateDir string) (*ociRuntime, error) {
	info, err := LookupRuntime(name)
	if err != nil {
		return nil, err
	}
	r := &ociRuntime{info: info}
	if info.Shim != RuncShim {
		if binary != "" {
			return nil, fmt.Errorf("%w: runtime %s: the shim takes no binary; --runtime-binary works with %s (%s)",
				errdefs.ErrInvalidArgument, info.Name, RuncShim, RuntimeNames())
		}
		return r, nil
	}
	if binary == "" {
		binary = info.Binary
	}
	rootName := info.Name
	if info.Name == RuncShim {
		rootName = "runc"
	}
	if binary != "" {
		p, err := exec.LookPath(binary)
		if err != nil {
			return nil, fmt.Errorf("%w: runtime %s: binary %s not found (%v): install Debian's %s package (hack/setup.sh does) or name it with --runtime-binary",
				errdefs.ErrNotFound, info.Name, binary, err, packageOf(info))
		}
		if r.binary, err = filepath.Abs(p); err != nil {
			return nil, err
		}
		if info.Name == RuncShim {
			rootName = filepath.Base(r.binary)
		}
	}
	r.root = filepath.Join(stateDir, rootName)
	return r, nil
}

func packageOf(info RuntimeInfo) string {
	if info.Package != "" {
		return info.Package
	}
	return "runtime's"
}

// Runtime returns the executor's runtime: its table entry and the binary
// the shim runs ("" for the shim's default).
func (e *Executor) Runtime() (RuntimeInfo, string) { return e.oci.info, e.oci.binary }

// withRuntime sets the container's runtime: the shim and, for the runc v2
// shim, its options (state root, binary; the wrapper, installed on first
// use, for a runtime with flags).
func (e *Executor) withRuntime() containerd.NewContainerOpts {
	return func(ctx context.Context, client *containerd.Client, c *containers.Container) error {
		r := e.oci
		if r.info.Shim != RuncShim {
			return containerd.WithRuntime(r.info.Shim, nil)(ctx, client, c)
		}
		opts := &options.Options{Root: r.root, BinaryName: r.binary}
		if r.info.Wrapped() {
			p, err := r.wrapperPath(e.cfg.StateDir)
			if err != nil {
				return err
			}
			opts.BinaryName = p
		}
		return containerd.WithRuntime(r.info.Shim, opts)(ctx, client, c)
	}
}

// spec appends the runtime's own spec options to opts, to run after
// them: the ociVersion it implements (RuntimeInfo.SpecVersion), its
// PidsOverhead on the pids limit, its SeccompAllow and, for a runtime with
// SeccompBPF, the final seccomp section compiled into the annotation
// SeccompBPFAnnotation.
func (r *ociRuntime) spec(opts []oci.SpecOpts) []oci.SpecOpts {
	info := r.info
	return append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if info.SpecVersion != "" {
			s.Version = info.SpecVersion
		}
		if info.PidsOverhead != 0 && s.Linux != nil && s.Linux.Resources != nil && s.Linux.Resources.Pids != nil && s.Linux.Resources.Pids.Limit != nil {
			limit := *s.Linux.Resources.Pids.Limit + info.PidsOverhead
			s.Linux.Resources.Pids.Limit = &limit
		}
		if len(info.SeccompAllow) > 0 && s.Linux != nil && s.Linux.Seccomp != nil {
			allowSyscalls(s.Linux.Seccomp, info.SeccompAllow)
		}
		if info.SeccompBPF && s.Linux != nil && s.Linux.Seccomp != nil {
			data, err := r.seccompBPF(s.Linux.Seccomp)
			if err != nil {
				return err
			}
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[SeccompBPFAnnotation] = data
		}
		return nil
	})
}

// seccompBPF returns sc compiled by seccomp.BPF, base64 (the annotation's
// form), compiling each distinct section once.
func (r *ociRuntime) seccompBPF(sc *specs.LinuxSeccomp) (string, error) {
	section, err := json.Marshal(sc)
	if err != nil {
		return "", err
	}
	key := sha256.Sum256(section)
	r.bpfMu.Lock()
	defer r.bpfMu.Unlock()
	if data, ok := r.bpf[key]; ok {
		return data, nil
	}
	prog, err := seccomp.BPF(sc)
	if err != nil {
		return "", err
	}
	if r.bpf == nil || len(r.bpf) >= maxBPFCache {
		r.bpf = make(map[[sha256.Size]byte]string)
	}
	data := base64.StdEncoding.EncodeToString(prog)
	r.bpf[key] = data
	return data, nil
}

// allowSyscalls takes names out of every rule of sc and adds one rule
// allowing them unconditionally.
func allowSyscalls(sc *specs.LinuxSeccomp, names []string) {
	var rules []specs.LinuxSyscall
	for _, rule := range sc.Syscalls {
		rule.Names = slices.DeleteFunc(slices.Clone(rule.Names), func(n string) bool { return slices.Contains(names, n) })
		if len(rule.Names) > 0 {
			rules = append(rules, rule)
		}
	}
	sc.Syscalls = append(rules, specs.LinuxSyscall{Names: slices.Clone(names), Action: specs.ActAllow})
}

// FindWrapper returns the host path of corral-runsc: $CORRAL_RUNSC_WRAPPER,
// else corral-runsc next to the running executable, else the libexec
// directories. "" when none exists.
func FindWrapper() string {
	return findHelper(wrapper.Name, "CORRAL_RUNSC_WRAPPER")
}

// wrapperPath installs the wrapper once per executor and returns its path:
// StateDir/bin/corral-runsc-<sha256 of the wrapper and its configuration>/
// holds corral-runsc (0555) and corral-runsc.json, so two runtimes or two
// corral builds never share a copy, and a running shim's binary is never
// rewritten. The shim runs as root and execs it by path.
func (r *ociRuntime) wrapperPath(stateDir string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wrapper != "" {
		return r.wrapper, nil
	}
	src := FindWrapper()
	if src == "" {
		return "", fmt.Errorf("%w: runtime %s needs %s: not next to corral, in /usr/local/libexec/corral or /usr/libexec/corral, nor named by $CORRAL_RUNSC_WRAPPER; build it with `make build` (CGO_ENABLED=0 go build ./cmd/corral-runsc)",
			errdefs.ErrNotFound, r.info.Name, wrapper.Name)
	}
	prog, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", src, err)
	}
	conf, err := json.Marshal(wrapper.Config{Runtime: r.binary, Flags: r.info.Flags})
	if err != nil {
		return "", err
	}
	sum := sha256.New()
	sum.Write(prog)
	sum.Write([]byte{0})
	sum.Write(conf)
	dir := filepath.Join(stateDir, "bin", wrapper.Name+"-"+hex.EncodeToString(sum.Sum(nil)))
	p := filepath.Join(dir, wrapper.Name)
	if err := installWrapper(dir, prog, conf); err != nil {
		return "", fmt.Errorf("installing %s from %s: %w", wrapper.Name, src, err)
	}
	r.wrapper = p
	return p, nil
}

// installWrapper makes dir with the wrapper and its configuration unless
// it is there with this content; a partial or different dir is replaced
// (made aside, then renamed into place).
func installWrapper(dir string, prog, conf []byte) error {
	p := filepath.Join(dir, wrapper.Name)
	if sameContent(p, prog) && sameContent(filepath.Join(dir, wrapper.ConfigName), conf) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, wrapper.Name), prog, 0o555); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, wrapper.ConfigName), conf, 0o444); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	// Another process may have installed it meanwhile: then rename fails
	// (the target is not empty) and its copy is used.
	if err := os.Rename(tmp, dir); err != nil {
		if sameContent(p, prog) && sameContent(filepath.Join(dir, wrapper.ConfigName), conf) {
			return nil
		}
		_ = os.RemoveAll(dir)
		return os.Rename(tmp, dir)
	}
	return nil
}

func sameContent(p string, want []byte) bool {
	got, err := os.ReadFile(p)
	return err == nil && string(got) == string(want)
}

// findHelper returns the first regular file among $env, name next to the
// running executable and the libexec directories; "" when none exists.
func findHelper(name, env string) string {
	var candidates []string
	if p := os.Getenv(env); p != "" {
		candidates = append(candidates, p)
	}
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), name))
	}
	candidates = append(candidates, "/usr/local/libexec/corral/"+name, "/usr/libexec/corral/"+name)
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return c
		}
	}
	return ""
}
