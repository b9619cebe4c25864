//go:build linux && cgo

package seccomp

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"github.com/stretchr/testify/require"
)

// forbidden are syscalls the built-in profile must never allow, not even
// under conditions.
var forbidden = []string{
	"mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
	"bpf", "perf_event_open",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"keyctl", "add_key", "request_key", "userfaultfd",
	"mknod", "mknodat",
	"kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module",
	"reboot", "swapon", "swapoff", "acct",
	"open_by_handle_at", "name_to_handle_at",
	"fanotify_init", "fanotify_mark", "lookup_dcookie", "quotactl", "syslog",
	"clock_settime", "settimeofday", "adjtimex", "clock_adjtime",
	"personality",
	"move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "mount_setattr",
	"socketcall", "ipc", "clone3",
	"iopl", "ioperm", "modify_ldt", "vhangup", "sethostname", "setdomainname",
	// Making links: no allowed tool needs one, the collector rejects them.
	"link", "linkat", "symlink", "symlinkat",
	// Running code past noexec: an anonymous file, exec from a descriptor.
	"memfd_create", "execveat",
	// Sockets of every family: no peer in the container's network namespace.
	"socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
	"sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
	// Identities and capabilities never change inside the container.
	"setuid", "setgid", "setresuid", "setresgid", "setreuid", "setregid",
	"setgroups", "setfsuid", "setfsgid", "capset",
}

// essential are syscalls glibc, Go static binaries and the usual tools need.
var essential = []string{
	"read", "write", "openat", "openat2", "close", "newfstatat", "statx", "fstat",
	"getdents64", "lseek", "mmap", "mprotect", "munmap", "brk", "madvise",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
	"clone", "execve", "exit_group", "wait4", "waitid", "futex", "rseq",
	"set_robust_list", "set_tid_address", "arch_prctl", "prlimit64",
	"epoll_create1", "epoll_ctl", "epoll_pwait", "sched_getaffinity", "sched_yield",
	"restart_syscall", "getrandom", "pidfd_open", "pipe2", "ioctl",
	"faccessat2", "copy_file_range", "renameat2",
	"unlinkat", "mkdirat", "utimensat", "readlinkat", "getcwd", "uname",
}

func TestDefault(t *testing.T) {
	p, err := LoadDefault()
	require.NoError(t, err)
	require.Equal(t, specs.ActErrno, p.DefaultAction)

	d := Default()
	require.NotNil(t, d)
	require.Equal(t, p, d)
	d.Rules[0].Names[0] = "changed"
	require.NotEqual(t, "changed", Default().Rules[0].Names[0], "Default must hand out copies")
}

func TestDefaultValidatesOnEveryTarget(t *testing.T) {
	p := Default()
	for _, arch := range []string{"amd64", "arm64", "x86_64", "SCMP_ARCH_AARCH64", ""} {
		require.NoError(t, p.Validate(arch), arch)
	}
	require.NoError(t, p.Validate("386"))
	// 32-bit x86 alone would rewrite a socket rule with conditions onto
	// socketcall(2), whose first argument is the call number.
	sock := &Profile{Rules: []Rule{{Names: []string{"socket"}, Action: specs.ActAllow,
		Args: []Arg{{Index: 0, Value: 1, Op: specs.OpEqualTo}}}}}
	require.NoError(t, sock.Validate("amd64"))
	err := sock.Validate("386")
	require.ErrorContains(t, err, `argument conditions on "socket" cannot be enforced on SCMP_ARCH_X86`)
}

// TestDefaultNamesResolve asks libseccomp directly rather than trusting
// Validate.
func TestDefaultNamesResolve(t *testing.T) {
	native, err := libseccomp.GetNativeArch()
	require.NoError(t, err)
	for _, s := range Default().Syscalls() {
		_, err := libseccomp.GetSyscallFromNameByArch(s.Name, native)
		require.NoError(t, err, s.Name)
	}
}

func TestDefaultForbidden(t *testing.T) {
	allowed := Default().Names()
	for _, name := range forbidden {
		t.Run(name, func(t *testing.T) {
			require.NotContains(t, allowed, name)
		})
	}
}

func TestDefaultEssential(t *testing.T) {
	allowed := Default().Names()
	for _, name := range essential {
		require.Contains(t, allowed, name)
	}
}

func TestSyscalls(t *testing.T) {
	p := Default()
	all := p.Syscalls()
	require.True(t, slices.IsSortedFunc(all, func(a, b Syscall) int {
		return strings.Compare(a.Name, b.Name)
	}))

	byName := make(map[string]Syscall)
	for _, s := range all {
		byName[s.Name] = s
	}
	require.Equal(t, Syscall{Name: "clone3", Action: specs.ActErrno, ErrnoRet: 38}, byName["clone3"])
	require.False(t, byName["clone3"].Allowed())
	var ioctls []uint64
	for _, sc := range all {
		if sc.Name == "ioctl" {
			require.True(t, sc.Allowed())
			require.Len(t, sc.Args, 1)
			require.Equal(t, uint(1), sc.Args[0].Index)
			require.Equal(t, specs.OpEqualTo, sc.Args[0].Op)
			ioctls = append(ioctls, sc.Args[0].Value)
		}
	}
	require.Equal(t, []uint64{0x5401, 0x5413, 0x541b, 0x40049409}, ioctls, "TCGETS, TIOCGWINSZ, FIONREAD, FICLONE")
	require.Equal(t, []Arg{{Index: 0, Value: 0, Op: specs.OpEqualTo}}, byName["prlimit64"].Args, "own limits only")
	require.NotContains(t, byName, "socket")
	require.Empty(t, byName["openat"].Args)

	names := p.Names()
	require.True(t, slices.IsSorted(names))
	require.Len(t, names, len(slices.Compact(slices.Clone(names))))
	require.NotContains(t, names, "clone3")
}

func TestValidateRejects(t *testing.T) {
	const (
		allowRead = "  - names: [read]\n    action: SCMP_ACT_ALLOW\n"
	)
	for _, tc := range []struct {
		name     string
		yaml     string
		want     string
		sentinel error
	}{
		{
			name:     "unknown syscall",
			yaml:     "syscalls:\n  - names: [read, frobnicate_files]\n    action: SCMP_ACT_ALLOW\n",
			want:     `syscalls[0]: unknown syscall "frobnicate_files"`,
			sentinel: ErrUnknownSyscall,
		},
		{
			name:     "empty syscall name",
			yaml:     "syscalls:\n  - names: ['']\n    action: SCMP_ACT_ALLOW\n",
			want:     `unknown syscall ""`,
			sentinel: ErrUnknownSyscall,
		},
		{
			name:     "unknown rule action",
			yaml:     "syscalls:\n  - names: [read]\n    action: SCMP_ACT_PERMIT\n",
			want:     `syscalls[0]: unknown or unsupported action "SCMP_ACT_PERMIT"`,
			sentinel: ErrUnknownAction,
		},
		{
			name:     "notify needs a listener",
			yaml:     "syscalls:\n  - names: [read]\n    action: SCMP_ACT_NOTIFY\n",
			want:     `"SCMP_ACT_NOTIFY"`,
			sentinel: ErrUnknownAction,
		},
		{
			name:     "unknown default action",
			yaml:     "defaultAction: SCMP_ACT_MAYBE\n",
			want:     `default action: unknown or unsupported action "SCMP_ACT_MAYBE"`,
			sentinel: ErrUnknownAction,
		},
		{
			name:     "unknown operator",
			yaml:     "syscalls:\n  - names: [socket]\n    action: SCMP_ACT_ALLOW\n    args: [{index: 0, value: 1, op: SCMP_CMP_LIKE}]\n",
			want:     `syscalls[0]: args[0]: unknown operator "SCMP_CMP_LIKE"`,
			sentinel: ErrUnknownOperator,
		},
		{
			name:     "unknown architecture",
			yaml:     "architectures: [SCMP_ARCH_Z80]\n",
			want:     `unknown or unsupported architecture "SCMP_ARCH_Z80"`,
			sentinel: ErrUnknownArchitecture,
		},
		{
			name: "allow by default",
			yaml: "defaultAction: SCMP_ACT_ALLOW\n",
			want: "must be an allowlist",
		},
		{
			name: "log by default",
			yaml: "defaultAction: SCMP_ACT_LOG\n",
			want: "must be an allowlist",
		},
		{
			name: "no names",
			yaml: "syscalls:\n  - names: []\n    action: SCMP_ACT_ALLOW\n",
			want: "syscalls[0]: rule names no syscall",
		},
		{
			name: "errno on an allow rule",
			yaml: "syscalls:\n  - names: [read]\n    action: SCMP_ACT_ALLOW\n    errnoRet: 1\n",
			want: "errnoRet is only for SCMP_ACT_ERRNO",
		},
		{
			name: "errno zero fakes success",
			yaml: "syscalls:\n  - names: [mount]\n    action: SCMP_ACT_ERRNO\n    errnoRet: 0\n",
			want: "errnoRet 0: want 1 to 4095",
		},
		{
			name: "default errno on a kill default",
			yaml: "defaultAction: SCMP_ACT_KILL_PROCESS\ndefaultErrnoRet: 1\n",
			want: "default action: errnoRet is only for SCMP_ACT_ERRNO",
		},
		{
			name: "rule repeats the default",
			yaml: "syscalls:\n  - names: [mount]\n    action: SCMP_ACT_ERRNO\n",
			want: "repeats the default action",
		},
		{
			name: "argument index",
			yaml: "syscalls:\n  - names: [socket]\n    action: SCMP_ACT_ALLOW\n    args: [{index: 6, value: 1, op: SCMP_CMP_EQ}]\n",
			want: "index 6",
		},
		{
			name: "two conditions on one argument",
			yaml: "syscalls:\n  - names: [socket]\n    action: SCMP_ACT_ALLOW\n    args: [{index: 0, value: 1, op: SCMP_CMP_GE}, {index: 0, value: 2, op: SCMP_CMP_LE}]\n",
			want: "a second condition on argument 0",
		},
		{
			name: "valueTwo without masked_eq",
			yaml: "syscalls:\n  - names: [socket]\n    action: SCMP_ACT_ALLOW\n    args: [{index: 0, value: 1, valueTwo: 2, op: SCMP_CMP_EQ}]\n",
			want: "valueTwo is only for SCMP_CMP_MASKED_EQ",
		},
		{
			name: "mask and value swapped",
			yaml: "syscalls:\n  - names: [clone]\n    action: SCMP_ACT_ALLOW\n    args: [{index: 0, value: 0, valueTwo: 0x7e020000, op: SCMP_CMP_MASKED_EQ}]\n",
			want: "bits outside the mask",
		},
		{
			name: "unconditional overlap",
			yaml: "syscalls:\n" + allowRead + "  - names: [read]\n    action: SCMP_ACT_KILL\n",
			want: `syscalls[1]: "read" is also in syscalls[0]`,
		},
		{
			name: "named twice in one rule",
			yaml: "syscalls:\n  - names: [read, read]\n    action: SCMP_ACT_ALLOW\n",
			want: `"read" named twice`,
		},
		{
			name: "architecture twice",
			yaml: "architectures: [SCMP_ARCH_X86_64, SCMP_ARCH_X86_64]\n",
			want: "listed twice",
		},
		{
			name: "socket condition on 32-bit x86",
			yaml: "architectures: [SCMP_ARCH_X86_64, SCMP_ARCH_X86]\nsyscalls:\n  - names: [socket]\n    action: SCMP_ACT_ALLOW\n    args: [{index: 0, value: 1, op: SCMP_CMP_EQ}]\n",
			want: `argument conditions on "socket" cannot be enforced on SCMP_ARCH_X86`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Load([]byte(tc.yaml))
			require.Nil(t, p)
			require.ErrorContains(t, err, tc.want)
			require.True(t, errdefs.IsInvalidArgument(err), "%v", err)
			if tc.sentinel != nil {
				require.ErrorIs(t, err, tc.sentinel)
			}
		})
	}
}

func TestValidateUnknownTarget(t *testing.T) {
	err := Default().Validate("z80")
	require.ErrorIs(t, err, ErrUnknownArchitecture)
	require.True(t, errdefs.IsInvalidArgument(err))

	err = (*Profile)(nil).Validate("amd64")
	require.True(t, errdefs.IsInvalidArgument(err))
}

func TestZeroProfileDeniesEverything(t *testing.T) {
	s, err := (&Profile{}).Spec()
	require.NoError(t, err)
	require.Equal(t, specs.ActErrno, s.DefaultAction)
	require.Equal(t, uint(1), *s.DefaultErrnoRet)
	require.Empty(t, s.Syscalls)
}

func TestLoadJSON(t *testing.T) {
	p, err := Load([]byte(`{"defaultAction": "SCMP_ACT_KILL_PROCESS",
		"syscalls": [{"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
		             {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}]}]}`))
	require.NoError(t, err)
	require.Equal(t, []string{"read", "socket", "write"}, p.Names())
	s, err := p.Spec()
	require.NoError(t, err)
	require.Nil(t, s.DefaultErrnoRet)
}

func TestSpec(t *testing.T) {
	p := Default()
	s, err := p.Spec()
	require.NoError(t, err)

	require.Equal(t, specs.ActErrno, s.DefaultAction)
	require.NotNil(t, s.DefaultErrnoRet)
	require.Equal(t, uint(1), *s.DefaultErrnoRet, "EPERM")
	switch runtime.GOARCH {
	case "amd64":
		require.Equal(t, []specs.Arch{specs.ArchX86_64, specs.ArchX32}, s.Architectures)
	case "arm64":
		require.Equal(t, []specs.Arch{specs.ArchAARCH64, specs.ArchARM}, s.Architectures)
	}

	rule := func(name string) specs.LinuxSyscall {
		t.Helper()
		for _, r := range s.Syscalls {
			if slices.Contains(r.Names, name) {
				return r
			}
		}
		t.Fatalf("no rule names %s", name)
		return specs.LinuxSyscall{}
	}
	for _, name := range []string{"ioctl", "prlimit64"} {
		r := rule(name)
		require.Equal(t, specs.ActAllow, r.Action)
		require.Len(t, r.Args, 1, "%s is allowed only under a condition", name)
	}

	clone := rule("clone")
	require.Equal(t, specs.ActAllow, clone.Action)
	const namespaceFlags = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
	require.Equal(t, []specs.LinuxSeccompArg{{Index: 0, Value: namespaceFlags, ValueTwo: 0, Op: specs.OpMaskedEqual}}, clone.Args)

	clone3 := rule("clone3")
	require.Equal(t, specs.ActErrno, clone3.Action)
	require.Equal(t, uint(38), *clone3.ErrnoRet, "ENOSYS")

	// The spec shares nothing with the profile.
	rule("prlimit64").Args[0].Value = 2
	s.Syscalls[0].Names[0] = "changed"
	again, err := p.Spec()
	require.NoError(t, err)
	require.Equal(t, uint64(0), ruleIn(again, "prlimit64").Args[0].Value)
	require.NotEqual(t, "changed", again.Syscalls[0].Names[0])
}

func ruleIn(s *specs.LinuxSeccomp, name string) specs.LinuxSyscall {
	for _, r := range s.Syscalls {
		if slices.Contains(r.Names, name) {
			return r
		}
	}
	return specs.LinuxSyscall{}
}

func TestWithProfile(t *testing.T) {
	ctx := namespaces.WithNamespace(context.Background(), "test")
	p := Default()
	want, err := p.Spec()
	require.NoError(t, err)

	s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: t.Name()}, WithProfile(p))
	require.NoError(t, err)
	require.Equal(t, want, s.Linux.Seccomp)

	// spec.Linux is created when missing.
	var bare oci.Spec
	require.NoError(t, WithProfile(p)(ctx, nil, &containers.Container{ID: t.Name()}, &bare))
	require.Equal(t, want, bare.Linux.Seccomp)

	_, err = oci.GenerateSpec(ctx, nil, &containers.Container{ID: t.Name()}, WithProfile(nil))
	require.True(t, errdefs.IsInvalidArgument(err), "%v", err)

	bad := &Profile{Rules: []Rule{{Names: []string{"no_such_syscall"}, Action: specs.ActAllow}}}
	_, err = oci.GenerateSpec(ctx, nil, &containers.Container{ID: t.Name()}, WithProfile(bad))
	require.ErrorIs(t, err, ErrUnknownSyscall)
}

// TestCompile hands the converted profile to libseccomp the way runc does
// and exports the BPF program, proving libseccomp accepts every rule. The
// filter is not loaded into the test process.
func TestCompile(t *testing.T) {
	s, err := Default().Spec()
	require.NoError(t, err)
	f := compile(t, s)
	defer f.Release()

	out, err := os.CreateTemp(t.TempDir(), "filter.bpf")
	require.NoError(t, err)
	defer out.Close()
	require.NoError(t, f.ExportBPF(out))
	info, err := out.Stat()
	require.NoError(t, err)
	require.NotZero(t, info.Size())
	require.Zero(t, info.Size()%8, "struct sock_filter is 8 bytes")
	t.Logf("%d syscall names, %d BPF instructions", len(Default().Syscalls()), info.Size()/8)
}

// TestBPF: BPF's program is byte for byte the one the test's own
// runc-style compile exports, for the built-in profile and for one that
// uses an errno rule, conditions and a kill default.
func TestBPF(t *testing.T) {
	eacces := uint(13)
	custom := &Profile{
		DefaultAction: specs.ActKillProcess,
		Rules: []Rule{
			{Names: []string{"read", "write"}, Action: specs.ActAllow},
			{Names: []string{"openat"}, Action: specs.ActErrno, ErrnoRet: &eacces},
			{Names: []string{"socket"}, Action: specs.ActAllow, Args: []Arg{{Index: 0, Value: 1, Op: specs.OpEqualTo}}},
			{Names: []string{"ioctl"}, Action: specs.ActAllow, Args: []Arg{{Index: 1, Value: 0xffffffff, ValueTwo: 0x5401, Op: specs.OpMaskedEqual}}},
		},
	}
	for name, p := range map[string]*Profile{"default": Default(), "custom": custom} {
		t.Run(name, func(t *testing.T) {
			s, err := p.Spec()
			require.NoError(t, err)
			got, err := BPF(s)
			require.NoError(t, err)
			f := compile(t, s)
			defer f.Release()
			want, err := os.CreateTemp(t.TempDir(), "filter.bpf")
			require.NoError(t, err)
			defer want.Close()
			require.NoError(t, f.ExportBPF(want))
			wantBytes, err := os.ReadFile(want.Name())
			require.NoError(t, err)
			require.Equal(t, wantBytes, got)
		})
	}
}

// TestBPFRefuses: a missing section and names libseccomp does not know
// fail with errdefs.ErrInvalidArgument.
func TestBPFRefuses(t *testing.T) {
	_, err := BPF(nil)
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	for name, s := range map[string]*specs.LinuxSeccomp{
		"action":   {DefaultAction: "SCMP_ACT_NOPE"},
		"syscall":  {DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{{Names: []string{"no_such_call"}, Action: specs.ActAllow}}},
		"operator": {DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{{Names: []string{"read"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Op: "SCMP_CMP_NOPE"}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := BPF(s)
			require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
		})
	}
}

// compile builds a libseccomp filter from s the way runc's
// libcontainer/seccomp does: one rule per name, conditions from args.
func compile(t testing.TB, s *specs.LinuxSeccomp) *libseccomp.ScmpFilter {
	t.Helper()
	f, err := libseccomp.NewFilter(scmpAction(t, s.DefaultAction, s.DefaultErrnoRet))
	require.NoError(t, err)
	for _, a := range s.Architectures {
		arch, err := scmpArch(a)
		require.NoError(t, err)
		require.NoError(t, f.AddArch(arch), a)
	}
	ops := map[specs.LinuxSeccompOperator]libseccomp.ScmpCompareOp{
		specs.OpNotEqual:     libseccomp.CompareNotEqual,
		specs.OpLessThan:     libseccomp.CompareLess,
		specs.OpLessEqual:    libseccomp.CompareLessOrEqual,
		specs.OpEqualTo:      libseccomp.CompareEqual,
		specs.OpGreaterEqual: libseccomp.CompareGreaterEqual,
		specs.OpGreaterThan:  libseccomp.CompareGreater,
		specs.OpMaskedEqual:  libseccomp.CompareMaskedEqual,
	}
	for _, r := range s.Syscalls {
		action := scmpAction(t, r.Action, r.ErrnoRet)
		var conds []libseccomp.ScmpCondition
		for _, a := range r.Args {
			values := []uint64{a.Value}
			if a.Op == specs.OpMaskedEqual {
				values = append(values, a.ValueTwo)
			}
			c, err := libseccomp.MakeCondition(a.Index, ops[a.Op], values...)
			require.NoError(t, err)
			conds = append(conds, c)
		}
		for _, name := range r.Names {
			nr, err := libseccomp.GetSyscallFromName(name)
			require.NoError(t, err, name)
			if len(conds) == 0 {
				err = f.AddRule(nr, action)
			} else {
				err = f.AddRuleConditional(nr, action, conds)
			}
			require.NoError(t, err, name)
		}
	}
	return f
}

func scmpAction(t testing.TB, a specs.LinuxSeccompAction, errno *uint) libseccomp.ScmpAction {
	t.Helper()
	switch a {
	case specs.ActAllow:
		return libseccomp.ActAllow
	case specs.ActErrno:
		e := uint(1)
		if errno != nil {
			e = *errno
		}
		return libseccomp.ActErrno.SetReturnCode(int16(e))
	case specs.ActKill, specs.ActKillThread:
		return libseccomp.ActKillThread
	case specs.ActKillProcess:
		return libseccomp.ActKillProcess
	case specs.ActTrap:
		return libseccomp.ActTrap
	case specs.ActLog:
		return libseccomp.ActLog
	}
	t.Fatalf("action %s", a)
	return libseccomp.ActInvalid
}
