package seccomp

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	"go.yaml.in/yaml/v3"
)

// Profile is a seccomp filter as data: a default action for every syscall no
// rule names, and rules that name syscalls, optionally narrowed by argument
// conditions. Field names and values follow the runtime-spec
// (config-linux.md#seccomp), so a profile reads like the "seccomp" object of
// an OCI config.json, in YAML or JSON.
//
// The zero Profile denies every syscall with EPERM.
type Profile struct {
	// DefaultAction applies to every syscall no rule matches. Empty means
	// SCMP_ACT_ERRNO. It must deny: SCMP_ACT_ALLOW and SCMP_ACT_LOG are
	// refused, a profile is an allowlist.
	DefaultAction specs.LinuxSeccompAction `json:"defaultAction,omitempty" yaml:"defaultAction,omitempty"`
	// DefaultErrnoRet is the errno an SCMP_ACT_ERRNO default returns; nil
	// means EPERM.
	DefaultErrnoRet *uint `json:"defaultErrnoRet,omitempty" yaml:"defaultErrnoRet,omitempty"`
	// Architectures lists the ABIs the filter covers, as SCMP_ARCH_* names.
	// Empty means DefaultArchitectures of the target.
	Architectures []specs.Arch `json:"architectures,omitempty" yaml:"architectures,omitempty"`
	// Rules say what happens to the syscalls they name.
	Rules []Rule `json:"syscalls,omitempty" yaml:"syscalls,omitempty"`
}

// Rule applies Action to the syscalls in Names whose arguments satisfy every
// condition in Args (all of them: the conditions are ANDed).
type Rule struct {
	// Names are libseccomp syscall names, e.g. "openat", "newfstatat".
	Names []string `json:"names" yaml:"names"`
	// Action is one of KnownActions.
	Action specs.LinuxSeccompAction `json:"action" yaml:"action"`
	// Args narrow the rule; empty means every call.
	Args []Arg `json:"args,omitempty" yaml:"args,omitempty"`
	// ErrnoRet is the errno an SCMP_ACT_ERRNO rule returns; nil means EPERM.
	// Only SCMP_ACT_ERRNO rules may set it.
	ErrnoRet *uint `json:"errnoRet,omitempty" yaml:"errnoRet,omitempty"`
}

// Arg is one condition on a syscall argument: argument Index (0 to 5)
// compared with Value by Op. For SCMP_CMP_MASKED_EQ, Value is the mask and
// ValueTwo the result the masked argument must equal: (arg & Value) ==
// ValueTwo. Other operators ignore ValueTwo, which must then be 0.
type Arg struct {
	Index    uint                       `json:"index" yaml:"index"`
	Value    uint64                     `json:"value" yaml:"value"`
	ValueTwo uint64                     `json:"valueTwo,omitempty" yaml:"valueTwo,omitempty"`
	Op       specs.LinuxSeccompOperator `json:"op" yaml:"op"`
}

//go:embed default.yaml
var defaultYAML []byte

var defaultProfile = sync.OnceValues(LoadDefault)

// Load parses a profile from YAML (or JSON, a subset) and validates it for
// the running architecture (runtime.GOARCH). Fields the Profile type does
// not have, duplicate keys and more than one document are errors. Every
// error wraps errdefs.ErrInvalidArgument, except that Load fails with
// errdefs.ErrNotImplemented where libseccomp is not available.
func Load(data []byte) (*Profile, error) {
	p, err := parse(data)
	if err != nil {
		return nil, err
	}
	if err := p.Validate(runtime.GOARCH); err != nil {
		return nil, err
	}
	return p, nil
}

// LoadDefault parses and validates the built-in profile (default.yaml) and
// returns a copy the caller owns. It fails only if the host's libseccomp does
// not know a syscall the profile names, or libseccomp is not available.
func LoadDefault() (*Profile, error) {
	p, err := Load(defaultYAML)
	if err != nil {
		return nil, fmt.Errorf("loading the built-in seccomp profile: %w", err)
	}
	return p, nil
}

// Default returns a copy of the built-in profile, validated once per
// process. It returns nil if the profile does not validate on this host
// (LoadDefault says why); WithProfile refuses a nil profile, so a caller
// that ignores this still fails closed.
func Default() *Profile {
	p, err := defaultProfile()
	if err != nil {
		return nil
	}
	return p.clone()
}

func parse(data []byte) (*Profile, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var p Profile
	if err := dec.Decode(&p); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("empty document")
		}
		return nil, fmt.Errorf("parsing seccomp profile: %w: %w", err, errdefs.ErrInvalidArgument)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parsing seccomp profile: more than one document: %w", errdefs.ErrInvalidArgument)
	}
	return &p, nil
}

// Validate checks the profile for the target architecture arch, given as a
// GOARCH ("amd64", "arm64"), a libseccomp name ("x86_64", "aarch64") or an
// SCMP_ARCH_* name; "" means runtime.GOARCH. It stops at the first failing
// check and returns an error naming the rule and the syscall, wrapping one
// of this package's sentinels (where one applies) and
// errdefs.ErrInvalidArgument. Without libseccomp it returns an error
// wrapping errdefs.ErrNotImplemented.
func (p *Profile) Validate(arch string) error {
	_, err := p.validate(arch)
	return err
}

// validate is Validate, returning what the profile was validated for.
func (p *Profile) validate(arch string) (target, error) {
	if p == nil {
		return target{}, fmt.Errorf("validating seccomp profile: nil profile: %w", errdefs.ErrInvalidArgument)
	}
	if arch == "" {
		arch = runtime.GOARCH
	}
	if err := available(); err != nil {
		return target{}, fmt.Errorf("validating seccomp profile for %s: %w", arch, err)
	}
	t, err := p.targetFor(arch)
	if err == nil {
		err = runChecks(p, t)
	}
	if err != nil {
		return target{}, fmt.Errorf("validating seccomp profile for %s: %w: %w", arch, err, errdefs.ErrInvalidArgument)
	}
	return t, nil
}

// target is what a profile is validated and converted for.
type target struct {
	// arch is the architecture asked for.
	arch specs.Arch
	// arches are the filter's architectures: the profile's own, or the
	// defaults for arch.
	arches []specs.Arch
}

func (p *Profile) targetFor(arch string) (target, error) {
	a, err := parseArch(arch)
	if err != nil {
		return target{}, err
	}
	t := target{arch: a, arches: p.Architectures}
	if len(t.arches) == 0 {
		t.arches = defaultArchitectures(a)
	}
	return t, nil
}

// check is one validation step; runChecks runs them in order.
type check func(*Profile, target) error

func runChecks(p *Profile, t target) error {
	checks := []check{
		checkArchitectures,
		checkDefault,
		checkRules,
		checkOverlaps,
	}
	for _, c := range checks {
		if err := c(p, t); err != nil {
			return err
		}
	}
	return nil
}

// checkArchitectures: every listed architecture is known, none is listed
// twice, and the host's libseccomp handles them and the target.
func checkArchitectures(p *Profile, t target) error {
	seen := make(map[specs.Arch]bool)
	for _, a := range p.Architectures {
		if !slices.Contains(knownArches, a) {
			return fmt.Errorf("%w %q (known: %v)", ErrUnknownArchitecture, a, knownArches)
		}
		if seen[a] {
			return fmt.Errorf("architecture %q listed twice", a)
		}
		seen[a] = true
	}
	for _, a := range append([]specs.Arch{t.arch}, t.arches...) {
		if err := archSupported(a); err != nil {
			return fmt.Errorf("architecture %q: %w", a, err)
		}
	}
	return nil
}

// checkDefault: the default action is known and denies; an errno is set
// only with SCMP_ACT_ERRNO and is a valid errno.
func checkDefault(p *Profile, _ target) error {
	a := p.defaultAction()
	if !slices.Contains(knownActions, a) {
		return fmt.Errorf("default action: %w %q (known: %v)", ErrUnknownAction, a, knownActions)
	}
	if a == specs.ActAllow || a == specs.ActLog {
		return fmt.Errorf("default action %s lets every unnamed syscall run: a profile must be an allowlist", a)
	}
	if err := checkErrno(a, p.DefaultErrnoRet); err != nil {
		return fmt.Errorf("default action: %w", err)
	}
	return nil
}

// checkRules: every rule names syscalls libseccomp knows for the target,
// with a known action and well-formed argument conditions, and does not
// repeat the default.
func checkRules(p *Profile, t target) error {
	for i, r := range p.Rules {
		if err := checkRule(p, t, r); err != nil {
			return fmt.Errorf("syscalls[%d]: %w", i, err)
		}
	}
	return nil
}

func checkRule(p *Profile, t target, r Rule) error {
	if len(r.Names) == 0 {
		return errors.New("rule names no syscall")
	}
	if !slices.Contains(knownActions, r.Action) {
		return fmt.Errorf("%w %q (known: %v)", ErrUnknownAction, r.Action, knownActions)
	}
	if err := checkErrno(r.Action, r.ErrnoRet); err != nil {
		return err
	}
	if r.Action == p.defaultAction() && r.errno() == p.defaultErrno() {
		return fmt.Errorf("rule repeats the default action %s", r.Action)
	}
	if err := checkArgs(r.Args); err != nil {
		return err
	}
	for _, name := range r.Names {
		if err := checkName(t, name, len(r.Args) > 0); err != nil {
			return err
		}
	}
	return nil
}

// checkName: libseccomp resolves name on the target architecture. A name
// with argument conditions must also be a real syscall (not one of
// libseccomp's negative pseudo numbers) on every architecture of the filter:
// on 32-bit x86, for one, libseccomp turns a socket(2) rule into a
// socketcall(2) rule whose first argument is the call number, so
// "arg0 == AF_UNIX" would silently become "any socket(2) call".
func checkName(t target, name string, conditional bool) error {
	if name == "" {
		return fmt.Errorf("%w %q", ErrUnknownSyscall, name)
	}
	if _, err := syscallNumber(name, t.arch); err != nil {
		return fmt.Errorf("%w %q on %s", ErrUnknownSyscall, name, t.arch)
	}
	if !conditional {
		return nil
	}
	for _, a := range t.arches {
		nr, err := syscallNumber(name, a)
		if err != nil {
			return fmt.Errorf("%w %q on %s", ErrUnknownSyscall, name, a)
		}
		if nr < 0 {
			return fmt.Errorf("argument conditions on %q cannot be enforced on %s, where it is not a syscall of its own", name, a)
		}
	}
	return nil
}

// checkArgs: at most one condition per argument index (0 to 5), each with a
// known operator; ValueTwo only with SCMP_CMP_MASKED_EQ, and then within the
// mask (otherwise the condition could never hold).
func checkArgs(args []Arg) error {
	seen := make(map[uint]bool)
	for j, a := range args {
		if a.Index > 5 {
			return fmt.Errorf("args[%d]: index %d: syscalls have arguments 0 to 5", j, a.Index)
		}
		if seen[a.Index] {
			return fmt.Errorf("args[%d]: a second condition on argument %d", j, a.Index)
		}
		seen[a.Index] = true
		if !slices.Contains(knownOperators, a.Op) {
			return fmt.Errorf("args[%d]: %w %q (known: %v)", j, ErrUnknownOperator, a.Op, knownOperators)
		}
		if a.Op != specs.OpMaskedEqual && a.ValueTwo != 0 {
			return fmt.Errorf("args[%d]: valueTwo is only for %s", j, specs.OpMaskedEqual)
		}
		if a.Op == specs.OpMaskedEqual && a.ValueTwo&^a.Value != 0 {
			return fmt.Errorf("args[%d]: valueTwo %#x has bits outside the mask %#x (value is the mask)", j, a.ValueTwo, a.Value)
		}
	}
	return nil
}

// checkErrno: an errno only with SCMP_ACT_ERRNO, between 1 and 4095 (0
// would make a denied syscall look successful).
func checkErrno(a specs.LinuxSeccompAction, errno *uint) error {
	if errno == nil {
		return nil
	}
	if a != specs.ActErrno {
		return fmt.Errorf("errnoRet is only for %s, not %s", specs.ActErrno, a)
	}
	if *errno < 1 || *errno > maxErrno {
		return fmt.Errorf("errnoRet %d: want 1 to %d", *errno, maxErrno)
	}
	return nil
}

// checkOverlaps: a syscall named by a rule without conditions appears in no
// other rule; libseccomp refuses such conflicts, or one rule silently wins.
func checkOverlaps(p *Profile, _ target) error {
	first := make(map[string]int)
	for i, r := range p.Rules {
		for _, name := range r.Names {
			j, ok := first[name]
			if !ok {
				first[name] = i
				continue
			}
			if j == i {
				return fmt.Errorf("syscalls[%d]: %q named twice", i, name)
			}
			if len(r.Args) == 0 || len(p.Rules[j].Args) == 0 {
				return fmt.Errorf("syscalls[%d]: %q is also in syscalls[%d], and one of them has no conditions", i, name, j)
			}
		}
	}
	return nil
}

const (
	// eperm is EPERM, 1 on every Linux architecture.
	eperm = 1
	// maxErrno is the largest errno the kernel's syscall return
	// convention allows (MAX_ERRNO).
	maxErrno = 4095
)

func (p *Profile) defaultAction() specs.LinuxSeccompAction {
	if p.DefaultAction == "" {
		return specs.ActErrno
	}
	return p.DefaultAction
}

// defaultErrno is the errno of the default action, 0 if it is not
// SCMP_ACT_ERRNO.
func (p *Profile) defaultErrno() uint {
	return errnoOf(p.defaultAction(), p.DefaultErrnoRet)
}

// errno is the errno the rule returns, 0 if it is not SCMP_ACT_ERRNO.
func (r Rule) errno() uint {
	return errnoOf(r.Action, r.ErrnoRet)
}

func errnoOf(a specs.LinuxSeccompAction, errno *uint) uint {
	switch {
	case a != specs.ActErrno:
		return 0
	case errno == nil:
		return eperm
	default:
		return *errno
	}
}

func (p *Profile) clone() *Profile {
	c := &Profile{
		DefaultAction:   p.DefaultAction,
		DefaultErrnoRet: clonePtr(p.DefaultErrnoRet),
		Architectures:   slices.Clone(p.Architectures),
	}
	for _, r := range p.Rules {
		c.Rules = append(c.Rules, Rule{
			Names:    slices.Clone(r.Names),
			Action:   r.Action,
			Args:     slices.Clone(r.Args),
			ErrnoRet: clonePtr(r.ErrnoRet),
		})
	}
	return c
}

func clonePtr[T any](v *T) *T {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}
