// Command corral-init is the first process of a container that corral
// creates before the agent's call arrives. It is static and imports only
// syscall and os (for Args), so it starts in about a millisecond.
//
// Usage (fixed when the container is created): corral-init ARGVFILE
//
// ARGVFILE is written by the supervisor on a read-only bind mount after the
// container was created and before it is started: the invocation's argv as
// NUL-terminated strings. corral-init reads it, resolves argv[0] against
// PATH (a bare name only; the allowlist refused anything else), and
// execve(2)s the tool, which then runs as the container's PID 1 with the
// environment the spec fixed. Exit codes when it cannot: 127 (not found),
// 126 (exec failed), 125 (bad argv file).
package main

import "syscall"

func write(s string) { syscall.Write(2, []byte("corral-init: "+s+"\n")) }

func main() {
	args := argsOf()
	if len(args) != 2 {
		write("usage: corral-init ARGVFILE")
		syscall.Exit(125)
	}
	data, ok := readFile(args[1])
	if !ok || len(data) == 0 || data[len(data)-1] != 0 {
		write("cannot read argv file " + args[1])
		syscall.Exit(125)
	}
	var argv []string
	start := 0
	for i, b := range data {
		if b == 0 {
			argv = append(argv, string(data[start:i]))
			start = i + 1
		}
	}
	env := syscall.Environ()
	name := argv[0]
	path := ""
	for _, kv := range env {
		if len(kv) > 5 && kv[:5] == "PATH=" {
			path = kv[5:]
		}
	}
	for _, c := range name {
		if c == '/' {
			write("argv[0] must be a bare name: " + name)
			syscall.Exit(126)
		}
	}
	dir := ""
	for i := 0; i <= len(path); i++ {
		if i == len(path) || path[i] == ':' {
			if dir != "" {
				full := dir + "/" + name
				err := syscall.Exec(full, argv, env)
				if err != syscall.ENOENT && err != syscall.ENOTDIR {
					write("exec " + full + ": " + err.Error())
					syscall.Exit(126)
				}
			}
			dir = ""
			continue
		}
		dir += string(path[i])
	}
	write(name + ": command not found")
	syscall.Exit(127)
}

func readFile(p string) ([]byte, bool) {
	fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, false
		}
		if n == 0 {
			return out, true
		}
		out = append(out, buf[:n]...)
		if len(out) > 4<<20 {
			return nil, false
		}
	}
}
