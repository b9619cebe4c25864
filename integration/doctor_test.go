package integration

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/stretchr/testify/require"
)

// TestDoctor runs `corral doctor --json` against this machine's
// containerd: the kernel checks pass, containerd answers with its version
// in the test namespace, the runtimes are probed, and the exit code is 1
// exactly when a check failed.
func TestDoctor(t *testing.T) {
	// The test image is in the namespace and $CORRAL_INIT names
	// corral-init, as for every other test.
	testutil.ExecutorWith(t)
	cmd := exec.Command(testutil.CorralPath(), "doctor", "--json", "--address", testutil.Address(), "--namespace", testutil.Namespace,
		"--state-dir", testutil.StateDir(t), "--image", testutil.TestImageRef)
	stdout, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	var out struct {
		Checks []struct {
			Name, Status, Detail, Fix string
		} `json:"checks"`
		OK       bool `json:"ok"`
		ExitCode int  `json:"exit_code"`
	}
	require.NoError(t, json.Unmarshal(stdout, &out), string(stdout))
	require.Equal(t, code, out.ExitCode)
	status := map[string]string{}
	failed := false
	for _, c := range out.Checks {
		status[c.Name] = c.Status
		if c.Status == "fail" {
			failed = true
			require.NotEmpty(t, c.Fix, "every failure has its fix: %+v", c)
			t.Logf("failed: %s: %s", c.Name, c.Detail)
		}
		if c.Name == "containerd" {
			require.Contains(t, c.Detail, "namespace "+testutil.Namespace)
		}
	}
	require.Equal(t, failed, code == 1)
	require.Equal(t, !failed, out.OK)
	for _, n := range []string{"config", "root", "overlayfs", "seccomp", "openat2", "containerd", "state dir", "state fs", "corral-init"} {
		require.Equal(t, "ok", status[n], n)
	}
	require.Equal(t, "ok", status["image"])
	require.Contains(t, status, "runtime runc")
	require.Contains(t, status, "runtime crun")
	require.Contains(t, status, "runtime runsc")
}

// TestDoctorConfigSources: the same settings from CORRAL_* variables and a
// config file instead of flags reach containerd, and doctor names where
// each came from.
func TestDoctorConfigSources(t *testing.T) {
	testutil.ExecutorWith(t)
	conf := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(conf, []byte("state_dir: "+testutil.StateDir(t)+"\nimage: "+testutil.TestImageRef+"\n"), 0o644))
	cmd := exec.Command(testutil.CorralPath(), "doctor", "--json")
	cmd.Env = append(os.Environ(), "CORRAL_CONFIG="+conf, "CORRAL_ADDRESS="+testutil.Address(), "CORRAL_NAMESPACE="+testutil.Namespace)
	stdout, _ := cmd.Output()
	var out struct {
		Checks []struct{ Name, Status, Detail string } `json:"checks"`
	}
	require.NoError(t, json.Unmarshal(stdout, &out), string(stdout))
	got := map[string]string{}
	for _, c := range out.Checks {
		got[c.Name] = c.Status + ": " + c.Detail
	}
	require.Equal(t, "ok: file "+conf+"; namespace "+testutil.Namespace+" (env CORRAL_NAMESPACE), state "+testutil.StateDir(t)+" (file "+conf+")", got["config"])
	require.Contains(t, got["containerd"], "ok: containerd ")
	require.Contains(t, got["containerd"], " at "+testutil.Address()+", namespace "+testutil.Namespace)
	require.Equal(t, "ok: "+testutil.TestImageRef+" is in namespace "+testutil.Namespace, got["image"])
}
