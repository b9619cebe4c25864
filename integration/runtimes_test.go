package integration

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
)

// runtimeNames are the runtimes the isolation tests and the hostile-case
// table run under: every runtime of sandbox.Runtimes, or the names listed
// in $CORRAL_IT_RUNTIMES (comma-separated) to shorten a local run.
func runtimeNames(t *testing.T) []string {
	t.Helper()
	var all []string
	for _, r := range sandbox.Runtimes() {
		all = append(all, r.Name)
	}
	env := os.Getenv("CORRAL_IT_RUNTIMES")
	if env == "" {
		return all
	}
	var names []string
	for _, n := range strings.Split(env, ",") {
		if !slices.Contains(all, n) {
			t.Fatalf("CORRAL_IT_RUNTIMES: unknown runtime %q (want some of %v)", n, all)
		}
		names = append(names, n)
	}
	return names
}

// forEachRuntime runs f as the subtest <runtime> for each runtime. A
// runtime whose binary is missing skips its subtest, or fails it when
// CI=true.
func forEachRuntime(t *testing.T, f func(t *testing.T, rt testRuntime)) {
	for _, name := range runtimeNames(t) {
		t.Run(name, func(t *testing.T) { f(t, testRuntime{name: name}) })
	}
}

// testRuntime is one runtime under test.
type testRuntime struct{ name string }

// executor is a test executor on this runtime, closed in t.Cleanup.
func (rt testRuntime) executor(t *testing.T) *sandbox.Executor {
	t.Helper()
	info, err := sandbox.LookupRuntime(rt.name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Binary != "" {
		if _, err := exec.LookPath(info.Binary); err != nil {
			testutil.Missing(t, "runtime "+rt.name+": "+err.Error()+" (hack/setup.sh installs Debian's "+info.Package+")")
		}
	}
	return testutil.ExecutorWith(t, func(cfg *sandbox.Config) { cfg.Runtime = rt.name })
}

// session is newSession on this runtime.
func (rt testRuntime) session(t *testing.T, repo string, opts ...sessOpt) *sandbox.Session {
	t.Helper()
	return newSessionOn(t, rt.executor(t), repo, opts...)
}
