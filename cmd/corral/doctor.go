package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/config"
	"github.com/corral-sandbox/corral/internal/landlock"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// Check outcomes. A warning does not fail doctor.
const (
	statusOK   = "ok"
	statusWarn = "warn"
	statusFail = "fail"
)

// checkResult is one line of `corral doctor`.
type checkResult struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	// Fix is one line saying what to do; "" when nothing is needed.
	Fix string `json:"fix,omitempty"`
}

// doctorOutput is `corral doctor --json`.
type doctorOutput struct {
	Checks   []checkResult `json:"checks"`
	OK       bool          `json:"ok"`
	ExitCode int           `json:"exit_code"`
}

// host is what doctor reads of the machine; tests replace each part.
type host struct {
	readFile func(string) ([]byte, error)
	stat     func(string) (fs.FileInfo, error)
	statfs   func(string, *unix.Statfs_t) error
	lookPath func(string) (string, error)
	output   func(ctx context.Context, name string, args ...string) ([]byte, error)
	geteuid  func() int
	openat2  func() error
	// landlock answers the kernel's Landlock ABI version.
	landlock func() (int, error)
	findInit func() string
	// containerd answers containerd's version at address and whether
	// image is in namespace ns.
	containerd func(ctx context.Context, address, ns, image string) (version string, hasImage bool, err error)
	// daemon answers GET /v1/version on the daemon's socket.
	daemon func(ctx context.Context, socket string) ([]byte, error)
}

func realHost() host {
	return host{
		readFile: os.ReadFile,
		stat:     os.Stat,
		statfs:   unix.Statfs,
		lookPath: exec.LookPath,
		output: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return exec.CommandContext(ctx, name, args...).CombinedOutput()
		},
		geteuid: os.Geteuid,
		openat2: func() error {
			fd, err := unix.Openat2(unix.AT_FDCWD, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
			if err == nil {
				unix.Close(fd)
			}
			return err
		},
		landlock:   landlock.ABI,
		findInit:   sandbox.FindInit,
		containerd: probeContainerd,
		daemon:     probeDaemon,
	}
}

func probeContainerd(ctx context.Context, address, ns, image string) (string, bool, error) {
	if _, err := os.Stat(address); err != nil {
		return "", false, err
	}
	c, err := containerd.New(address, containerd.WithDefaultNamespace(ns), containerd.WithTimeout(5*time.Second))
	if err != nil {
		return "", false, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(ctx, ns), 5*time.Second)
	defer cancel()
	v, err := c.Version(ctx)
	if err != nil {
		return "", false, err
	}
	_, err = c.GetImage(ctx, image)
	if err != nil && !errdefs.IsNotFound(err) {
		return v.Version, false, err
	}
	return v.Version, err == nil, nil
}

func probeDaemon(ctx context.Context, socket string) ([]byte, error) {
	cl := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://corral/v1/version", nil)
	if err != nil {
		return nil, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET /v1/version: %s", resp.Status)
	}
	return body, err
}

func newDoctorCommand(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [--json]",
		Short: "Check this machine for what corral needs, each failure with its fix",
		Long: `Checks the configuration, root, the kernel (overlayfs, cgroups, seccomp,
openat2), containerd at the resolved address and namespace, each runtime
(runc, crun, runsc: present, version, and for runc the container-escape fixes
its version carries), the tools image, corral-init, the state directory
(0700, not inside a repository, a filesystem overlayfs can write to, free
space and inodes) and the daemon's socket. Exit 0 when every check passes,
1 when any fails; warnings do not fail.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := runDoctor(cmd.Context(), realHost(), g)
			out := doctorOutput{Checks: checks, OK: true}
			for _, c := range checks {
				if c.Status == statusFail {
					out.OK, out.ExitCode = false, 1
				}
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), out); err != nil {
					return err
				}
			} else {
				w := cmd.OutOrStdout()
				for _, c := range checks {
					fmt.Fprintf(w, "%-4s  %-14s %s\n", c.Status, c.Name, c.Detail)
					if c.Fix != "" {
						fmt.Fprintf(w, "      %-14s fix: %s\n", "", c.Fix)
					}
				}
			}
			if !out.OK {
				return &exitError{code: 1, printed: true}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object: {checks: [{name, status, detail, fix}], ok, exit_code}")
	return cmd
}

// runDoctor runs every check in order.
func runDoctor(ctx context.Context, h host, g *globalFlags) []checkResult {
	cfg := g.cfg
	var out []checkResult
	out = append(out, checkConfig(g))
	out = append(out, checkRoot(h))
	out = append(out, checkOverlay(h), checkCgroups(h), checkSeccomp(h), checkOpenat2(h), checkLandlock(h))
	out = append(out, checkResult{Name: "userns", Status: statusOK, Detail: "not needed: corral's containers run as uid 65534 without a user namespace"})
	out = append(out, checkContainerd(ctx, h, cfg)...)
	for _, rt := range sandbox.Runtimes() {
		out = append(out, checkRuntime(ctx, h, rt.Name, cfg))
	}
	out = append(out, checkInit(h))
	out = append(out, checkStateDir(h, cfg.StateDir)...)
	out = append(out, checkDaemon(ctx, h, cfg.DaemonSocket))
	return out
}

func checkConfig(g *globalFlags) checkResult {
	if g.configErr != nil {
		return checkResult{Name: "config", Status: statusFail, Detail: errorLine(g.configErr), Fix: "correct the setting named (flags > CORRAL_* variables > config file)"}
	}
	file := g.cfg.File
	if file == "" {
		file = "none (" + config.DefaultPath + " absent)"
	}
	return checkResult{Name: "config", Status: statusOK, Detail: fmt.Sprintf("file %s; namespace %s (%s), state %s (%s)", file,
		g.cfg.Namespace, g.cfg.Sources[config.KeyNamespace], g.cfg.StateDir, g.cfg.Sources[config.KeyStateDir])}
}

func checkRoot(h host) checkResult {
	if h.geteuid() == 0 {
		return checkResult{Name: "root", Status: statusOK, Detail: "running as root"}
	}
	return checkResult{Name: "root", Status: statusFail, Detail: fmt.Sprintf("running as uid %d; containerd's socket and the session mounts are root's", h.geteuid()),
		Fix: "run corral as root (sudo)"}
}

func checkOverlay(h host) checkResult {
	data, err := h.readFile("/proc/filesystems")
	if err != nil {
		return checkResult{Name: "overlayfs", Status: statusFail, Detail: "cannot read /proc/filesystems: " + err.Error(), Fix: "mount /proc"}
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[len(f)-1] == "overlay" {
			return checkResult{Name: "overlayfs", Status: statusOK, Detail: "overlay in /proc/filesystems"}
		}
	}
	return checkResult{Name: "overlayfs", Status: statusFail, Detail: "overlay is not in /proc/filesystems; the repository view and write area are overlay mounts",
		Fix: "modprobe overlay (and add overlay to /etc/modules)"}
}

// cgroupV2Fix is how a host boots with cgroup v2 alone, with and without
// systemd as its init (kernel parameters: systemd.unified_cgroup_hierarchy,
// cgroup_no_v1 in the kernel's admin-guide/kernel-parameters).
const cgroupV2Fix = "for cgroup v2, boot with systemd.unified_cgroup_hierarchy=1 (systemd as init) or cgroup_no_v1=all (every controller on cgroup v2; see docs/runtimes.md)"

func checkCgroups(h host) checkResult {
	const name = "cgroups"
	if _, err := h.stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return checkResult{Name: name, Status: statusOK, Detail: "cgroup v2 (unified)"}
	}
	if _, err := h.stat("/sys/fs/cgroup/unified/cgroup.controllers"); err == nil {
		return checkResult{Name: name, Status: statusWarn, Detail: "hybrid: cgroup v1 controllers with a v2 hierarchy at /sys/fs/cgroup/unified; runc 1.4 deprecates v1",
			Fix: cgroupV2Fix}
	}
	if _, err := h.stat("/sys/fs/cgroup/memory"); err == nil {
		return checkResult{Name: name, Status: statusWarn, Detail: "cgroup v1; runc 1.4 deprecates it", Fix: cgroupV2Fix}
	}
	return checkResult{Name: name, Status: statusFail, Detail: "no cgroup hierarchy under /sys/fs/cgroup; memory, pids and CPU limits need one", Fix: "mount cgroup2 on /sys/fs/cgroup"}
}

func checkSeccomp(h host) checkResult {
	data, err := h.readFile("/proc/self/status")
	if err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "Seccomp:") {
				return checkResult{Name: "seccomp", Status: statusOK, Detail: "kernel supports seccomp (Seccomp field in /proc/self/status)"}
			}
		}
	}
	return checkResult{Name: "seccomp", Status: statusFail, Detail: "no Seccomp field in /proc/self/status: the kernel lacks CONFIG_SECCOMP; corral refuses to run tools unfiltered",
		Fix: "use a kernel built with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER"}
}

func checkOpenat2(h host) checkResult {
	err := h.openat2()
	switch {
	case err == nil:
		return checkResult{Name: "openat2", Status: statusOK, Detail: "openat2 with RESOLVE_BENEATH works"}
	case errors.Is(err, unix.ENOSYS):
		return checkResult{Name: "openat2", Status: statusFail, Detail: "openat2 is not implemented (kernel before 5.6); corral resolves every repository path with it",
			Fix: "use Linux 5.6 or later"}
	}
	return checkResult{Name: "openat2", Status: statusFail, Detail: "openat2 failed: " + err.Error() + " (a seccomp filter around corral itself?)",
		Fix: "run corral where openat2 is allowed (not inside a container whose seccomp profile blocks it)"}
}

// checkLandlock reports whether corral-init can confine each tool's reads
// with Landlock (no /proc or /sys but the tool's own harmless files). The
// containers of runc and crun share this kernel; runsc's (gVisor) do not
// have Landlock, and their /proc is gVisor's own, naming no host path.
func checkLandlock(h host) checkResult {
	const name = "landlock"
	abi, err := h.landlock()
	switch {
	case err == nil:
		return checkResult{Name: name, Status: statusOK, Detail: fmt.Sprintf("Landlock ABI %d: corral-init confines each tool's reads (no /proc mount tables)", abi)}
	case errors.Is(err, landlock.ErrUnavailable):
		return checkResult{Name: name, Status: statusWarn,
			Detail: "no Landlock (" + err.Error() + "): under runc and crun a tool can read its own /proc mount tables, which name host paths (the state directory, the repository)",
			Fix:    "use a kernel with CONFIG_SECURITY_LANDLOCK and landlock in its lsm= list, or the runsc runtime"}
	}
	return checkResult{Name: name, Status: statusWarn, Detail: "Landlock probe failed: " + err.Error(), Fix: "run corral where landlock_create_ruleset is allowed"}
}

func checkContainerd(ctx context.Context, h host, cfg config.Config) []checkResult {
	v, hasImage, err := h.containerd(ctx, cfg.Address, cfg.Namespace, cfg.Image)
	if err != nil {
		return []checkResult{{Name: "containerd", Status: statusFail, Detail: fmt.Sprintf("no containerd answers at %s: %v", cfg.Address, err),
			Fix: "start containerd (`make setup` in corral's source tree starts a private one) and pass its socket with --address, CORRAL_ADDRESS or config address"}}
	}
	out := []checkResult{{Name: "containerd", Status: statusOK, Detail: fmt.Sprintf("containerd %s at %s, namespace %s", v, cfg.Address, cfg.Namespace)}}
	img := checkResult{Name: "image", Status: statusOK, Detail: cfg.Image + " is in namespace " + cfg.Namespace}
	switch {
	case hasImage:
	case cfg.Image == sandbox.DefaultImageRef:
		img.Status, img.Detail, img.Fix = statusWarn, cfg.Image+" is not built yet; the first call builds it (seconds)", "corral image build"
	default:
		img.Status, img.Detail, img.Fix = statusWarn, cfg.Image+" is not in namespace "+cfg.Namespace+"; the first call pulls it", "ctr -n "+cfg.Namespace+" images pull "+cfg.Image
	}
	return append(out, img)
}

// runtimeVersion matches the version line of runc, crun and runsc.
var runtimeVersion = regexp.MustCompile(`(?m)^(?:runc|crun|runsc) version (\S+)`)

func checkRuntime(ctx context.Context, h host, rt string, cfg config.Config) checkResult {
	name := "runtime " + rt
	// The runtime's name (sandbox.Runtimes), or a shim type that names it
	// (io.containerd.runsc.v1); the runc v2 shim's own binary is runc.
	selected := cfg.Runtime == rt || strings.Contains(cfg.Runtime, "."+rt+".") || rt == "runc" && cfg.Runtime == sandbox.RuncShim
	path, err := h.lookPath(rt)
	if err != nil {
		r := checkResult{Name: name, Status: statusWarn, Detail: rt + " is not on PATH (optional)", Fix: "apt-get install " + rt}
		if rt == "runsc" {
			r.Fix = "apt-get install runsc (gVisor)"
		}
		if selected {
			r.Status, r.Detail = statusFail, rt+" is not on PATH and the configured runtime "+cfg.Runtime+" needs it"
		}
		return r
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	outb, err := h.output(ctx, path, "--version")
	m := runtimeVersion.FindSubmatch(outb)
	if err != nil || m == nil {
		return checkResult{Name: name, Status: statusWarn, Detail: fmt.Sprintf("%s --version did not say its version (%v)", path, err)}
	}
	ver := string(m[1])
	if rt != "runc" {
		return checkResult{Name: name, Status: statusOK, Detail: fmt.Sprintf("%s %s at %s (runc's advisories do not apply to it: another code base)", rt, ver, path)}
	}
	return runcCVEs(path, ver, selected && cfg.Image != sandbox.DefaultImageRef)
}

// runcFix is one advisory's fixed versions: a version below Fixed[i]
// within the release line of Fixed[i] lacks the fix.
type runcFix struct {
	CVE   string
	Fixed []string // in ascending order; each covers the release line from the previous one
	What  string
}

// runcFixes are runc's container-escape fixes doctor looks for. Versions
// from the Go vulnerability database (GO-2024-3110, GO-2025-4096,
// GO-2025-4097, GO-2025-4098), which follows runc's advisories
// GHSA-jfvp-7x6p-h2pv, GHSA-9493-h29p-rfm2, GHSA-qw9x-cqr3-wc7r and
// GHSA-cgrx-mc8f-2prm.
var runcFixes = []runcFix{
	{CVE: "CVE-2024-45310", Fixed: []string{"1.1.14", "1.2.0-rc.3"},
		What: "a container sharing a volume with another can race os.MkdirAll into creating empty files or directories on the host"},
	{CVE: "CVE-2025-31133, CVE-2025-52565, CVE-2025-52881", Fixed: []string{"1.2.8", "1.3.3", "1.4.0-rc.3"},
		What: "a symlinked /dev/null (masked paths), /dev/pts/N (/dev/console) or procfs target makes runc mount or write the wrong file: full container escape"},
}

// runcLacks returns the advisories version ver of runc lacks the fixes of.
func runcLacks(ver string) []runcFix {
	v, ok := parseVersion(ver)
	if !ok {
		return nil
	}
	var out []runcFix
	for _, f := range runcFixes {
		lacks := false
		for i, fixed := range f.Fixed {
			fv, _ := parseVersion(fixed)
			// fixed covers its own release line (MAJOR.MINOR), the
			// first one also every older line and the last one every
			// newer line.
			if compareVersion(v, fv) < 0 && (i == 0 || v.minorAtLeast(fixed)) && (i == len(f.Fixed)-1 || !v.minorAtLeast(f.Fixed[i+1])) {
				lacks = true
			}
		}
		if lacks {
			out = append(out, f)
		}
	}
	return out
}

// runcCVEs is runc's check: a missing fix is a warning (corral's own
// containers do not meet the preconditions; see the detail), never a
// failure, since corral works; customImage adds the image's exposure.
func runcCVEs(path, ver string, customImage bool) checkResult {
	name := "runtime runc"
	lacks := runcLacks(ver)
	if len(lacks) == 0 {
		return checkResult{Name: name, Status: statusOK, Detail: fmt.Sprintf("runc %s at %s carries the fixes for CVE-2024-45310 and the November 2025 mount races", ver, path)}
	}
	var cves []string
	for _, f := range lacks {
		cves = append(cves, f.CVE)
	}
	detail := fmt.Sprintf("runc %s at %s lacks the fixes for %s (upstream version; a distribution may have backported them: check its security tracker). "+
		"corral's own containers do not meet these attacks' preconditions: corral writes the whole spec (the agent chooses no mount, masked path, sysctl or terminal), "+
		"/dev and /proc are fresh per container and no mount target lies in a path any container of the session can write. "+
		"An image from elsewhere (--image) is the exposure: it can carry a symlinked /dev/null, /dev/pts or /dev and escape while runc sets the container up, before any policy applies",
		ver, path, strings.Join(cves, "; "))
	if customImage {
		detail += "; the configured image is not corral's own: unless you built it, use a fixed runc or runsc"
	}
	return checkResult{Name: name, Status: statusWarn, Detail: detail,
		Fix: "install runc >= 1.2.8 (1.3.3, 1.4.0) from upstream, or run untrusted images under runsc (gVisor)"}
}

// semver is a runc-style version: MAJOR.MINOR.PATCH[-rc.N][+build].
type semver struct {
	nums [3]int
	rc   int // 0: a release; N: -rc.N (before the release)
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)(?:-rc\.?(\d+))?`)

func parseVersion(s string) (semver, bool) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return semver{}, false
	}
	var v semver
	for i := range 3 {
		v.nums[i], _ = strconv.Atoi(m[i+1])
	}
	if m[4] != "" {
		v.rc, _ = strconv.Atoi(m[4])
	}
	return v, true
}

func compareVersion(a, b semver) int {
	for i := range 3 {
		if a.nums[i] != b.nums[i] {
			return a.nums[i] - b.nums[i]
		}
	}
	switch {
	case a.rc == b.rc:
		return 0
	case a.rc == 0:
		return 1
	case b.rc == 0:
		return -1
	}
	return a.rc - b.rc
}

// minorAtLeast reports whether v's MAJOR.MINOR is at least that of s.
func (v semver) minorAtLeast(s string) bool {
	o, _ := parseVersion(s)
	if v.nums[0] != o.nums[0] {
		return v.nums[0] > o.nums[0]
	}
	return v.nums[1] >= o.nums[1]
}

func checkInit(h host) checkResult {
	if p := h.findInit(); p != "" {
		return checkResult{Name: "corral-init", Status: statusOK, Detail: p}
	}
	return checkResult{Name: "corral-init", Status: statusFail, Detail: "corral-init is not next to corral, in /usr/local/libexec/corral or /usr/libexec/corral, nor named by $CORRAL_INIT",
		Fix: "make build (CGO_ENABLED=0 go build -o build/corral-init ./cmd/corral-init), or install it beside corral"}
}

// State directory thresholds: below them a session may fail to start.
const (
	minFreeBytes  = 1 << 30
	minFreeInodes = 10000
)

func checkStateDir(h host, dir string) []checkResult {
	const name = "state dir"
	st, err := h.stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		parent := filepath.Dir(dir)
		for ; parent != "/"; parent = filepath.Dir(parent) {
			if _, err := h.stat(parent); err == nil {
				break
			}
		}
		r := []checkResult{{Name: name, Status: statusOK, Detail: dir + " does not exist yet; corral creates it (0700) on first use"}}
		return append(r, checkFilesystem(h, parent, dir)...)
	}
	if err != nil {
		return []checkResult{{Name: name, Status: statusFail, Detail: err.Error(), Fix: "choose another with --state-dir, CORRAL_STATE_DIR or config state_dir"}}
	}
	var out []checkResult
	switch {
	case !st.IsDir():
		return []checkResult{{Name: name, Status: statusFail, Detail: dir + " is not a directory", Fix: "remove it or choose another state directory (--state-dir)"}}
	case st.Mode().Perm() != 0o700:
		out = append(out, checkResult{Name: name, Status: statusFail, Detail: fmt.Sprintf("%s has mode %04o; sessions and mounts there must be root's alone", dir, st.Mode().Perm()),
			Fix: "chmod 700 " + dir})
	default:
		out = append(out, checkResult{Name: name, Status: statusOK, Detail: dir + " exists, mode 0700"})
	}
	if repo := enclosingRepo(h, dir); repo != "" {
		out = append(out, checkResult{Name: "state dir", Status: statusFail, Detail: dir + " is inside the repository " + repo + "; a session there would see its own mounts",
			Fix: "choose a state directory outside any repository (--state-dir, CORRAL_STATE_DIR, config state_dir)"})
	}
	return append(out, checkFilesystem(h, dir, dir)...)
}

// enclosingRepo returns the nearest directory at or above dir that holds a
// .git entry, or "".
func enclosingRepo(h host, dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := h.stat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if d == "/" || d == "." {
			return ""
		}
	}
}

// Filesystem magic numbers (statfs(2) f_type).
const (
	overlayfsMagic = 0x794c7630
	nfsMagic       = 0x6969
)

func checkFilesystem(h host, at, dir string) []checkResult {
	var s unix.Statfs_t
	if err := h.statfs(at, &s); err != nil {
		return []checkResult{{Name: "state fs", Status: statusFail, Detail: "statfs " + at + ": " + err.Error()}}
	}
	var out []checkResult
	switch s.Type {
	case overlayfsMagic:
		out = append(out, checkResult{Name: "state fs", Status: statusFail, Detail: dir + " lies on overlayfs, which cannot hold an overlay's upper and work directories",
			Fix: "put the state directory on ext4, xfs, btrfs or a tmpfs (e.g. mount -t tmpfs tmpfs " + dir + ")"})
	case nfsMagic:
		out = append(out, checkResult{Name: "state fs", Status: statusFail, Detail: dir + " lies on NFS, which overlayfs cannot use as its upper layer",
			Fix: "put the state directory on a local filesystem"})
	default:
		out = append(out, checkResult{Name: "state fs", Status: statusOK, Detail: fmt.Sprintf("filesystem type 0x%x can hold overlay upper directories", s.Type)})
	}
	free, inodes := uint64(s.Bavail)*uint64(s.Bsize), uint64(s.Ffree)
	r := checkResult{Name: "state space", Status: statusOK, Detail: fmt.Sprintf("%.1f GiB and %d inodes free", float64(free)/(1<<30), inodes)}
	if free < minFreeBytes || (s.Files > 0 && inodes < minFreeInodes) {
		r.Status, r.Fix = statusWarn, fmt.Sprintf("free space below 1 GiB or %d inodes: remove old sessions (corral session ls / rm) or grow the filesystem", minFreeInodes)
	}
	return append(out, r)
}

func checkDaemon(ctx context.Context, h host, socket string) checkResult {
	const name = "daemon"
	st, err := h.stat(socket)
	if err != nil {
		return checkResult{Name: name, Status: statusOK, Detail: "no daemon socket at " + socket + " (optional: the CLI works standalone)"}
	}
	if st.Mode().Type() != fs.ModeSocket {
		return checkResult{Name: name, Status: statusFail, Detail: socket + " is not a socket", Fix: "remove it, or point CORRAL_DAEMON_SOCKET / config daemon_socket elsewhere"}
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	body, err := h.daemon(ctx, socket)
	if err != nil {
		return checkResult{Name: name, Status: statusFail, Detail: fmt.Sprintf("the daemon at %s does not answer: %v", socket, err),
			Fix: "start it (corral daemon, or systemctl start corral) or remove the stale socket"}
	}
	return checkResult{Name: name, Status: statusOK, Detail: fmt.Sprintf("the daemon at %s answers %s", socket, strings.Join(strings.Fields(string(body)), " "))}
}
