package allowlist

import (
	"fmt"
	"regexp"
	"strings"
)

// findPrimary describes one token of find's expression language: how many
// arguments it takes and how to check them.
type findPrimary struct {
	arg  ArgType // "" when it takes no argument
	re   *regexp.Regexp
	vals []string
	deny string
}

var (
	findTypeRE  = regexp.MustCompile(`^[bcdpflsD](,[bcdpflsD])*$`)
	findSizeRE  = regexp.MustCompile(`^[+-]?[0-9]{1,18}[bcwkMG]?$`)
	findTimeRE  = regexp.MustCompile(`^[+-]?[0-9]{1,18}$`)
	findDepthRE = regexp.MustCompile(`^[0-9]{1,9}$`)
	findPermRE  = regexp.MustCompile(`^[-/]?([0-7]{1,4}|[ugoa]*[-+=][rwxXst]*(,[ugoa]*[-+=][rwxXst]*)*)$`)
	findNameRE  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
)

const (
	denyExec  = "runs a program"
	denyWrite = "writes a file"
	// denyFollow is the rule every recursive tool's dereferencing form is
	// refused by: a symbolic link found inside a directory can lead out of
	// the view (to the container's own root and /proc).
	denyFollow = "recursive tools never follow symbolic links"
)

var findPrimaries = map[string]findPrimary{
	// operators
	"(": {}, ")": {}, "!": {}, "-not": {}, "-a": {}, "-and": {}, "-o": {}, "-or": {}, ",": {},
	// position-independent options
	"-maxdepth": {arg: TypeNumber, re: findDepthRE}, "-mindepth": {arg: TypeNumber, re: findDepthRE},
	"-depth": {}, "-xdev": {}, "-mount": {}, "-noleaf": {}, "-daystart": {}, "-ignore_readdir_race": {},
	"-noignore_readdir_race": {},
	"-regextype": {arg: TypeEnum, vals: []string{
		"findutils-default", "ed", "emacs", "gnu-awk", "grep", "posix-awk", "awk",
		"posix-basic", "posix-egrep", "egrep", "posix-extended", "posix-minimal-basic", "sed"}},
	// tests
	"-name": {arg: TypePattern}, "-iname": {arg: TypePattern},
	"-path": {arg: TypePattern}, "-ipath": {arg: TypePattern},
	"-wholename": {arg: TypePattern}, "-iwholename": {arg: TypePattern},
	"-regex": {arg: TypePattern}, "-iregex": {arg: TypePattern},
	"-lname": {arg: TypePattern}, "-ilname": {arg: TypePattern},
	"-type":  {arg: TypePattern, re: findTypeRE},
	"-size":  {arg: TypeSize, re: findSizeRE},
	"-empty": {}, "-readable": {}, "-writable": {}, "-executable": {}, "-true": {}, "-false": {},
	"-mtime": {arg: TypeNumber, re: findTimeRE}, "-atime": {arg: TypeNumber, re: findTimeRE},
	"-ctime": {arg: TypeNumber, re: findTimeRE}, "-mmin": {arg: TypeNumber, re: findTimeRE},
	"-amin": {arg: TypeNumber, re: findTimeRE}, "-cmin": {arg: TypeNumber, re: findTimeRE},
	"-links": {arg: TypeNumber, re: findTimeRE},
	"-newer": {arg: TypeReadPath}, "-anewer": {arg: TypeReadPath}, "-cnewer": {arg: TypeReadPath},
	"-samefile": {arg: TypeReadPath},
	"-perm":     {arg: TypePattern, re: findPermRE},
	"-user":     {arg: TypePattern, re: findNameRE}, "-group": {arg: TypePattern, re: findNameRE},
	"-nouser": {}, "-nogroup": {},
	// actions
	"-print": {}, "-print0": {}, "-prune": {}, "-quit": {},
	// refused
	"-exec": {deny: denyExec}, "-execdir": {deny: denyExec}, "-ok": {deny: denyExec}, "-okdir": {deny: denyExec},
	"-delete": {deny: "deletes files"}, "-fprint": {deny: denyWrite}, "-fprint0": {deny: denyWrite},
	"-fprintf": {deny: denyWrite}, "-fls": {deny: denyWrite},
	"-printf": {deny: "only -print and -print0 print"}, "-ls": {deny: "only -print and -print0 print"},
	"-follow": {deny: denyFollow}, "-xtype": {deny: denyFollow + " (-xtype tests what a link points to)"},
	"-files0-from": {deny: "reads starting points from a file"},
	"-context":     {deny: "not supported"}, "-fstype": {deny: "not supported"},
}

// find checks a find invocation: leading -P options, starting points (read
// paths, none beginning with '-' or being an operator), then an expression
// made only of known primaries with checked arguments and balanced
// parentheses. The normalized argv always begins "find -P" (never follow a
// symbolic link, findutils' default made explicit) and keeps the rest as
// given; -H, -L, -follow and -xtype are refused. find has no "--" and
// needs none, because no starting point can look like an expression.
func (ck *checker) find(c *Command, out []string) ([]string, error) {
	argv := ck.argv
	out = append(out, "-P")
	i := 1
	for ; i < len(argv); i++ {
		switch argv[i] {
		case "-P":
			continue
		case "-H", "-L":
			return nil, argRefusal(i, argv[i], fmt.Sprintf("option %s is not allowed for find: %s", argv[i], denyFollow))
		}
		if strings.HasPrefix(argv[i], "-D") || strings.HasPrefix(argv[i], "-O") {
			return nil, argRefusal(i, argv[i], fmt.Sprintf("option %s is not allowed for find", argv[i]))
		}
		break
	}
	for ; i < len(argv) && !findExprStart(argv[i]); i++ {
		v, err := ck.typed(c, TypeReadPath, nil, i, argv[i], "starting point", true)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	depth := 0
	for ; i < len(argv); i++ {
		tok := argv[i]
		p, ok := findPrimaries[tok]
		if !ok {
			return nil, argRefusal(i, tok, fmt.Sprintf("unknown find expression %s (starting points come before the expression)", tok))
		}
		if p.deny != "" {
			return nil, argRefusal(i, tok, fmt.Sprintf("find %s is not allowed: %s", tok, p.deny))
		}
		switch tok {
		case "(":
			depth++
		case ")":
			if depth == 0 {
				return nil, argRefusal(i, tok, "unbalanced ) in find expression")
			}
			depth--
		}
		out = append(out, tok)
		if p.arg == "" {
			continue
		}
		if i+1 >= len(argv) {
			return nil, argRefusal(i, tok, fmt.Sprintf("find %s needs an argument", tok))
		}
		i++
		val := argv[i]
		if p.re != nil && !p.re.MatchString(val) {
			return nil, argRefusal(i, val, fmt.Sprintf("malformed argument to find %s", tok))
		}
		v, err := ck.typed(c, p.arg, p.vals, i, val, "argument of "+tok, false)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if depth != 0 {
		return nil, argRefusal(len(argv)-1, argv[len(argv)-1], "unbalanced ( in find expression")
	}
	return out, nil
}

// findExprStart mirrors findutils' looks_like_expression for the first
// token of the expression, erring towards "expression" (an operand that
// find would read as a path but we read as an expression is refused as an
// unknown primary, never passed through).
func findExprStart(tok string) bool {
	if strings.HasPrefix(tok, "-") {
		return true
	}
	switch tok {
	case "(", ")", "!", ",":
		return true
	}
	return false
}
