// Command corral-init is the first process of every container corral
// creates. It is static (CGO_ENABLED=0) and bound read-only into each
// container at /.corral/init from a content-addressed copy in corral's
// state directory, so it works with any image and never needs one rebuilt.
//
// Usage (fixed when the container is created): corral-init CTLFILE
//
// CTLFILE, in the session's control directory (bound read-only at
// /.corral/ctl), is written by the supervisor after the container was
// created and before it is started: one initctl.Request. corral-init
// reads it and, by its mode:
//   - exec: resolves argv[0] against PATH (a bare name only; the allowlist
//     refused anything else) and execve(2)s the tool, which then runs as
//     the container's PID 1 with the environment the spec fixed;
//   - fs: runs one file-tool operation in-process (sandbox/fsop) against
//     its working directory, the repository view, and prints the answer.
//
// Exit codes when it cannot: 127 (not found), 126 (exec failed), 125 (bad
// control file).
package main

import (
	"os"
	"path/filepath"
	"syscall"

	"github.com/corral-sandbox/corral/internal/initctl"
	"github.com/corral-sandbox/corral/internal/rootfs"
	"github.com/corral-sandbox/corral/sandbox/fsop"
)

func fail(code int, s string) {
	os.Stderr.WriteString("corral-init: " + s + "\n")
	os.Exit(code)
}

func main() {
	if len(os.Args) != 2 {
		fail(125, "usage: corral-init CTLFILE")
	}
	data, err := readFile(os.Args[1])
	if err != nil {
		fail(125, "cannot read control file "+os.Args[1]+": "+err.Error())
	}
	req, err := initctl.Decode(data)
	if err != nil {
		fail(125, err.Error())
	}
	switch req.Mode {
	case initctl.FS:
		os.Exit(fsop.Main(req.Argv, os.Stdout, os.Stderr))
	default:
		execTool(req.Argv)
	}
}

// execTool execs argv[0] from PATH; it returns only by exiting.
func execTool(argv []string) {
	env := os.Environ()
	path := ""
	for _, kv := range env {
		if len(kv) > 5 && kv[:5] == "PATH=" {
			path = kv[5:]
		}
	}
	name := argv[0]
	dir := ""
	for i := 0; i <= len(path); i++ {
		if i == len(path) || path[i] == ':' {
			if dir != "" {
				full := dir + "/" + name
				err := syscall.Exec(full, argv, env)
				if err != syscall.ENOENT && err != syscall.ENOTDIR {
					fail(126, "exec "+full+": "+err.Error())
				}
			}
			dir = ""
			continue
		}
		dir += string(path[i])
	}
	fail(127, name+": command not found")
}

// readFile reads the control file (a regular file, no link on the way
// below its directory) at most initctl.MaxBytes.
func readFile(p string) ([]byte, error) {
	return rootfs.ReadFileInRoot(filepath.Dir(p), filepath.Base(p), rootfs.NoSymlinks, initctl.MaxBytes)
}
