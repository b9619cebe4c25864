package allowlist

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/yamlstrict"
)

// ArgType is the type of an option value or an operand. Every value of a
// path type is canonicalized with CleanPath and checked against the view and
// the write scope; every other type is checked by its own matcher. There is
// no "anything" type hidden behind an empty list: TypePattern is the explicit
// marker for free text.
type ArgType string

const (
	// TypeReadPath must resolve inside the view and not be hidden.
	TypeReadPath ArgType = "read-path"
	// TypeWritePath must lie inside the write scope (lexically and
	// resolved), or be exactly the assigned page in page mode, and name
	// nothing reserved (.git, .claims).
	TypeWritePath ArgType = "write-path"
	// TypePattern is free text (a regular expression, a glob, a format, a
	// set for tr): any bytes but NUL. It is never a path.
	TypePattern ArgType = "pattern"
	// TypeNumber is an optionally signed decimal integer.
	TypeNumber ArgType = "number"
	// TypeSize is a number with an optional unit suffix (10K, 2MiB, 5c).
	TypeSize ArgType = "size"
	// TypeEnum is one of Values (an option's keyword argument).
	TypeEnum ArgType = "enum"
	// TypeLiteral is exactly one of Values (a fixed operand).
	TypeLiteral ArgType = "literal"
	// TypeSedScript is a print-only sed script (see checkSedScript).
	TypeSedScript ArgType = "sed-script"
	// TypeGitRev is a revision or range: no leading '-', no ':' (which
	// would name a blob by path), no whitespace.
	TypeGitRev ArgType = "git-rev"
)

var knownTypes = map[ArgType]bool{
	TypeReadPath: true, TypeWritePath: true, TypePattern: true,
	TypeNumber: true, TypeSize: true, TypeEnum: true, TypeLiteral: true,
	TypeSedScript: true, TypeGitRev: true,
}

// ArgMode says whether an option takes a value, as in getopt_long's
// has_arg: a required value may be attached (-ePAT, --regexp=PAT) or be the
// next argument; an optional value must be attached.
type ArgMode string

const (
	ArgNone     ArgMode = "none"
	ArgRequired ArgMode = "required"
	ArgOptional ArgMode = "optional"
)

// Syntax selects the parser for a command.
type Syntax string

const (
	// SyntaxGetopt parses like GNU getopt_long with argument permutation
	// (also right for clap and git's parse-options). The default.
	SyntaxGetopt Syntax = "getopt"
	// SyntaxFind parses find's own expression language (see checkFind).
	SyntaxFind Syntax = "find"
)

// Option is one option a tool knows. An option with Deny set is known (so
// abbreviations resolve exactly as in the tool) but always refused, with
// Deny as the reason.
type Option struct {
	// Short is a single character, without the dash.
	Short string `yaml:"short,omitempty"`
	// Long is the canonical long name, without the dashes; a normalized
	// argv always spells the option with it.
	Long string `yaml:"long,omitempty"`
	// Aliases are further long names for the same option.
	Aliases []string `yaml:"aliases,omitempty"`
	// Arg defaults to ArgNone.
	Arg ArgMode `yaml:"arg,omitempty"`
	// Type of the value; required unless Arg is none.
	Type ArgType `yaml:"type,omitempty"`
	// Values for TypeEnum and TypeLiteral; never empty for those.
	Values []string `yaml:"values,omitempty"`
	// Deny, when set, refuses the option and says why.
	Deny string `yaml:"deny,omitempty"`
}

// Operand is one positional argument.
type Operand struct {
	Type   ArgType  `yaml:"type"`
	Values []string `yaml:"values,omitempty"`
	// Variadic operands take zero or more arguments; at most one per list.
	// Operands before it are matched from the front, those after it from
	// the back (cp SOURCE... DEST).
	Variadic bool `yaml:"variadic,omitempty"`
}

// Layout types the operands. MaxOperands 0 means "as the list allows":
// unbounded with a variadic operand, len(Operands) without one.
type Layout struct {
	Operands    []Operand `yaml:"operands,omitempty"`
	MinOperands int       `yaml:"min-operands,omitempty"`
	MaxOperands int       `yaml:"max-operands,omitempty"`
}

// Form is an alternative operand layout, chosen when any option named in
// When is present (grep -e PAT makes every operand a file). The first
// matching form wins; without one the command's own layout applies.
type Form struct {
	// When lists options by long name, or by short letter for options
	// without a long name.
	When   []string `yaml:"when"`
	Layout `yaml:",inline"`
}

// Conflict refuses options that are each allowed alone when they are given
// together: ls -H (follow a link named as an operand) is fine, ls -R -H
// would descend into it.
type Conflict struct {
	// Options names the options by long name, or by short letter for
	// options without a long name (as Form.When does); two or more.
	Options []string `yaml:"options"`
	// Reason says why, as the rule of the refusal.
	Reason string `yaml:"reason"`
}

// Command is the grammar of one allowed program.
type Command struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description,omitempty"`
	Syntax      Syntax `yaml:"syntax,omitempty"`
	// EndOfOptions says the tool honours "--". Then a normalized argv
	// always carries "--" before its operands, so an operand that begins
	// with '-' can never become an option. Without it such operands are
	// refused.
	EndOfOptions bool `yaml:"end-of-options,omitempty"`
	// Abbreviations says the tool accepts unambiguous prefixes of long
	// options (getopt_long, git). The normalized argv always spells the
	// full name.
	Abbreviations bool `yaml:"abbreviations,omitempty"`
	// Separator (git) makes "--" separate revisions from paths: operands
	// before it follow the layout, after it PathOperands. A normalized argv
	// always carries the "--".
	Separator    bool      `yaml:"separator,omitempty"`
	PathOperands []Operand `yaml:"path-operands,omitempty"`
	// NumberOption names the long option that a whole "-NUM" argument
	// stands for (head -5 is head --lines=5).
	NumberOption string   `yaml:"number-option,omitempty"`
	Options      []Option `yaml:"options,omitempty"`
	Layout       `yaml:",inline"`
	Forms        []Form `yaml:"forms,omitempty"`
	// Conflicts are combinations of allowed options that are refused.
	Conflicts []Conflict `yaml:"conflicts,omitempty"`
	// Prepend is put right after the name (after the subcommand name for a
	// subcommand): sed always runs with --sandbox.
	Prepend []string `yaml:"prepend,omitempty"`
	// Subcommands (git): global options come first, then a subcommand
	// name, then the subcommand's own arguments.
	Subcommands []*Command `yaml:"subcommands,omitempty"`
}

// Catalog is the file format of a set of grammars (profiles/builtin/tools.yaml).
type Catalog struct {
	Commands []*Command `yaml:"commands"`
}

// ParseCatalog decodes a catalog strictly with the project's one strict
// decoder (internal/yamlstrict: one document, unknown or duplicate keys
// are errors naming the key and its line in "tools.yaml") and validates
// every command. The result is keyed by command name.
func ParseCatalog(data []byte) (map[string]*Command, error) {
	var c Catalog
	if err := yamlstrict.Decode("tools.yaml", data, &c); err != nil {
		return nil, err
	}
	out := make(map[string]*Command, len(c.Commands))
	for i, cmd := range c.Commands {
		if cmd == nil {
			return nil, fmt.Errorf("tool catalog entry %d is empty: %w", i, errdefs.ErrInvalidArgument)
		}
		if err := cmd.Validate(); err != nil {
			return nil, err
		}
		if _, dup := out[cmd.Name]; dup {
			return nil, fmt.Errorf("tool catalog: command %q defined twice: %w", cmd.Name, errdefs.ErrInvalidArgument)
		}
		out[cmd.Name] = cmd
	}
	return out, nil
}

var (
	bareName = regexp.MustCompile(`^[a-z0-9][a-z0-9._+-]*$`)
	longName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
)

// Validate checks a grammar and fails closed: unknown syntaxes, types or
// modes, missing value lists, ambiguous names and never-allowed programs
// are errors wrapping errdefs.ErrInvalidArgument.
func (c *Command) Validate() error {
	if err := c.validate(false); err != nil {
		return fmt.Errorf("grammar %q: %w", c.Name, err)
	}
	return nil
}

func invalid(format string, a ...any) error {
	return fmt.Errorf(format+": %w", append(a, errdefs.ErrInvalidArgument)...)
}

func (c *Command) validate(sub bool) error {
	if !bareName.MatchString(c.Name) {
		return invalid("name must be a bare lower-case program name")
	}
	if !sub && NeverAllowed(c.Name) {
		return invalid("%s is never allowed", c.Name)
	}
	for _, p := range c.Prepend {
		if p == "" || strings.IndexByte(p, 0) >= 0 {
			return invalid("prepend holds an empty or NUL argument")
		}
	}
	switch c.Syntax {
	case "", SyntaxGetopt:
	case SyntaxFind:
		if len(c.Options) > 0 || len(c.Operands) > 0 || len(c.Forms) > 0 || len(c.Subcommands) > 0 ||
			len(c.PathOperands) > 0 || c.Separator || c.NumberOption != "" || len(c.Conflicts) > 0 {
			return invalid("syntax find takes no options, operands, forms, conflicts or subcommands")
		}
		return nil
	default:
		return invalid("unknown syntax %q", c.Syntax)
	}
	seenShort := map[string]bool{}
	seenLong := map[string]bool{}
	for i := range c.Options {
		o := &c.Options[i]
		if err := o.validate(); err != nil {
			return fmt.Errorf("option %s: %w", o.display(), err)
		}
		if o.Short != "" {
			if seenShort[o.Short] {
				return invalid("option -%s defined twice", o.Short)
			}
			seenShort[o.Short] = true
		}
		for _, l := range o.longNames() {
			if seenLong[l] {
				return invalid("option --%s defined twice", l)
			}
			seenLong[l] = true
		}
	}
	if c.NumberOption != "" {
		o := c.findLong(c.NumberOption)
		if o == nil || o.Arg != ArgRequired || (o.Type != TypeNumber && o.Type != TypeSize) || o.Deny != "" {
			return invalid("number-option %q must name an allowed long option with a required number or size", c.NumberOption)
		}
	}
	if err := c.Layout.validate(); err != nil {
		return err
	}
	if c.Separator {
		if len(c.Subcommands) > 0 {
			return invalid("separator and subcommands exclude each other")
		}
		if err := validateOperands(c.PathOperands); err != nil {
			return fmt.Errorf("path-operands: %w", err)
		}
	} else if len(c.PathOperands) > 0 {
		return invalid("path-operands need separator")
	}
	for i, f := range c.Forms {
		if len(f.When) == 0 {
			return invalid("form %d has no when", i)
		}
		for _, w := range f.When {
			if o := c.optionByKey(w); o == nil || o.Deny != "" {
				return invalid("form %d: when names unknown or denied option %q", i, w)
			}
		}
		if err := f.Layout.validate(); err != nil {
			return fmt.Errorf("form %d: %w", i, err)
		}
	}
	for i, cf := range c.Conflicts {
		if len(cf.Options) < 2 {
			return invalid("conflict %d names fewer than two options", i)
		}
		if strings.TrimSpace(cf.Reason) == "" {
			return invalid("conflict %d has no reason", i)
		}
		seen := map[*Option]bool{}
		for _, k := range cf.Options {
			o := c.optionByKey(k)
			if o == nil || o.Deny != "" {
				return invalid("conflict %d names unknown or denied option %q", i, k)
			}
			if seen[o] {
				return invalid("conflict %d names option %q twice", i, k)
			}
			seen[o] = true
		}
	}
	if len(c.Subcommands) > 0 {
		if sub {
			return invalid("subcommands nest only one level")
		}
		if len(c.Operands) > 0 || len(c.Forms) > 0 || c.MinOperands != 0 || c.MaxOperands != 0 {
			return invalid("a command with subcommands takes no operands of its own")
		}
		names := map[string]bool{}
		for _, s := range c.Subcommands {
			if s == nil {
				return invalid("empty subcommand")
			}
			if names[s.Name] {
				return invalid("subcommand %q defined twice", s.Name)
			}
			names[s.Name] = true
			if s.Syntax == SyntaxFind {
				return invalid("subcommand %q: syntax find is for commands", s.Name)
			}
			if err := s.validate(true); err != nil {
				return fmt.Errorf("subcommand %q: %w", s.Name, err)
			}
		}
	}
	return nil
}

func (l *Layout) validate() error {
	if err := validateOperands(l.Operands); err != nil {
		return err
	}
	if l.MinOperands < 0 || l.MaxOperands < 0 {
		return invalid("operand bounds must not be negative")
	}
	fixed, variadic := countOperands(l.Operands)
	if !variadic && l.MinOperands > fixed {
		return invalid("min-operands %d exceeds the %d operands declared", l.MinOperands, fixed)
	}
	if l.MaxOperands != 0 && l.MaxOperands < l.MinOperands {
		return invalid("max-operands below min-operands")
	}
	if !variadic && l.MaxOperands > fixed {
		return invalid("max-operands %d exceeds the %d operands declared", l.MaxOperands, fixed)
	}
	if variadic && l.MinOperands != 0 && l.MinOperands < fixed {
		return invalid("min-operands %d is below the %d fixed operands around a variadic one", l.MinOperands, fixed)
	}
	return nil
}

func countOperands(ops []Operand) (fixed int, variadic bool) {
	for _, o := range ops {
		if o.Variadic {
			variadic = true
		} else {
			fixed++
		}
	}
	return fixed, variadic
}

func validateOperands(ops []Operand) error {
	variadic := 0
	for i, o := range ops {
		if err := validateType(o.Type, o.Values); err != nil {
			return fmt.Errorf("operand %d: %w", i, err)
		}
		if o.Variadic {
			variadic++
		}
	}
	if variadic > 1 {
		return invalid("more than one variadic operand")
	}
	return nil
}

func validateType(t ArgType, values []string) error {
	if !knownTypes[t] {
		return invalid("unknown type %q", t)
	}
	switch t {
	case TypeEnum, TypeLiteral:
		if len(values) == 0 {
			return invalid("type %s needs values (free text is type pattern)", t)
		}
		for _, v := range values {
			if strings.IndexByte(v, 0) >= 0 {
				return invalid("value holds NUL")
			}
		}
	default:
		if len(values) > 0 {
			return invalid("type %s takes no values", t)
		}
	}
	return nil
}

func (o *Option) validate() error {
	if o.Short == "" && o.Long == "" {
		return invalid("needs short or long")
	}
	if o.Short != "" && (len(o.Short) != 1 || o.Short == "-" || o.Short[0] <= ' ' || o.Short[0] > '~') {
		return invalid("short must be one printable ASCII character other than '-'")
	}
	if o.Long == "" && len(o.Aliases) > 0 {
		return invalid("aliases need a long name")
	}
	for _, l := range o.longNames() {
		if !longName.MatchString(l) {
			return invalid("bad long name %q", l)
		}
	}
	switch o.Arg {
	case "", ArgNone:
		if o.Type != "" || len(o.Values) > 0 {
			return invalid("an option without a value has no type")
		}
	case ArgRequired, ArgOptional:
		if o.Deny != "" && o.Type == "" {
			return nil // a denied option's value is never looked at
		}
		if err := validateType(o.Type, o.Values); err != nil {
			return err
		}
	default:
		return invalid("unknown arg mode %q", o.Arg)
	}
	return nil
}

func (o *Option) longNames() []string {
	if o.Long == "" {
		return nil
	}
	return append([]string{o.Long}, o.Aliases...)
}

func (o *Option) mode() ArgMode {
	if o.Arg == "" {
		return ArgNone
	}
	return o.Arg
}

// display names the option as a user would write it.
func (o *Option) display() string {
	if o.Long != "" {
		return "--" + o.Long
	}
	return "-" + o.Short
}

// key is how forms refer to the option.
func (o *Option) key() string {
	if o.Long != "" {
		return o.Long
	}
	return o.Short
}

func (c *Command) findLong(name string) *Option {
	for i := range c.Options {
		for _, l := range c.Options[i].longNames() {
			if l == name {
				return &c.Options[i]
			}
		}
	}
	return nil
}

func (c *Command) findShort(ch byte) *Option {
	for i := range c.Options {
		if o := &c.Options[i]; len(o.Short) == 1 && o.Short[0] == ch {
			return o
		}
	}
	return nil
}

func (c *Command) optionByKey(k string) *Option {
	for i := range c.Options {
		if c.Options[i].key() == k {
			return &c.Options[i]
		}
	}
	return nil
}

func (c *Command) subcommand(name string) *Command {
	for _, s := range c.Subcommands {
		if s.Name == name {
			return s
		}
	}
	return nil
}
