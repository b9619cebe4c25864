package allowlist

import "strings"

// neverExact are programs no grammar may offer: shells and their builtins,
// interpreters, programs that run another program from their arguments,
// privilege changers, pagers and editors (which run commands from their
// own input or environment), archivers with program hooks, and network
// clients.
var neverExact = map[string]bool{
	// shells and multi-call binaries
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true,
	"pdksh": true, "csh": true, "tcsh": true, "fish": true, "ash": true, "rbash": true,
	"busybox": true, "toybox": true, "elvish": true, "nu": true, "xonsh": true, "pwsh": true,
	"powershell": true, "rc": true, "es": true, "yash": true, "oksh": true,
	// shell builtins (not programs; naming one is a sign of a shell string)
	"export": true, "eval": true, "exec": true, "source": true, ".": true, "command": true,
	"builtin": true, "alias": true, "unalias": true, "set": true, "unset": true, "cd": true,
	"trap": true, "ulimit": true, "umask": true, "declare": true, "typeset": true,
	"local": true, "readonly": true, "let": true, "shopt": true, "enable": true,
	"hash": true, "type": true, "read": true, "wait": true, "jobs": true, "fg": true,
	"bg": true, "disown": true, "coproc": true, "function": true, "time": true,
	// interpreters and language tool chains
	"awk": true, "gawk": true, "mawk": true, "nawk": true, "busybox-awk": true,
	"tclsh": true, "wish": true, "expect": true, "guile": true, "scheme": true,
	"racket": true, "sbcl": true, "clisp": true, "ocaml": true, "ghci": true,
	"runghc": true, "julia": true, "r": true, "rscript": true, "octave": true,
	"deno": true, "bun": true, "java": true, "jshell": true, "groovy": true,
	"scala": true, "kotlin": true, "dotnet": true, "mono": true, "go": true,
	"gcc": true, "cc": true, "c++": true, "g++": true, "clang": true, "tcc": true,
	"make": true, "gmake": true, "cmake": true, "ninja": true, "npm": true, "npx": true,
	"pnpm": true, "yarn": true, "pip": true, "pip3": true, "pipx": true, "uv": true,
	"uvx": true, "cargo": true, "rustc": true, "gem": true, "bundle": true,
	"bc": true, "dc": true, "m4": true, "jq": true, "yq": true, "gdb": true,
	"lldb": true, "strace": true, "ltrace": true, "valgrind": true, "ld.so": true,
	"ld-linux.so.2": true, "ld-linux-x86-64.so.2": true, "ld-linux-aarch64.so.1": true,
	// programs that run programs
	"env": true, "printenv": true, "xargs": true, "timeout": true, "nice": true,
	"renice": true, "ionice": true, "setsid": true, "stdbuf": true, "nohup": true,
	"watch": true, "chroot": true, "nsenter": true, "unshare": true, "flock": true,
	"parallel": true, "script": true, "scriptreplay": true, "taskset": true,
	"chrt": true, "prlimit": true, "numactl": true, "cgexec": true, "setpriv": true,
	"capsh": true, "runuser": true, "start-stop-daemon": true, "systemd-run": true,
	"at": true, "batch": true, "crontab": true, "entr": true, "inotifywait": true,
	"firejail": true, "bwrap": true, "proot": true, "fakeroot": true, "fakechroot": true,
	"faketime": true, "catchsegv": true, "run-parts": true, "xdg-open": true,
	"open": true, "sensible-browser": true, "sensible-pager": true,
	"sensible-editor": true, "x-www-browser": true, "www-browser": true,
	"docker": true, "podman": true, "ctr": true, "nerdctl": true, "crictl": true,
	"kubectl": true, "runc": true, "crun": true, "runsc": true, "corral": true,
	"find-exec": true, "fd": true, "fdfind": true, "dpkg": true, "apt": true,
	"apt-get": true, "rpm": true, "install": true, "ln": true, "chmod": true,
	"chown": true, "chgrp": true, "mknod": true, "mkfifo": true, "dd": true,
	"kill": true, "pkill": true, "killall": true,
	// privilege
	"sudo": true, "sudoedit": true, "su": true, "doas": true, "pkexec": true,
	"newgrp": true, "sg": true, "login": true, "passwd": true,
	// archivers and compressors with program hooks
	"tar": true, "cpio": true, "pax": true, "ar": true, "zip": true, "unzip": true,
	"7z": true, "7za": true, "7zr": true, "bsdtar": true, "rar": true, "unrar": true,
	// pagers, documentation viewers, editors
	"less": true, "more": true, "most": true, "pg": true, "man": true, "info": true,
	"pinfo": true, "vi": true, "vim": true, "nvim": true, "view": true, "vimdiff": true,
	"ex": true, "ed": true, "red": true, "emacs": true, "emacsclient": true,
	"nano": true, "pico": true, "joe": true, "jed": true, "mg": true, "micro": true,
	"kak": true, "hx": true, "helix": true, "sensible-vi": true,
	// network clients
	"curl": true, "wget": true, "wget2": true, "nc": true, "ncat": true, "netcat": true,
	"socat": true, "telnet": true, "ftp": true, "sftp": true, "tftp": true, "lftp": true,
	"scp": true, "rsync": true, "ping": true, "ping6": true, "traceroute": true,
	"tracepath": true, "mtr": true, "nslookup": true, "dig": true, "host": true,
	"drill": true, "delv": true, "whois": true, "nmap": true, "openssl": true,
	"gnutls-cli": true, "aria2c": true, "http": true, "https": true, "httpie": true,
	"xh": true, "lynx": true, "w3m": true, "links": true, "elinks": true,
	"ip": true, "ifconfig": true, "route": true, "ss": true, "netstat": true,
	"gh": true, "hub": true, "glab": true, "svn": true, "hg": true,
	"mail": true, "mailx": true, "sendmail": true,
}

// neverPrefix catch versioned and helper names: python3.11, perl5.36,
// node18, git-remote-https, ssh-keygen.
var neverPrefix = []string{
	"python", "pypy", "perl", "ruby", "irb", "node", "nodejs", "lua", "luajit",
	"php", "ssh", "git-", "busybox", "sh.", "bash", "zsh", "ksh", "ld-linux",
	"vim", "emacs", "awk", "tclsh", "wish", "java",
}

// NeverAllowed reports whether name is a program that no grammar may offer,
// whatever a profile says: shells and shell builtins, interpreters,
// wrappers that run another program (env, xargs, timeout, nice, setsid,
// stdbuf, nohup, watch, ...), privilege changers, archivers with program
// hooks, pagers, editors and network clients. Names are compared in lower
// case, and versioned spellings (python3.12, perl5.36) and helper families
// (git-remote-*, ssh-*) are caught by prefix.
//
// Check refuses such a name as KindCmd even when the command table lists
// it; profile validation uses NeverAllowed to reject such grammars.
func NeverAllowed(name string) bool {
	n := strings.ToLower(name)
	if neverExact[n] {
		return true
	}
	for _, p := range neverPrefix {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}
