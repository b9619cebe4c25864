package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

// TestExitReportedAfterTheDeadline: an exit status that reaches corral
// after the timeout (a shim that a loaded host runs late) does not make
// the call a timeout when the container ended before it: a tool that
// exits long before its deadline hit no limit. Every shim of the session
// is stopped (SIGSTOP) while the call runs on a container started ahead;
// they run again a second after the 2s timeout. Before the supervisor
// checked at the deadline whether anything still ran in the container,
// the result was the tool's exit 0 with "timeout" (the CLI's exit 124,
// "the tool was killed"), or a clean exit 0, depending on when the shim
// ran. A tool still running at the deadline is a timeout: one blocked
// writing its output (the shim copies it) is killed then, its output
// cut when the shim runs again.
func TestExitReportedAfterTheDeadline(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		info, err := sandbox.LookupRuntime(rt.name)
		require.NoError(t, err)
		if !info.StartAhead {
			t.Skipf("runtime %s: its containers' cgroups do not hold the tool's processes (no check at the deadline)", rt.name)
		}
		timeout := 2 * time.Second
		for _, tc := range []struct {
			name   string
			argv   []string
			exit   int
			limits []string
			stdout string
		}{
			{name: "exit", argv: []string{"probe", "sleep", "200ms"}, exit: 0, stdout: "woke\n"},
			{name: "blocked", argv: []string{"probe", "spew"}, exit: 137, limits: []string{sandbox.LimitTimeout, sandbox.LimitOutput}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s := rt.session(t, hiddenRepo(t), withResources(t, profiles.Resources{Timeout: timeout.String(), Output: "4KiB"}))
				require.NoError(t, s.Warm())
				s.Idle()
				shims := shimsOf(t, "corral-"+s.ID+"-")
				require.NotEmpty(t, shims, "no shim of a container made ahead")
				var stopped []int
				for _, pid := range shims {
					require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
					stopped = append(stopped, pid)
				}
				resume := func() {
					for _, pid := range stopped {
						_ = syscall.Kill(pid, syscall.SIGCONT)
					}
				}
				t.Cleanup(resume)

				type outcome struct {
					res *sandbox.Result
					err error
				}
				done := make(chan outcome, 1)
				start := time.Now()
				go func() {
					r, err := testutil.ExecWithoutPolicy(context.Background(), s, tc.argv, nil, nil)
					done <- outcome{r, err}
				}()
				// The shims run again well after the deadline: the exit
				// reaches the supervisor only then.
				time.Sleep(time.Until(start.Add(timeout + time.Second)))
				select {
				case o := <-done:
					t.Fatalf("the call ended while its shim was stopped (%+v, %v): it did not run on a container made ahead", o.res, o.err)
				default:
				}
				resume()
				o := <-done
				require.NoError(t, o.err)
				require.Equal(t, tc.exit, o.res.ExitCode, "stderr: %s", o.res.Stderr)
				require.Equal(t, tc.limits, o.res.LimitsHit)
				if tc.stdout != "" {
					require.Equal(t, tc.stdout, out(o.res))
				}
			})
		}
	})
}
