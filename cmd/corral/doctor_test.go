package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/config"
	"github.com/corral-sandbox/corral/internal/landlock"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

type fakeInfo struct {
	mode fs.FileMode
}

func (f fakeInfo) Name() string       { return "x" }
func (f fakeInfo) Size() int64        { return 0 }
func (f fakeInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeInfo) ModTime() time.Time { return time.Time{} }
func (f fakeInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fakeInfo) Sys() any           { return nil }

// fakeHost is a machine where files holds the readable files, paths the
// existing paths with their modes, and fsType/free the state dir's
// filesystem.
func fakeHost(files map[string]string, paths map[string]fs.FileMode) host {
	return host{
		readFile: func(p string) ([]byte, error) {
			if d, ok := files[p]; ok {
				return []byte(d), nil
			}
			return nil, fs.ErrNotExist
		},
		stat: func(p string) (fs.FileInfo, error) {
			if m, ok := paths[p]; ok {
				return fakeInfo{m}, nil
			}
			return nil, fs.ErrNotExist
		},
		statfs: func(_ string, s *unix.Statfs_t) error {
			s.Type, s.Bsize, s.Bavail, s.Files, s.Ffree = 0xef53, 4096, 1<<20, 1<<20, 1<<19
			return nil
		},
		lookPath: func(n string) (string, error) { return "", errors.New("not found") },
		geteuid:  func() int { return 0 },
		openat2:  func() error { return nil },
		landlock: func() (int, error) { return 7, nil },
		findInit: func() string { return "/usr/libexec/corral/corral-init" },
	}
}

func TestDoctorKernelChecks(t *testing.T) {
	h := fakeHost(map[string]string{"/proc/filesystems": "nodev\tsysfs\nnodev\toverlay\n", "/proc/self/status": "Name:\tx\nSeccomp:\t0\n"},
		map[string]fs.FileMode{"/sys/fs/cgroup/cgroup.controllers": 0o444})
	require.Equal(t, statusOK, checkOverlay(h).Status)
	require.Equal(t, statusOK, checkSeccomp(h).Status)
	require.Equal(t, statusOK, checkCgroups(h).Status)
	require.Equal(t, statusOK, checkOpenat2(h).Status)
	require.Equal(t, statusOK, checkRoot(h).Status)

	h = fakeHost(map[string]string{"/proc/filesystems": "nodev\tsysfs\n", "/proc/self/status": "Name:\tx\n"},
		map[string]fs.FileMode{"/sys/fs/cgroup/unified/cgroup.controllers": 0o444})
	h.openat2 = func() error { return unix.ENOSYS }
	h.geteuid = func() int { return 1000 }
	for _, c := range []checkResult{checkOverlay(h), checkSeccomp(h), checkOpenat2(h), checkRoot(h)} {
		require.Equal(t, statusFail, c.Status, c.Name)
		require.NotEmpty(t, c.Fix, c.Name)
	}
	c := checkCgroups(h)
	require.Equal(t, statusWarn, c.Status)
	require.Contains(t, c.Detail, "hybrid")
	require.Equal(t, "for cgroup v2, boot with systemd.unified_cgroup_hierarchy=1 (systemd as init) or cgroup_no_v1=all (every controller on cgroup v2; see docs/runtimes.md)", c.Fix)

	h = fakeHost(nil, map[string]fs.FileMode{"/sys/fs/cgroup/memory": fs.ModeDir})
	require.Contains(t, checkCgroups(h).Detail, "cgroup v1")

	require.Equal(t, checkResult{Name: "landlock", Status: statusOK, Detail: "Landlock ABI 7: corral-init confines each tool's reads (no /proc mount tables)"}, checkLandlock(h))
	for _, errno := range []error{unix.ENOSYS, unix.EOPNOTSUPP} {
		h.landlock = func() (int, error) { return 0, fmt.Errorf("%w: %w", landlock.ErrUnavailable, errno) }
		c := checkLandlock(h)
		require.Equal(t, statusWarn, c.Status)
		require.Contains(t, c.Detail, "no Landlock (landlock unavailable: "+errno.Error()+")")
		require.NotEmpty(t, c.Fix)
	}
	require.Equal(t, statusFail, checkCgroups(fakeHost(nil, nil)).Status)
}

func TestRuncLacks(t *testing.T) {
	const old, trio = "CVE-2024-45310", "CVE-2025-31133, CVE-2025-52565, CVE-2025-52881"
	for ver, want := range map[string][]string{
		"1.1.5+ds1": {old, trio}, "1.1.13": {old, trio}, "1.1.14": {trio}, "1.2.0-rc.2": {old, trio}, "1.2.0-rc.3": {trio},
		"1.2.7": {trio}, "1.2.8": nil, "1.2.9": nil, "1.3.0-rc.1": {trio}, "1.3.2": {trio}, "1.3.3": nil,
		"1.4.0-rc.2": {trio}, "1.4.0-rc.3": nil, "1.4.0": nil, "1.5.0-rc.3": nil, "1.0.0-rc95": {old, trio}, "garbage": nil,
	} {
		var got []string
		for _, f := range runcLacks(ver) {
			got = append(got, f.CVE)
		}
		require.Equal(t, want, got, ver)
	}
}

func TestDoctorRuntimes(t *testing.T) {
	h := fakeHost(nil, nil)
	h.lookPath = func(n string) (string, error) {
		if n == "crun" {
			return "", errors.New("not found")
		}
		return "/usr/bin/" + n, nil
	}
	versions := map[string]string{"/usr/bin/runc": "runc version 1.1.5+ds1\ncommit: x\n", "/usr/bin/runsc": "runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n"}
	h.output = func(_ context.Context, name string, _ ...string) ([]byte, error) { return []byte(versions[name]), nil }
	cfg := config.Config{Runtime: sandbox.DefaultRuntime, Image: sandbox.DefaultImageRef}

	c := checkRuntime(context.Background(), h, "runc", cfg)
	require.Equal(t, statusWarn, c.Status, "own containers: the preconditions are not met")
	require.Contains(t, c.Detail, "lacks the fixes for CVE-2024-45310; CVE-2025-31133")
	require.Contains(t, c.Fix, "1.2.8")
	cfg.Image = "docker.io/library/alpine:latest"
	c = checkRuntime(context.Background(), h, "runc", cfg)
	require.Equal(t, statusWarn, c.Status, "an image from elsewhere on an unfixed runc: corral works, the image is the exposure")
	require.Contains(t, c.Detail, "the configured image is not corral's own")

	c = checkRuntime(context.Background(), h, "runsc", cfg)
	require.Equal(t, statusOK, c.Status)
	require.Contains(t, c.Detail, "runsc 0.0~20221219.0")
	require.Equal(t, statusWarn, checkRuntime(context.Background(), h, "crun", cfg).Status, "absent, not selected")
	cfg.Runtime = "io.containerd.crun.v2"
	require.Equal(t, statusFail, checkRuntime(context.Background(), h, "crun", cfg).Status, "absent and selected")

	versions["/usr/bin/runc"] = "runc version 1.3.3\n"
	cfg.Runtime = sandbox.DefaultRuntime
	require.Equal(t, statusOK, checkRuntime(context.Background(), h, "runc", cfg).Status)
}

func TestDoctorStateDir(t *testing.T) {
	h := fakeHost(nil, map[string]fs.FileMode{"/var/lib/corral": fs.ModeDir | 0o700, "/var": fs.ModeDir | 0o755})
	for _, c := range checkStateDir(h, "/var/lib/corral") {
		require.Equal(t, statusOK, c.Status, c.Name+": "+c.Detail)
	}

	h = fakeHost(nil, map[string]fs.FileMode{"/src/repo/state": fs.ModeDir | 0o755, "/src/repo/.git": fs.ModeDir | 0o755})
	var fails []string
	for _, c := range checkStateDir(h, "/src/repo/state") {
		if c.Status == statusFail {
			fails = append(fails, c.Detail)
		}
	}
	require.Len(t, fails, 2)
	require.Contains(t, fails[0], "mode 0755")
	require.Contains(t, fails[1], "inside the repository /src/repo")

	h = fakeHost(nil, map[string]fs.FileMode{"/var/lib/corral": fs.ModeDir | 0o700})
	h.statfs = func(_ string, s *unix.Statfs_t) error {
		s.Type, s.Bsize, s.Bavail, s.Files, s.Ffree = overlayfsMagic, 4096, 1000, 1<<20, 100
		return nil
	}
	got := map[string]string{}
	for _, c := range checkStateDir(h, "/var/lib/corral") {
		got[c.Name] = c.Status
	}
	require.Equal(t, map[string]string{"state dir": statusOK, "state fs": statusFail, "state space": statusWarn}, got)

	h = fakeHost(nil, map[string]fs.FileMode{"/var": fs.ModeDir | 0o755})
	r := checkStateDir(h, "/var/lib/corral")
	require.Equal(t, statusOK, r[0].Status)
	require.Contains(t, r[0].Detail, "creates it")
}

func TestDoctorContainerdAndDaemon(t *testing.T) {
	h := fakeHost(nil, map[string]fs.FileMode{"/run/corral/corral.sock": fs.ModeSocket | 0o660})
	cfg := config.Config{Address: "/run/containerd/containerd.sock", Namespace: "corral", Image: sandbox.DefaultImageRef}
	h.containerd = func(context.Context, string, string, string) (string, bool, error) {
		return "", false, errors.New("connection refused")
	}
	r := checkContainerd(context.Background(), h, cfg)
	require.Len(t, r, 1)
	require.Equal(t, statusFail, r[0].Status)
	h.containerd = func(context.Context, string, string, string) (string, bool, error) { return "v2.1.4", false, nil }
	r = checkContainerd(context.Background(), h, cfg)
	require.Equal(t, []string{statusOK, statusWarn}, []string{r[0].Status, r[1].Status})
	require.Equal(t, "corral image build", r[1].Fix)

	h.daemon = func(context.Context, string) ([]byte, error) { return []byte("{\n  \"version\": \"v1\"\n}\n"), nil }
	c := checkDaemon(context.Background(), h, "/run/corral/corral.sock")
	require.Equal(t, statusOK, c.Status)
	require.True(t, strings.HasSuffix(c.Detail, `answers { "version": "v1" }`), c.Detail)
	h.daemon = func(context.Context, string) ([]byte, error) { return nil, errors.New("connection refused") }
	require.Equal(t, statusFail, checkDaemon(context.Background(), h, "/run/corral/corral.sock").Status)
	require.Equal(t, statusOK, checkDaemon(context.Background(), h, "/run/other.sock").Status, "no daemon is fine")
}

// TestDoctorExitCode: doctor exits 1 when a check fails and prints each
// failure with its fix; a broken config file is a failed check, not a
// refusal to run.
func TestDoctorExitCode(t *testing.T) {
	dir := t.TempDir()
	stdout, _, code := runCLI(t, "doctor", "--json", "--config", dir+"/missing.yaml", "--state-dir", dir+"/state", "--address", dir+"/none.sock")
	require.Equal(t, 1, code)
	v := jsonOut(t, stdout)
	require.Equal(t, false, v["ok"])
	require.Equal(t, float64(1), v["exit_code"])
	checks := v["checks"].([]any)
	first := checks[0].(map[string]any)
	require.Equal(t, "config", first["name"])
	require.Equal(t, statusFail, first["status"])
	require.Contains(t, first["detail"], "missing.yaml: it does not exist")
}
