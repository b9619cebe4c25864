//go:build kubepod

package integration

// TestCasesInPod is the hostile-case table run as an agent Pod, built
// into the agent image by integration/kube (TestCasesInAgentPod, tag
// kube), which runs it in a Pod against the node's DaemonSet daemon:
//
//	go test -c -tags kubepod ./integration/
//	cases.test -test.run '^TestCasesInPod$' -test.v   (in testdata/'s parent)
//
// CORRAL_DAEMON names the daemon's socket, CORRAL_CASES_VOLUME the Pod's
// volume the repositories go in as NAME=MOUNTPATH, CORRAL_CASES_RUNTIME
// the daemon's runtime (whose overrides of testdata/expect.yaml apply;
// "" is sandbox.DefaultRuntime). Under the tag only: outside a Pod it has
// nothing to run against.

import (
	"os"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

func TestCasesInPod(t *testing.T) {
	sock := os.Getenv("CORRAL_DAEMON")
	name, dir, ok := strings.Cut(os.Getenv("CORRAL_CASES_VOLUME"), "=")
	require.True(t, sock != "" && ok && name != "" && dir != "",
		"CORRAL_DAEMON=%q CORRAL_CASES_VOLUME=%q: want a socket and NAME=MOUNTPATH", sock, os.Getenv("CORRAL_CASES_VOLUME"))
	rt := os.Getenv("CORRAL_CASES_RUNTIME")
	if rt == "" {
		rt = sandbox.DefaultRuntime
	}
	runCases(t, casesConfig{Runtime: rt, Daemon: sock, Volume: &caseVolume{Name: name, Dir: dir}})
}
