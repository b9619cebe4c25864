package allowlist

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
)

// Limits on an argv. A limit refuses the whole invocation; it never
// downgrades to checking only part of it.
const (
	MaxArgs     = 4096
	MaxArgBytes = 64 << 10
	MaxArgvSize = 256 << 10
)

// Decision is a permitted invocation.
type Decision struct {
	// Argv is what will run: the name, the grammar's prepended flags,
	// every option spelled in full ("--lines=5", never "--li" or a
	// cluster), then "--" (where the tool honours it) and the operands.
	Argv []string
	// Reads and Writes are the canonical repository paths the argv names,
	// as checked.
	Reads  []string
	Writes []string
}

// Check decides whether argv may run under the command grammars cmds, the
// view v and the write scope. It returns the normalized Decision, or a
// *Refusal (which unwraps to errdefs.ErrPermissionDenied): KindCmd when
// argv[0] is not a bare name with a grammar (or is never allowed), KindArg
// for options, operands and limits, KindPath for a path-typed value that is
// invalid, hidden or outside the write scope. Any other error means the
// grammar or the scope is malformed (errdefs.ErrInvalidArgument).
func Check(cmds map[string]*Command, v View, scope Scope, argv []string) (Decision, error) {
	if err := checkLimits(argv); err != nil {
		return Decision{}, err
	}
	if err := scope.Validate(); err != nil {
		return Decision{}, err
	}
	name := argv[0]
	c, err := lookup(cmds, name)
	if err != nil {
		return Decision{}, err
	}
	if err := c.Validate(); err != nil {
		return Decision{}, err
	}
	ck := &checker{pc: pathChecker{v: v, scope: scope}, argv: argv}
	out := []string{name}
	if c.Syntax == SyntaxFind {
		out, err = ck.find(c, out)
	} else {
		out, err = ck.command(c, 1, out)
	}
	if err != nil {
		return Decision{}, err
	}
	return Decision{Argv: out, Reads: ck.reads, Writes: ck.writes}, nil
}

func checkLimits(argv []string) error {
	if len(argv) == 0 {
		return &Refusal{Kind: KindCmd, Index: -1, Rule: "empty argv"}
	}
	if len(argv) > MaxArgs {
		return argRefusal(MaxArgs, argv[MaxArgs], fmt.Sprintf("too many arguments (%d, at most %d)", len(argv), MaxArgs))
	}
	total := 0
	for i, a := range argv {
		if len(a) > MaxArgBytes {
			return argRefusal(i, a, fmt.Sprintf("argument too large (%d bytes, at most %d)", len(a), MaxArgBytes))
		}
		total += len(a) + 1
		if total > MaxArgvSize {
			return argRefusal(i, a, fmt.Sprintf("arguments too large (more than %d bytes in all)", MaxArgvSize))
		}
		if strings.IndexByte(a, 0) >= 0 {
			return argRefusal(i, a, "argument contains NUL")
		}
	}
	return nil
}

func lookup(cmds map[string]*Command, name string) (*Command, error) {
	refuse := func(rule string) (*Command, error) {
		return nil, &Refusal{Kind: KindCmd, Index: 0, Token: clip(name), Rule: rule}
	}
	switch {
	case name == "":
		return refuse("empty command name")
	case strings.ContainsRune(name, '='):
		return refuse("environment assignments are not allowed; the sandbox environment is fixed")
	case strings.ContainsRune(name, '/'):
		return refuse("the command must be a bare name from the allowlist, not a path")
	case NeverAllowed(name):
		return refuse(name + " is never allowed (shells, interpreters, wrappers, pagers, editors and network tools)")
	}
	c := cmds[name]
	if c == nil {
		return refuse(name + " is not on the allowlist")
	}
	if c.Name != name {
		return nil, fmt.Errorf("grammar for %q is named %q: %w", name, c.Name, errdefs.ErrInvalidArgument)
	}
	return c, nil
}

type checker struct {
	pc     pathChecker
	argv   []string
	reads  []string
	writes []string
}

// command checks argv[start:] against c and appends the normalized form
// (prepend, options, "--", operands) to out.
func (ck *checker) command(c *Command, start int, out []string) ([]string, error) {
	p, err := parseGetopt(c, ck.argv, start)
	if err != nil {
		return nil, err
	}
	if err := checkConflicts(c, ck.argv, p.opts); err != nil {
		return nil, err
	}
	out = append(out, c.Prepend...)
	for k := range p.opts {
		if err := ck.value(c, &p.opts[k]); err != nil {
			return nil, err
		}
		out = append(out, spell(p.opts[k])...)
	}
	if len(c.Subcommands) > 0 {
		if p.stop < 0 {
			return nil, argRefusal(-1, "", fmt.Sprintf("%s needs a subcommand", c.Name))
		}
		sub := c.subcommand(ck.argv[p.stop])
		if sub == nil {
			return nil, argRefusal(p.stop, ck.argv[p.stop], fmt.Sprintf("subcommand %s is not allowed for %s", ck.argv[p.stop], c.Name))
		}
		return ck.command(sub, p.stop+1, append(out, sub.Name))
	}
	layout := c.Layout
	for _, f := range c.Forms {
		if slices.ContainsFunc(p.opts, func(o occurrence) bool { return slices.Contains(f.When, o.opt.key()) }) {
			layout = f.Layout
			break
		}
	}
	if err := ck.operands(c, layout, p.ops); err != nil {
		return nil, err
	}
	if c.Separator {
		if err := ck.operands(c, Layout{Operands: c.PathOperands}, p.after); err != nil {
			return nil, err
		}
	}
	if !c.EndOfOptions && !c.Separator {
		for _, o := range p.ops {
			if len(o.value) > 1 && o.value[0] == '-' {
				return nil, argRefusal(o.index, o.value, fmt.Sprintf("%s cannot be told where options end, so an operand may not begin with '-'", c.Name))
			}
		}
	}
	if c.Separator {
		for _, o := range p.ops {
			out = append(out, o.value)
		}
		out = append(out, "--")
		for _, o := range p.after {
			out = append(out, o.value)
		}
		return out, nil
	}
	if len(p.ops) > 0 && c.EndOfOptions {
		out = append(out, "--")
	}
	for _, o := range p.ops {
		out = append(out, o.value)
	}
	return out, nil
}

// checkConflicts refuses the first of c's conflicts whose options are all
// present in opts (parsed from argv), at the argv index of the last of them
// to appear.
func checkConflicts(c *Command, argv []string, opts []occurrence) error {
	for _, cf := range c.Conflicts {
		last := -1
		names := make([]string, 0, len(cf.Options))
		for _, key := range cf.Options {
			k := slices.IndexFunc(opts, func(o occurrence) bool { return o.opt.key() == key })
			if k < 0 {
				last = -1
				break
			}
			names = append(names, opts[k].opt.display())
			if last < 0 || opts[k].index > opts[last].index {
				last = k
			}
		}
		if last < 0 {
			continue
		}
		o := opts[last]
		return argRefusal(o.index, argv[o.index], fmt.Sprintf("options %s are not allowed together for %s: %s",
			strings.Join(names, " and "), c.Name, cf.Reason))
	}
	return nil
}

// spell writes an option occurrence in its canonical form.
func spell(o occurrence) []string {
	if o.opt.Long != "" {
		if o.hasValue {
			return []string{"--" + o.opt.Long + "=" + o.value}
		}
		return []string{"--" + o.opt.Long}
	}
	flag := "-" + o.opt.Short
	switch {
	case !o.hasValue:
		return []string{flag}
	case o.opt.mode() == ArgOptional:
		return []string{flag + o.value}
	default:
		return []string{flag, o.value}
	}
}

// value checks an option's value against its type.
func (ck *checker) value(c *Command, o *occurrence) error {
	if !o.hasValue {
		return nil
	}
	v, err := ck.typed(c, o.opt.Type, o.opt.Values, o.valIndex, o.value, fmt.Sprintf("value of %s", o.opt.display()), false)
	o.value = v
	return err
}

// operands types the positional arguments with a layout.
func (ck *checker) operands(c *Command, l Layout, ops []operand) error {
	fixed, variadic := countOperands(l.Operands)
	max := l.MaxOperands
	if max == 0 {
		if variadic {
			max = len(ops) // unbounded
		} else {
			max = fixed
		}
	}
	if len(ops) > max {
		o := ops[max]
		return argRefusal(o.index, o.value, fmt.Sprintf("too many operands for %s (at most %d)", c.Name, max))
	}
	min := l.MinOperands
	if variadic && min < fixed {
		min = fixed
	}
	if len(ops) < min {
		return argRefusal(-1, "", fmt.Sprintf("%s needs at least %d %s", c.Name, min, plural(min, "operand", "operands")))
	}
	types := assign(l.Operands, len(ops))
	for k := range ops {
		t := types[k]
		v, err := ck.typed(c, t.Type, t.Values, ops[k].index, ops[k].value, "operand", true)
		if err != nil {
			return err
		}
		ops[k].value = v
	}
	return nil
}

// plural returns one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// assign gives each of n operands its declared type: fixed operands before
// a variadic one from the front, those after it from the back.
func assign(decl []Operand, n int) []Operand {
	out := make([]Operand, n)
	v := slices.IndexFunc(decl, func(o Operand) bool { return o.Variadic })
	if v < 0 {
		copy(out, decl[:min(n, len(decl))])
		return out
	}
	before, after := decl[:v], decl[v+1:]
	nb := min(n, len(before))
	copy(out, before[:nb])
	na := min(n-nb, len(after))
	for k := 0; k < na; k++ {
		out[n-na+k] = after[len(after)-na+k]
	}
	for k := nb; k < n-na; k++ {
		out[k] = decl[v]
	}
	return out
}

var (
	numberRE = regexp.MustCompile(`^[+-]?[0-9]{1,18}$`)
	sizeRE   = regexp.MustCompile(`^[+-]?[0-9]{1,18}(b|c|w|k|kB|K|KB|KiB|[MGTPEZYRQ](B|iB)?)?$`)
	gitRevRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./^~@{}+-]*$`)
)

// typed checks one value against a type and returns it normalized: a path
// becomes its canonical spelling (with "./" before a leading '-'), so the
// tool is given exactly the path that was checked, never a spelling that
// could resolve differently ("docs/link/../x"); what is the noun used in
// messages ("operand", "value of --file"). operand says val is a
// positional argument: a read-path operand that looks like a URL is a
// relative path (see cleanOperand), an option's value is refused.
func (ck *checker) typed(c *Command, t ArgType, values []string, idx int, val, what string, operand bool) (string, error) {
	tok := val // the argv token that carries val, for refusals
	if idx >= 0 && idx < len(ck.argv) {
		tok = ck.argv[idx]
	}
	refuse := func(rule string) (string, error) { return "", argRefusal(idx, tok, rule) }
	switch t {
	case TypeReadPath:
		read := ck.pc.read
		if operand {
			read = ck.pc.readOperand
		}
		p, err := read(val)
		if err != nil {
			return "", atIndex(err, idx, tok)
		}
		ck.reads = append(ck.reads, p)
		return argPath(p), nil
	case TypeWritePath:
		p, err := ck.pc.write(val)
		if err != nil {
			return "", atIndex(err, idx, tok)
		}
		ck.writes = append(ck.writes, p)
		return argPath(p), nil
	case TypePattern:
		if strings.IndexByte(val, 0) >= 0 {
			return refuse(what + " contains NUL")
		}
	case TypeNumber:
		if !numberRE.MatchString(val) {
			return refuse(fmt.Sprintf("%s of %s must be a number", what, c.Name))
		}
	case TypeSize:
		if !sizeRE.MatchString(val) {
			return refuse(fmt.Sprintf("%s of %s must be a size (a number with an optional unit)", what, c.Name))
		}
	case TypeEnum, TypeLiteral:
		if len(values) == 0 || !slices.Contains(values, val) {
			return refuse(fmt.Sprintf("%s of %s must be one of %s", what, c.Name, strings.Join(values, ", ")))
		}
	case TypeSedScript:
		if rule := checkSedScript(val); rule != "" {
			return refuse("sed script refused: " + rule)
		}
	case TypeGitRev:
		if !gitRevRE.MatchString(val) {
			return refuse(fmt.Sprintf("%s of %s must be a revision (no ':', no leading '-'); put paths after --", what, c.Name))
		}
	default:
		return "", fmt.Errorf("grammar %q: unknown type %q: %w", c.Name, t, errdefs.ErrInvalidArgument)
	}
	return val, nil
}

// argPath spells a canonical path for an argv: "./" before a leading '-'
// so that no tool can read it as an option.
func argPath(p string) string {
	if strings.HasPrefix(p, "-") {
		return "./" + p
	}
	return p
}

// atIndex places a path refusal at the argv index that carried the value.
func atIndex(err error, idx int, tok string) error {
	var r *Refusal
	if errors.As(err, &r) {
		cp := *r
		cp.Index = idx
		cp.Token = clip(tok)
		if cp.Kind == "" {
			cp.Kind = KindPath
		}
		return &cp
	}
	return &Refusal{Kind: KindPath, Index: idx, Token: clip(tok), Rule: err.Error()}
}
