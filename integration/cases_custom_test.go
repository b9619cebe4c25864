package integration

// The checks of testdata/expect.yaml that are Go, named by a case's
// "custom" field. Each is here because it is not an outcome per input:
// say why next to its entry in customChecks.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/mounts/changeset"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// customCheck is a check in Go and the case inputs it reads, which the
// table then does not give outcomes for.
type customCheck struct {
	run      func(h *harness)
	consumes []string // input fields: "ops", "in_box_loop", "upper_dir_extra"
}

var customChecks = map[string]customCheck{
	// PATH-10 races a box that swaps a directory for a symlink in a loop
	// against 1000 host-side checks, and requires the collection to wait
	// for the container: concurrency and timing, where each check may
	// answer either way as long as it fails closed. Its ops are prose for
	// that race, not file-tool calls.
	"symlink-swap race": {(*harness).symlinkSwapRace, []string{"ops", "in_box_loop"}},
	// DIFF-10's upper_dir_extra is an overlay upper directory made by hand,
	// with whiteouts and devices the box cannot make (seccomp refuses
	// mknod), given to the collector directly: a filesystem to build, not
	// a call to make.
	"crafted layer": {(*harness).craftedLayer, []string{"upper_dir_extra"}},
}

// symlinkSwapRace is PATH-10: the box swaps openwiki/d for a symlink in a
// loop while the host checks writes to openwiki/d/x.md 1000 times and
// collects the change set.
func (h *harness) symlinkSwapRace() {
	t := h.t
	require.NotEmpty(t, h.c.Input.InBoxLoop)
	ops := h.c.Input.Ops
	require.Len(t, ops, 2)
	require.Equal(t, "host API write openwiki/d/x.md (1000x)", ops[0])
	require.Equal(t, "diff collection of openwiki/d/x.md during the loop", ops[1])
	const timeout = 4 * time.Second
	s := h.session(withResources(t, profiles.Resources{Timeout: timeout.String()}))
	require.Equal(t, "ok\n", out(h.box(s, "probe", "write", "openwiki/d/x.md", "# edited\n")))

	type result struct {
		r   *sandbox.Result
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		r, err := testutil.ExecWithoutPolicy(context.Background(), s, []string{"busybox", "sh", "-c", shPrelude + h.c.Input.InBoxLoop}, nil, nil)
		done <- result{r, err}
	}()
	time.Sleep(500 * time.Millisecond)
	// The host's checks resolve through the merged write area, where the
	// box swaps openwiki/d for a link to /repo: each check either allows
	// exactly openwiki/d/x.md or refuses the link; never a path outside.
	for i := 0; i < 1000; i++ {
		got, err := allowlist.CheckWrite(s.View(), s.Scope, "openwiki/d/x.md")
		if err != nil {
			// A refusal of the link, or (the swap raced the lookup) a
			// resolution error: both fail closed, and neither names a
			// path outside the write scope as allowed.
			var r *allowlist.Refusal
			if errors.As(err, &r) && r.Rule != "symlink openwiki/d leaves the repository" {
				require.Contains(t, r.Rule, "resolving openwiki/d/x.md", "check %d", i)
			}
			continue
		}
		require.Equal(t, "openwiki/d/x.md", got, "check %d", i)
	}
	// Collection waits for the container to exit.
	cs, err := s.Changes()
	collected := time.Since(start)
	res := <-done
	require.NoError(t, res.err)
	require.Contains(t, res.r.LimitsHit, sandbox.LimitTimeout)
	h.saw(string(res.r.Stdout), string(res.r.Stderr))
	require.NoError(t, err)
	require.GreaterOrEqual(t, collected, timeout, "the change set was read while the box ran")
	for _, c := range cs.Changes {
		require.True(t, strings.HasPrefix(c.Path, "openwiki/"), c.Path)
	}
	for _, v := range cs.Violations {
		require.True(t, strings.HasPrefix(v.Path, "openwiki/"), v.Path)
	}
}

// craftedLayer is DIFF-10's upper_dir_extra: an upper dir made by hand
// (not by overlayfs) with whiteouts of reserved names and of a base
// symlink that points out of openwiki/, and a device that is no whiteout.
func (h *harness) craftedLayer() {
	t := h.t
	dir := t.TempDir()
	base, upper := filepath.Join(dir, "base"), filepath.Join(dir, "upper")
	require.NoError(t, os.MkdirAll(base, 0o755))
	require.NoError(t, os.MkdirAll(upper, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(base, "old.md"), []byte("# old\n"), 0o644))
	require.NoError(t, os.Symlink("../README.md", filepath.Join(base, "up")))
	for name, dev := range map[string]int{"old.md": 0, ".git": 0, ".claims": 0, "up": 0, "null": int(unix.Mkdev(1, 3))} {
		require.NoError(t, unix.Mknod(filepath.Join(upper, name), unix.S_IFCHR|0o600, dev), name)
	}
	// And what the box could not make (seccomp refuses mknod): a fifo and
	// a block device.
	require.NoError(t, unix.Mkfifo(filepath.Join(upper, "p"), 0o600))
	require.NoError(t, unix.Mknod(filepath.Join(upper, "blk"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))))
	cs, err := changeset.Collect(upper, base, sandbox.DefaultWriteDir, changeset.DefaultLimits())
	require.NoError(t, err)
	h.requireViolations(cs, map[string]string{
		"openwiki/.git":    ".git is owned by git and never writable",
		"openwiki/.claims": ".claims is owned by corral",
		"openwiki/up":      "symbolic link",
		"openwiki/null":    "character device 1:3",
		"openwiki/p":       "fifo",
		"openwiki/blk":     "block device 7:0",
	})
	require.Equal(t, []string{"delete openwiki/old.md"}, summary(cs))
	for _, v := range cs.Violations {
		require.True(t, strings.HasPrefix(v.Path, "openwiki/"), v.Path)
	}
}
