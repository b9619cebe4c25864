package integration

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/corral-sandbox/corral/internal/initctl"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
)

// TestAheadContainerReachesOnlyItsOwnRequest: no container of a session
// can reach another's control file. On a runtime that starts ahead (runc,
// crun) a container of the pool waits on its control FIFO; a tool of the
// session that could open another waiting container's FIFO for reading
// would take that container's request (the next call's), where no
// Landlock keeps the tool out of /.corral. So the host walks every bind of
// every container of a session whose pool is full and finds no FIFO but
// the container's own control file; and a tool cannot write its own
// control file (root's, 0644, on a read-only bind).
func TestAheadContainerReachesOnlyItsOwnRequest(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt testRuntime) {
		e := rt.executor(t)
		ctx := e.Context(context.Background())
		s := newSessionOn(t, e, hiddenRepo(t))
		run(t, s, "ls")
		s.Idle() // the pool refilled: containers made ahead wait

		cs, err := e.Client().Containers(ctx, fmt.Sprintf("labels.%q==%s", sandbox.LabelSession, s.ID))
		require.NoError(t, err)
		ahead := 0
		for _, c := range cs {
			task, err := c.Task(ctx, nil)
			if err != nil {
				continue
			}
			if st, err := task.Status(ctx); err != nil || st.Status != aheadStatus(t, rt) {
				continue
			}
			ahead++
			spec, err := c.Spec(ctx)
			require.NoError(t, err)
			own := hostPath(t, spec, spec.Process.Args[len(spec.Process.Args)-1])
			var ownIno uint64
			if st, err := os.Stat(own); err == nil {
				ownIno = st.Sys().(*syscall.Stat_t).Ino
			}
			for _, m := range spec.Mounts {
				if m.Type != "bind" {
					continue
				}
				require.NoError(t, filepath.WalkDir(m.Source, func(p string, d fs.DirEntry, err error) error {
					if err != nil || d.Type()&fs.ModeNamedPipe == 0 {
						return nil
					}
					st, err := os.Stat(p)
					require.NoError(t, err)
					require.Equal(t, ownIno, st.Sys().(*syscall.Stat_t).Ino,
						"container %s reaches the FIFO %s (at %s) that is not its own control file %s", c.ID(), p, m.Destination, own)
					return nil
				}))
			}
		}
		require.GreaterOrEqual(t, ahead, 2, "the pool made fewer than two containers ahead")

		// The tool's own control file, FIFO or regular: never writable.
		res := inBox(t, s, "probe", "write", initctl.RequestFile, "{}")
		require.Contains(t, []string{"EACCES", "EROFS"}, strings.TrimSpace(out(res)), "writing its own control file: %s", res.Stderr)
	})
}

// hostPath is the host's path of the container path p under spec's binds
// (the deepest bind whose destination holds p).
func hostPath(t *testing.T, spec *specs.Spec, p string) string {
	t.Helper()
	best := -1
	host := ""
	for _, m := range spec.Mounts {
		if m.Type != "bind" {
			continue
		}
		rel, err := filepath.Rel(m.Destination, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || len(m.Destination) <= best {
			continue
		}
		best, host = len(m.Destination), filepath.Join(m.Source, rel)
	}
	require.NotEmpty(t, host, "no bind holds %s", p)
	return host
}
