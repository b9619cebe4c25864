package profiles

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/corral-sandbox/corral/internal/yamlstrict"
	units "github.com/docker/go-units"
)

//go:embed builtin/*.yaml
var builtin embed.FS

// DefaultName is the profile used when the launcher names none.
const DefaultName = "docs"

// Env is the fixed environment of every container: nothing of the
// supervisor's own environment (where API keys live) reaches it, and
// callers cannot set variables.
var Env = []string{
	"PATH=/usr/bin:/bin",
	"LANG=C.UTF-8",
	"HOME=/tmp",
	"TMPDIR=/tmp",
	// For a profile that offers git: no system or global configuration,
	// no pager, no prompts, no lock files (git(1) ENVIRONMENT).
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_PAGER=cat",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_OPTIONAL_LOCKS=0",
}

// Profile is one named policy. The zero value of each resource field means
// the default (the tight one), never "unlimited".
type Profile struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Commands names the allowed commands; each must have a grammar in the
	// built-in tool set (profiles/builtin/tools.yaml).
	Commands []string `yaml:"commands"`
	// Expose names built-in hide lists the view does not apply
	// (names.Lists: "agent-config", "secrets", "gitignore"). The zero
	// value exposes none: a profile that does not say otherwise is the
	// safe one. An unknown name fails validation.
	Expose []string `yaml:"expose,omitempty"`
	// ExposeAgentConfig is the older spelling of
	// `expose: [agent-config]`, still accepted.
	ExposeAgentConfig bool `yaml:"expose_agent_config"`
	// Seccomp names the seccomp profile; only "default" exists.
	Seccomp   string    `yaml:"seccomp"`
	Resources Resources `yaml:"resources"`
	// TTL is how long a persistent session of this profile may go unused
	// before it expires: `corral session prune` (and every corral start)
	// removes it, keeping its change set as a patch file. A Go duration
	// from MinIdleTTL to MaxIdleTTL; "" means DefaultIdleTTL. Read it with
	// IdleTTL.
	TTL string `yaml:"idle_ttl,omitempty"`
	// PoolDepth is how many containers a long-lived owner of a session
	// (the MCP server, the daemon) keeps created ahead of the calls, under
	// its own host-wide cap: 1 to MaxPoolDepth, 0 meaning
	// DefaultPoolDepth. Read it with Depth.
	PoolDepth int `yaml:"pool_depth,omitempty"`
	// PoolMaxDepth is how deep the pool may grow on bursts: a call that
	// finds no container ready doubles the session's depth, up to
	// PoolMaxDepth (and half of the owner's host-wide cap); after a
	// minute without calls (the owner's idle time) it shrinks back to
	// PoolDepth, destroying the extra containers. Depth to MaxPoolDepth,
	// 0 meaning DefaultPoolMaxDepth (raised to Depth when lower). Read it
	// with MaxDepth; PoolMaxDepth equal to PoolDepth keeps the depth
	// fixed.
	PoolMaxDepth int `yaml:"pool_max_depth,omitempty"`

	// Grammars are the grammars of Commands, filled in by Load.
	Grammars map[string]*allowlist.Command `yaml:"-"`
}

// Resources are the per-container limits. Sizes are written with units
// ("512MiB"), durations as Go durations ("60s").
type Resources struct {
	Memory      string  `yaml:"memory"`       // memory.limit (and memory+swap), bytes
	Pids        int64   `yaml:"pids"`         // pids.max
	CPUs        float64 `yaml:"cpus"`         // CFS quota in CPUs
	Timeout     string  `yaml:"timeout"`      // wall clock, then SIGKILL
	Output      string  `yaml:"output"`       // cap on each of stdout, stderr
	WriteArea   string  `yaml:"write_area"`   // size of the tmpfs under the upperdir
	WriteInodes int64   `yaml:"write_inodes"` // nr_inodes of that tmpfs
	Tmp         string  `yaml:"tmp"`          // size of the /tmp tmpfs
}

// Limits are Resources in numbers.
type Limits struct {
	MemoryBytes    int64
	Pids           int64
	CPUs           float64
	Timeout        time.Duration
	OutputBytes    int64
	WriteAreaBytes int64
	WriteInodes    int64
	TmpBytes       int64
}

// Session lifetime and pool bounds (Profile.TTL, Profile.PoolDepth).
const (
	DefaultIdleTTL      = 24 * time.Hour
	MinIdleTTL          = time.Second
	MaxIdleTTL          = 30 * 24 * time.Hour
	DefaultPoolDepth    = 2
	DefaultPoolMaxDepth = 8
	MaxPoolDepth        = 16
)

var defaultResources = Resources{
	Memory: "512MiB", Pids: 64, CPUs: 1, Timeout: "60s", Output: "1MiB",
	WriteArea: "64MiB", WriteInodes: 8192, Tmp: "16MiB",
}

// Limits converts r, filling zero fields with the defaults. It fails with
// errdefs.ErrInvalidArgument naming the field on a malformed or
// out-of-range value.
func (r Resources) Limits() (Limits, error) {
	d := defaultResources
	pick := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	var l Limits
	var err error
	size := func(field, v string, min, max int64) int64 {
		if err != nil {
			return 0
		}
		n, e := units.RAMInBytes(v)
		if e != nil || n < min || n > max {
			err = fmt.Errorf("resources.%s %q: %w: want a size from %s to %s", field, v, errdefs.ErrInvalidArgument,
				units.BytesSize(float64(min)), units.BytesSize(float64(max)))
		}
		return n
	}
	l.MemoryBytes = size("memory", pick(r.Memory, d.Memory), 16<<20, 64<<30)
	l.OutputBytes = size("output", pick(r.Output, d.Output), 1<<10, 256<<20)
	l.WriteAreaBytes = size("write_area", pick(r.WriteArea, d.WriteArea), 1<<20, 16<<30)
	l.TmpBytes = size("tmp", pick(r.Tmp, d.Tmp), 1<<20, 4<<30)
	if err != nil {
		return Limits{}, err
	}
	l.Timeout, err = time.ParseDuration(pick(r.Timeout, d.Timeout))
	if err != nil || l.Timeout < 100*time.Millisecond || l.Timeout > 24*time.Hour {
		return Limits{}, fmt.Errorf("resources.timeout %q: %w: want a duration from 100ms to 24h", r.Timeout, errdefs.ErrInvalidArgument)
	}
	l.Pids, l.CPUs, l.WriteInodes = r.Pids, r.CPUs, r.WriteInodes
	if l.Pids == 0 {
		l.Pids = d.Pids
	}
	if l.CPUs == 0 {
		l.CPUs = d.CPUs
	}
	if l.WriteInodes == 0 {
		l.WriteInodes = d.WriteInodes
	}
	switch {
	case l.Pids < 4 || l.Pids > 65536:
		return Limits{}, fmt.Errorf("resources.pids %d: %w: want 4 to 65536", l.Pids, errdefs.ErrInvalidArgument)
	case l.CPUs < 0.05 || l.CPUs > 256:
		return Limits{}, fmt.Errorf("resources.cpus %g: %w: want 0.05 to 256", l.CPUs, errdefs.ErrInvalidArgument)
	case l.WriteInodes < 16 || l.WriteInodes > 1<<24:
		return Limits{}, fmt.Errorf("resources.write_inodes %d: %w: want 16 to 16777216", l.WriteInodes, errdefs.ErrInvalidArgument)
	}
	return l, nil
}

// Builtins lists the names of the embedded profiles.
func Builtins() []string {
	entries, _ := builtin.ReadDir("builtin")
	var names []string
	for _, e := range entries {
		n := strings.TrimSuffix(e.Name(), ".yaml")
		if n != "tools" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Load returns the profile nameOrPath names: an embedded profile by name
// ("" means DefaultName), or, when it contains a path separator or ends in
// ".yaml", a file the launcher names. It parses strictly (unknown fields
// fail), fills in the grammars and validates. Errors wrap
// errdefs.ErrNotFound (no such profile) or errdefs.ErrInvalidArgument.
func Load(nameOrPath string) (*Profile, error) {
	if nameOrPath == "" {
		nameOrPath = DefaultName
	}
	var data []byte
	var err error
	fileName := nameOrPath
	if strings.ContainsRune(nameOrPath, filepath.Separator) || strings.HasSuffix(nameOrPath, ".yaml") {
		data, err = os.ReadFile(nameOrPath)
	} else {
		fileName = "builtin/" + nameOrPath + ".yaml"
		if nameOrPath == "tools" {
			return nil, fmt.Errorf("profile %q: %w (built-ins: %s)", nameOrPath, errdefs.ErrNotFound, strings.Join(Builtins(), ", "))
		}
		data, err = builtin.ReadFile(fileName)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("profile %q: %w (built-ins: %s)", nameOrPath, errdefs.ErrNotFound, strings.Join(Builtins(), ", "))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading profile %q: %w", nameOrPath, err)
	}
	p, err := parse(fileName, data)
	var yerr *yamlstrict.Error
	if errors.As(err, &yerr) {
		return nil, err // names the file and line already
	}
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", fileName, err)
	}
	return p, nil
}

// Parse decodes one profile document strictly (internal/yamlstrict: an
// unknown key is an error naming it and its line) and validates it.
func Parse(data []byte) (*Profile, error) {
	return parse("profile", data)
}

// parse is Parse with the file name that decoding errors name.
func parse(name string, data []byte) (*Profile, error) {
	var p Profile
	if err := yamlstrict.Decode(name, data, &p); err != nil {
		return nil, err
	}
	grammars, err := Grammars()
	if err != nil {
		return nil, err
	}
	p.Grammars = map[string]*allowlist.Command{}
	for _, c := range p.Commands {
		if g, ok := grammars[c]; ok {
			p.Grammars[c] = g
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate runs the ordered checks; the first failure is returned, wrapping
// errdefs.ErrInvalidArgument.
func (p *Profile) Validate() error {
	for _, check := range []func(*Profile) error{
		checkName,
		checkCommands,
		checkExpose,
		checkSeccomp,
		checkResources,
		checkSession,
	} {
		if err := check(p); err != nil {
			if errdefs.IsInvalidArgument(err) {
				return err // already says so: no second "invalid argument"
			}
			return fmt.Errorf("%w: %w", errdefs.ErrInvalidArgument, err)
		}
	}
	return nil
}

func checkName(p *Profile) error {
	if p.Name == "" {
		return errors.New("name is empty")
	}
	return nil
}

func checkCommands(p *Profile) error {
	if len(p.Commands) == 0 {
		return errors.New("commands is empty")
	}
	seen := map[string]bool{}
	for _, c := range p.Commands {
		if seen[c] {
			return fmt.Errorf("command %q listed twice", c)
		}
		seen[c] = true
		if allowlist.NeverAllowed(c) {
			return fmt.Errorf("command %q can never be allowed (it runs other programs, a shell or the network)", c)
		}
		if p.Grammars[c] == nil {
			return fmt.Errorf("command %q has no grammar in the built-in tool set", c)
		}
	}
	return nil
}

func checkExpose(p *Profile) error {
	seen := map[string]bool{}
	for _, e := range p.Expose {
		if _, err := names.ParseList(e); err != nil {
			return fmt.Errorf("expose: %w", err)
		}
		if seen[e] {
			return fmt.Errorf("expose: %q listed twice", e)
		}
		seen[e] = true
	}
	return nil
}

func checkSeccomp(p *Profile) error {
	if p.Seccomp != "" && p.Seccomp != "default" {
		return fmt.Errorf("seccomp %q is unknown (known: default)", p.Seccomp)
	}
	return nil
}

func checkResources(p *Profile) error {
	_, err := p.Resources.Limits()
	return err
}

func checkSession(p *Profile) error {
	if _, err := p.idleTTL(); err != nil {
		return err
	}
	if p.PoolDepth < 0 || p.PoolDepth > MaxPoolDepth {
		return fmt.Errorf("pool_depth %d: want 1 to %d (0: the default, %d)", p.PoolDepth, MaxPoolDepth, DefaultPoolDepth)
	}
	if p.PoolMaxDepth != 0 && (p.PoolMaxDepth < p.Depth() || p.PoolMaxDepth > MaxPoolDepth) {
		return fmt.Errorf("pool_max_depth %d: want pool_depth (%d) to %d (0: the default, %d)", p.PoolMaxDepth, p.Depth(), MaxPoolDepth, DefaultPoolMaxDepth)
	}
	return nil
}

func (p *Profile) idleTTL() (time.Duration, error) {
	if p.TTL == "" {
		return DefaultIdleTTL, nil
	}
	d, err := time.ParseDuration(p.TTL)
	if err != nil || d < MinIdleTTL || d > MaxIdleTTL {
		return 0, fmt.Errorf("idle_ttl %q: want a duration from %s to %s (0 is refused: a session always ends)", p.TTL, MinIdleTTL, MaxIdleTTL)
	}
	return d, nil
}

// IdleTTL returns how long a persistent session may go unused before it
// expires (Validate has checked TTL).
func (p *Profile) IdleTTL() time.Duration {
	d, err := p.idleTTL()
	if err != nil {
		panic(fmt.Sprintf("profile %q was not validated: %v", p.Name, err))
	}
	return d
}

// Depth returns how many containers to keep created ahead.
func (p *Profile) Depth() int {
	if p.PoolDepth == 0 {
		return DefaultPoolDepth
	}
	return p.PoolDepth
}

// MaxDepth returns how deep the pool may grow on bursts: PoolMaxDepth,
// else DefaultPoolMaxDepth, never below Depth.
func (p *Profile) MaxDepth() int {
	if p.PoolMaxDepth != 0 {
		return p.PoolMaxDepth
	}
	return max(DefaultPoolMaxDepth, p.Depth())
}

// Limits returns the profile's resource limits (Validate has checked them).
func (p *Profile) Limits() Limits {
	l, err := p.Resources.Limits()
	if err != nil {
		panic(fmt.Sprintf("profile %q was not validated: %v", p.Name, err))
	}
	return l
}

// HideLists returns the built-in hide lists the view applies: every list
// of names.Lists the profile does not expose (Expose, or the older
// ExposeAgentConfig), in names.Lists order.
func (p *Profile) HideLists() []names.List {
	var out []names.List
	for _, l := range names.Lists() {
		if slices.Contains(p.Expose, string(l)) || (l == names.AgentConfig && p.ExposeAgentConfig) {
			continue
		}
		out = append(out, l)
	}
	return out
}
