package allowlist

import (
	"fmt"
	"strings"
)

// occurrence is one option as given in argv.
type occurrence struct {
	opt      *Option
	index    int    // argv index of the option token
	given    string // as written, e.g. "--pr" or "-z"
	value    string
	hasValue bool
	valIndex int // argv index holding the value
}

// operand is one positional argument as given in argv.
type operand struct {
	value string
	index int
}

// parsed is the result of reading argv[start:] with one grammar.
type parsed struct {
	opts []occurrence
	ops  []operand
	// after holds the operands after "--" for a Separator command.
	after []operand
	// stop is the argv index where parsing stopped at a subcommand name
	// (only for commands with subcommands), or -1.
	stop int
}

func argRefusal(i int, tok, rule string) *Refusal {
	return &Refusal{Kind: KindArg, Index: i, Token: clip(tok), Rule: rule}
}

// parseGetopt reads argv[start:] as GNU getopt_long would for grammar c:
// options anywhere (permutation) until "--", clusters of short options,
// attached or separate values, "--long=value", unambiguous abbreviations
// when the tool accepts them. Anything it does not recognise is refused.
// For a command with subcommands it stops at the first operand (git's
// global options do not permute).
func parseGetopt(c *Command, argv []string, start int) (*parsed, error) {
	p := &parsed{stop: -1}
	name := c.Name
	for i := start; i < len(argv); i++ {
		tok := argv[i]
		switch {
		case tok == "--":
			if !c.EndOfOptions && !c.Separator {
				return nil, argRefusal(i, tok, fmt.Sprintf("%s does not accept --", name))
			}
			if len(c.Subcommands) > 0 {
				return nil, argRefusal(i, tok, fmt.Sprintf("%s needs a subcommand before --", name))
			}
			for j := i + 1; j < len(argv); j++ {
				if c.Separator {
					p.after = append(p.after, operand{argv[j], j})
				} else {
					p.ops = append(p.ops, operand{argv[j], j})
				}
			}
			return p, nil
		case strings.HasPrefix(tok, "--"):
			occ, next, err := parseLong(c, argv, i)
			if err != nil {
				return nil, err
			}
			p.opts = append(p.opts, occ)
			i = next
		case len(tok) > 1 && tok[0] == '-':
			if c.NumberOption != "" && allDigits(tok[1:]) {
				o := c.findLong(c.NumberOption)
				p.opts = append(p.opts, occurrence{opt: o, index: i, given: tok, value: tok[1:], hasValue: true, valIndex: i})
				continue
			}
			occs, next, err := parseShort(c, argv, i)
			if err != nil {
				return nil, err
			}
			p.opts = append(p.opts, occs...)
			i = next
		default:
			if len(c.Subcommands) > 0 {
				p.stop = i
				return p, nil
			}
			p.ops = append(p.ops, operand{tok, i})
		}
	}
	return p, nil
}

func allDigits(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseLong reads the long option at argv[i] and returns the index of the
// last argument it consumed.
func parseLong(c *Command, argv []string, i int) (occurrence, int, error) {
	tok := argv[i]
	body := tok[2:]
	nameOnly, value, hasValue := strings.Cut(body, "=")
	if nameOnly == "" {
		return occurrence{}, 0, argRefusal(i, tok, fmt.Sprintf("malformed option for %s", c.Name))
	}
	o := c.findLong(nameOnly)
	if o == nil && c.Abbreviations {
		var cand []*Option
		seen := map[*Option]bool{}
		for k := range c.Options {
			for _, l := range c.Options[k].longNames() {
				if strings.HasPrefix(l, nameOnly) && !seen[&c.Options[k]] {
					seen[&c.Options[k]] = true
					cand = append(cand, &c.Options[k])
				}
			}
		}
		switch len(cand) {
		case 0:
		case 1:
			o = cand[0]
		default:
			names := make([]string, len(cand))
			for k, x := range cand {
				names[k] = x.display()
			}
			return occurrence{}, 0, argRefusal(i, tok, fmt.Sprintf("option --%s is ambiguous for %s (%s)", nameOnly, c.Name, strings.Join(names, ", ")))
		}
	}
	if o == nil {
		return occurrence{}, 0, argRefusal(i, tok, fmt.Sprintf("unknown option --%s for %s", nameOnly, c.Name))
	}
	if o.Deny != "" {
		return occurrence{}, 0, argRefusal(i, tok, fmt.Sprintf("option %s is not allowed for %s: %s", o.display(), c.Name, o.Deny))
	}
	occ := occurrence{opt: o, index: i, given: "--" + nameOnly}
	switch o.mode() {
	case ArgNone:
		if hasValue {
			return occurrence{}, 0, argRefusal(i, tok, fmt.Sprintf("option %s of %s takes no value", o.display(), c.Name))
		}
	case ArgOptional:
		if hasValue {
			occ.value, occ.hasValue, occ.valIndex = value, true, i
		}
	case ArgRequired:
		switch {
		case hasValue:
			occ.value, occ.hasValue, occ.valIndex = value, true, i
		case i+1 < len(argv):
			i++
			occ.value, occ.hasValue, occ.valIndex = argv[i], true, i
		default:
			return occurrence{}, 0, argRefusal(i, tok, fmt.Sprintf("option %s of %s needs a value", o.display(), c.Name))
		}
	}
	return occ, i, nil
}

// parseShort reads the cluster of short options at argv[i] and returns the
// index of the last argument it consumed.
func parseShort(c *Command, argv []string, i int) ([]occurrence, int, error) {
	tok := argv[i]
	var out []occurrence
	for k := 1; k < len(tok); k++ {
		ch := tok[k]
		o := c.findShort(ch)
		if o == nil {
			return nil, 0, argRefusal(i, tok, fmt.Sprintf("unknown option -%s for %s", printable(ch), c.Name))
		}
		if o.Deny != "" {
			return nil, 0, argRefusal(i, tok, fmt.Sprintf("option -%c (%s) is not allowed for %s: %s", ch, o.display(), c.Name, o.Deny))
		}
		occ := occurrence{opt: o, index: i, given: "-" + string(ch)}
		rest := tok[k+1:]
		switch o.mode() {
		case ArgNone:
			out = append(out, occ)
			continue
		case ArgOptional:
			if rest != "" {
				occ.value, occ.hasValue, occ.valIndex = rest, true, i
			}
		case ArgRequired:
			switch {
			case rest != "":
				occ.value, occ.hasValue, occ.valIndex = rest, true, i
			case i+1 < len(argv):
				i++
				occ.value, occ.hasValue, occ.valIndex = argv[i], true, i
			default:
				return nil, 0, argRefusal(i, tok, fmt.Sprintf("option -%c of %s needs a value", ch, c.Name))
			}
		}
		return append(out, occ), i, nil
	}
	return out, i, nil
}

func printable(ch byte) string {
	if ch > ' ' && ch < 0x7f {
		return string(ch)
	}
	return fmt.Sprintf("\\x%02x", ch)
}
