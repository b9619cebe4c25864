package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/corral-sandbox/corral/internal/testutil"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/moby/sys/mountinfo"
)

// TestMain fails the run when the tests left anything behind that this
// process created: containers or leases labelled with its pid, or host
// mounts under its state directory. Every session is closed by its test,
// so a leftover is a cleanup bug in corral.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := stopTestDaemon(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		code = 1
	}
	// A child process sharing its parent's state directory (crash and
	// throughput children) cannot tell the parent's live sessions apart.
	if code == 0 && os.Getenv("CORRAL_IT_STATE_DIR") == "" {
		if err := leftovers(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func leftovers() error {
	state := testutil.StateDirIfMade()
	if state == "" {
		return nil
	}
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(state))
	if err != nil {
		return err
	}
	client, err := containerd.New(testutil.Address(), containerd.WithTimeout(3*time.Second))
	if err != nil {
		return nil // no daemon: nothing can have been created
	}
	defer client.Close()
	ctx := namespaces.WithNamespace(context.Background(), testutil.Namespace)
	filter := fmt.Sprintf("labels.%q==%s", sandbox.LabelPID, strconv.Itoa(os.Getpid()))
	cs, err := client.Containers(ctx, filter)
	if err != nil {
		return err
	}
	ls, err := client.LeasesService().List(ctx, filter)
	if err != nil {
		return err
	}
	if len(ms) == 0 && len(cs) == 0 && len(ls) == 0 {
		return os.RemoveAll(state)
	}
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID())
	}
	var mps []string
	for _, m := range ms {
		mps = append(mps, m.Mountpoint)
	}
	return fmt.Errorf("%d containers %v, %d leases, %d mounts %v", len(cs), ids, len(ls), len(ms), mps)
}
