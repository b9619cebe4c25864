// Command corral-runsc runs gVisor's runsc as the binary of containerd's
// runc v2 shim (io.containerd.runc.v2), for `corral --runtime runsc`.
//
// Debian 12 ships runsc (0.0~20221219) without its own containerd shim.
// The runc v2 shim can drive it, as it drives any runtime with runc's
// command line, but its BinaryName option is a path, not a command line,
// and runsc reads its own flags from nowhere else (no configuration file,
// no environment). corral installs this program, content-addressed, with
// a configuration file beside it (wrapper.Config, written from
// corral's runtime table) and names it as the shim's binary. It is static
// (CGO_ENABLED=0), runs on the host as the shim's child (root), and never
// enters a container.
//
// For every call it execs the configured runtime with the configured
// global flags before the shim's arguments (--network=none, --oci-seccomp:
// see sandbox.RuntimeInfo.Flags), and two fixes (rewrite): runsc 20221219
// refuses to signal a container that was created but never started
// ("cannot signal container in state created"), so the shim's kill — and
// with it every task delete of a container made ahead and never used, and
// every reaper — would fail and leave the sandbox, its gofer and its
// cgroup behind: for such a container `kill` becomes `delete --force`,
// which stops the sandbox; the shim then sees the exit and deletes as
// usual. And the shim's `delete` after an exit becomes `delete --force`
// (the sandbox may still be stopping).
//
// Usage (by the shim): corral-runsc [--root R] [--log L] [--log-format F] ... SUBCOMMAND ARGS
package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/corral-sandbox/corral/internal/wrapper"
)

func fail(s string) {
	os.Stderr.WriteString("corral-runsc: " + s + "\n")
	os.Exit(1)
}

// valueFlags are the runc global flags the shim passes with a value
// (go-runc's Runc.args).
var valueFlags = map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true}

func main() {
	self, err := os.Executable()
	if err != nil {
		fail(err.Error())
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(self), wrapper.ConfigName))
	if err != nil {
		fail("reading the configuration: " + err.Error())
	}
	var conf wrapper.Config
	if err := json.Unmarshal(data, &conf); err != nil || !filepath.IsAbs(conf.Runtime) {
		fail("bad configuration " + wrapper.ConfigName + ": want {\"runtime\": ABSOLUTE-PATH, \"flags\": [...]}")
	}
	args, stopped := rewrite(os.Args[1:], func(root, id string) string { return status(conf.Runtime, root, id) })
	if stopped {
		// The runc v2 shim takes this message of runc's for "not found",
		// which a kill of a stopped container is.
		fail("container not running")
	}
	args = append(append([]string(nil), conf.Flags...), args...)
	argv := append([]string{conf.Runtime}, args...)
	if err := syscall.Exec(conf.Runtime, argv, os.Environ()); err != nil {
		fail("exec " + conf.Runtime + ": " + err.Error())
	}
}

// rewrite returns the shim's command line as runsc 20221219 needs it,
// or stopped when the command is a kill of a stopped container:
//   - `kill [--all] ID SIGNAL` of a container in state "created" becomes
//     `delete --force ID`: runsc refuses to signal one;
//   - a kill of a container in state "stopped" is stopped: runsc fails it
//     with "sandbox is not running", which the shim does not recognise as
//     runc's "container not running", so task deletes with a kill fail;
//   - `delete ID` becomes `delete --force ID`: the shim deletes after it
//     saw the container's process exit, but runsc may not have stopped the
//     sandbox yet and then refuses ("cannot delete container that is not
//     stopped without --force flag"), leaving the task behind.
//
// status returns the container's state (runtime-spec runtime.md#state).
// Global flags before the subcommand are kept; any other command line is
// returned unchanged.
func rewrite(args []string, status func(root, id string) string) (_ []string, stopped bool) {
	root := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if valueFlags[a] {
			if a == "--root" && i+1 < len(args) {
				root = args[i+1]
			}
			i++
			continue
		}
		if len(a) > 0 && a[0] == '-' {
			continue
		}
		globals := args[:i:i]
		rest := args[i+1:]
		switch {
		case a == "kill" && len(rest) >= 2 && root != "":
			id := rest[len(rest)-2]
			switch status(root, id) {
			case "created":
				return append(globals, "delete", "--force", id), false
			case "stopped":
				return nil, true
			}
		case a == "delete" && !slices.Contains(rest, "--force") && !slices.Contains(rest, "-force"):
			return append(append(globals, "delete", "--force"), rest...), false
		}
		return args, false
	}
	return args, false
}

// status returns the container's state as the runtime reports it, or ""
// when it cannot say.
func status(runtime, root, id string) string {
	out, err := exec.Command(runtime, "--root", root, "state", id).Output()
	if err != nil {
		return ""
	}
	var st struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(out, &st) != nil {
		return ""
	}
	return st.Status
}
