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

// enforcement is what a runtime answers where runtimes differ, as the
// isolation tests assert it; docs/runtimes.md's matrix is this table.
// runc's is the reference; crun answers the same.
type enforcement struct {
	// ReadOnlyErrno is a write's errno on a read-only mount.
	ReadOnlyErrno string
	// StatxWorks: coreutils' ls and stat work (statx with
	// AT_NO_AUTOMOUNT); else they fail with StatxError.
	StatxWorks bool
	StatxError string
	// StatusLines are the /proc/self/status lines the kernel shows (the
	// probe's "status" prints the identity lines it finds).
	StatusLines []string
	// ForkBombPids is the pids limit the fork bomb runs under;
	// ForkBombOut, when set, is in its stdout (the tool saw fork fail);
	// else the whole container dies (ForkBombExit). Either way
	// LimitsHit names pids.
	ForkBombPids int64
	ForkBombOut  string
	ForkBombExit int
	// OOM are the outcomes a tool that allocates without end may have:
	// the result is one of them.
	OOM []limitOutcome
}

// limitOutcome is a limit hit and the exit code it gives.
type limitOutcome struct {
	Limit string
	Exit  int
}

var (
	identityLines = []string{"Uid: 65534 65534 65534 65534", "Gid: 65534 65534 65534 65534", "Seccomp: 2",
		"CapEff: 0000000000000000", "CapPrm: 0000000000000000", "CapBnd: 0000000000000000"}
	linuxEnforcement = enforcement{
		ReadOnlyErrno: "EROFS", StatxWorks: true,
		StatusLines:  append(slices.Clone(identityLines), "CapAmb: 0000000000000000", "NoNewPrivs: 1"),
		ForkBombPids: 16, ForkBombOut: "fork failed after",
		OOM: []limitOutcome{{sandbox.LimitMemory, 137}},
	}
	enforcedBy = map[string]enforcement{
		"runc": linuxEnforcement,
		"crun": linuxEnforcement,
		// gVisor answers system calls with its own kernel, the Sentry.
		"runsc": {
			// The gofer serves the read-only mounts and answers EACCES.
			ReadOnlyErrno: "EACCES",
			// runsc 20221219 refuses statx's AT_NO_AUTOMOUNT.
			StatxError: "Invalid argument",
			// Its /proc/self/status has no CapAmb and no NoNewPrivs line.
			StatusLines: identityLines,
			// The tool's processes are the Sentry's tasks, not host
			// processes; pids.max (the profile's plus the table's
			// PidsOverhead) counts the sandbox's host threads, so the fork
			// bomb ends the whole sandbox (Go's "failed to create new OS
			// thread", exit 2).
			ForkBombPids: 16, ForkBombExit: 2,
			// The OOM killer ends the sandbox (137), unless under memory
			// pressure the Sentry reaches pids.max first (exit 2, as the
			// fork bomb).
			OOM: []limitOutcome{{sandbox.LimitMemory, 137}, {sandbox.LimitPids, 2}},
		},
	}
)

// enforces returns what this runtime enforces where runtimes differ.
func (rt testRuntime) enforces(t *testing.T) enforcement {
	t.Helper()
	e, ok := enforcedBy[rt.name]
	if !ok {
		t.Fatalf("runtime %s: no entry in enforcedBy", rt.name)
	}
	return e
}

// executor is a test executor on this runtime, closed in t.Cleanup.
func (rt testRuntime) executor(t *testing.T, opts ...func(*sandbox.Config)) *sandbox.Executor {
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
	return testutil.ExecutorWith(t, append([]func(*sandbox.Config){func(cfg *sandbox.Config) { cfg.Runtime = rt.name }}, opts...)...)
}

// session is newSession on this runtime.
func (rt testRuntime) session(t *testing.T, repo string, opts ...sessOpt) *sandbox.Session {
	t.Helper()
	return newSessionOn(t, rt.executor(t), repo, opts...)
}
