package names

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// List names a built-in hide list a profile can opt out of
// (`expose: [agent-config]`).
type List string

// The built-in hide lists. AgentConfig and Secrets are lists of names in
// this table; Gitignore is the view honouring the repository's .gitignore
// files like .openwikiignore ones, and has no names here.
const (
	AgentConfig List = "agent-config"
	Secrets     List = "secrets"
	Gitignore   List = "gitignore"
)

// always marks the entries hidden in every view whatever the profile says
// (.git). It is not a list a profile can name.
const always List = "(always)"

// Lists returns the built-in hide lists, each hidden unless a profile
// exposes it.
func Lists() []List { return []List{AgentConfig, Secrets, Gitignore} }

// ParseList returns the built-in list named s, or an error naming s and
// the known lists.
func ParseList(s string) (List, error) {
	for _, l := range Lists() {
		if string(l) == s {
			return l, nil
		}
	}
	known := make([]string, 0, len(Lists()))
	for _, l := range Lists() {
		known = append(known, string(l))
	}
	return "", fmt.Errorf("unknown hide list %q (known: %s)", s, strings.Join(known, ", "))
}

// Entry is one row of the table.
type Entry struct {
	// Pattern is the entry in gitignore-like syntax, matched folded at
	// any depth: "AGENTS.md" (a file or directory of that name),
	// ".claude/" (a directory: the trailing slash), ".github/instructions/"
	// (a directory inside another), ".github/prompts/*.prompt.md" and
	// "*.pem" ('*' matches within one component).
	Pattern string
	// Family says whose name it is: "Claude Code", "git", "private keys".
	Family string
	// Hide is the built-in list hiding matching paths from the view ("":
	// none).
	Hide List
	// Reserved, when set, is why no sandbox may write a path through a
	// component of this name, phrased after the name: "is owned by corral".
	Reserved string
	// Risk, when set, says why review rates a change to a matching path
	// high, as a noun phrase: "agent instructions that agents load on
	// their own".
	Risk string
	// Except lists names (folded) the pattern's last element does not
	// match: ".env.*" keeps ".env.example" visible.
	Except []string

	rule  string // Hidden's rule for an always-hidden entry
	parts []part // folded components
	dir   bool   // Pattern ends in '/'
	order int    // index in the table
}

// Hit is one entry a path matched.
type Hit struct {
	*Entry
	// Path is the part of the path the entry matched, in the path's own
	// spelling: the path itself, or one of its ancestors.
	Path string
	// Below is true when the path lies below Path (Path is a directory).
	Below bool
	// First and Last are the indexes of the first and last matched
	// components.
	First, Last int
}

// HideRule is the rule the view gives for a path this entry hides, e.g.
// "profile hides agent config .claude/ (Claude Code)" or "built-in
// secrets list: .env (environment files)": a built-in list the profile
// did not expose.
func (e *Entry) HideRule() string {
	switch {
	case e.rule != "":
		return e.rule
	case e.Hide == Secrets:
		return fmt.Sprintf("built-in secrets list: %s (%s)", e.Pattern, e.Family)
	}
	return fmt.Sprintf("profile hides %s %s (%s)", strings.ReplaceAll(string(e.Hide), "-", " "), e.Pattern, e.Family)
}

// Entries returns the table, in order.
func Entries() []*Entry {
	idx := index()
	return slices.Clone(idx.all)
}

// Patterns returns the gitignore patterns of the entries of list l, each
// matching at any depth ("**/" before a pattern with a '/' inside), for
// consumers that take gitignore syntax. Gitignore matching is
// case-sensitive and unfolded: it matches fewer spellings than Hidden.
func Patterns(l List) []string {
	var out []string
	for _, e := range index().all {
		if e.Hide != l {
			continue
		}
		p := e.Pattern
		if strings.Contains(strings.TrimSuffix(p, "/"), "/") {
			p = "**/" + p
		}
		out = append(out, p)
	}
	return out
}

// Match returns every entry that p or one of its ancestors matches, in
// order of the last matched component (shallowest first), then table
// order. p is a canonical repository-relative path; isDir says whether p
// itself is a directory (a pattern ending in '/' matches the last
// component only then). Each entry is reported once, for its shallowest
// match.
func Match(p string, isDir bool) []Hit {
	if p == "" || p == "." {
		return nil
	}
	comps := strings.Split(p, "/")
	folded := make([]string, len(comps))
	for i, c := range comps {
		folded[i] = Fold(c)
	}
	idx := index()
	var hits []Hit
	try := func(e *Entry, i int) {
		if slices.ContainsFunc(hits, func(h Hit) bool { return h.Entry == e }) {
			return
		}
		last := i + len(e.parts) - 1
		if last >= len(comps) {
			return
		}
		for j, part := range e.parts {
			if !part.match(folded[i+j]) {
				return
			}
		}
		if slices.Contains(e.Except, folded[last]) {
			return
		}
		below := last < len(comps)-1
		if e.dir && !below && !isDir {
			return
		}
		hits = append(hits, Hit{Entry: e, Path: strings.Join(comps[:last+1], "/"), Below: below, First: i, Last: last})
	}
	for i := range comps {
		for _, e := range idx.byFirst[folded[i]] {
			try(e, i)
		}
		for _, e := range idx.globFirst {
			try(e, i)
		}
	}
	slices.SortStableFunc(hits, func(a, b Hit) int {
		if a.Last != b.Last {
			return a.Last - b.Last
		}
		return idx.order[a.Entry] - idx.order[b.Entry]
	})
	return hits
}

// Hidden reports whether p, or one of its ancestors, is hidden by an entry
// hidden in every view (.git) or by one of lists, and the rule that hides
// it (the shallowest match), e.g. ".git is hidden at any depth" or
// "built-in secrets list: .env (environment files)". isDir is as for
// Match.
func Hidden(p string, isDir bool, lists ...List) (rule string, hidden bool) {
	for _, h := range Match(p, isDir) {
		if h.Hide == always || (h.Hide != "" && slices.Contains(lists, h.Hide)) {
			return h.HideRule(), true
		}
	}
	return "", false
}

// HiddenEntry is Hidden for one entry of a directory whose own path is
// known to be visible, for a walk that judges every entry: dir holds the
// directory's components and name the entry's, each already folded
// (Fold), and only entries whose last component is name are tried. It
// costs one map lookup and the table's wildcard entries, and allocates
// nothing.
func HiddenEntry(dir []string, name string, isDir bool, lists ...List) (rule string, hidden bool) {
	idx := index()
	var best *Entry
	try := func(e *Entry) {
		n := len(e.parts)
		if n-1 > len(dir) || !e.parts[n-1].match(name) || (e.dir && !isDir) {
			return
		}
		if best != nil && e.order >= best.order {
			return
		}
		if e.Hide != always && (e.Hide == "" || !slices.Contains(lists, e.Hide)) {
			return
		}
		if slices.Contains(e.Except, name) {
			return
		}
		for j, part := range e.parts[:n-1] {
			if !part.match(dir[len(dir)-(n-1)+j]) {
				return
			}
		}
		best = e
	}
	for _, e := range idx.byLast[name] {
		try(e)
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		for _, e := range idx.globByExt[name[i+1:]] {
			try(e)
		}
	}
	for _, e := range idx.globLast {
		try(e)
	}
	if best == nil {
		return "", false
	}
	return best.HideRule(), true
}

// Reserved returns why no sandbox may write through a component named
// name, phrased after the name (e.g. "is owned by corral"), or "". It
// compares folded: ".Claims.", "．claims" and ".claims " are reserved.
func Reserved(name string) string {
	f := Fold(name)
	idx := index()
	for _, entries := range [][]*Entry{idx.byFirst[f], idx.globFirst} {
		for _, e := range entries {
			if e.Reserved != "" && len(e.parts) == 1 && e.parts[0].match(f) {
				return e.Reserved
			}
		}
	}
	return ""
}

// ReservedPath returns the rule refusing a write to p because one of its
// components is reserved, naming that component's path, e.g.
// "openwiki/.claims. is owned by corral", or "". p is canonical.
func ReservedPath(p string) string {
	comps := strings.Split(p, "/")
	for i, c := range comps {
		if r := Reserved(c); r != "" {
			return strings.Join(comps[:i+1], "/") + " " + r
		}
	}
	return ""
}

// Risk returns the reasons review rates a change to the file p high,
// shallowest first: "<path>/ holds <risk>" for a matched ancestor,
// "<path> is <risk>" for p itself.
func Risk(p string) []string {
	var out []string
	for _, h := range Match(p, false) {
		if h.Risk == "" {
			continue
		}
		out = append(out, h.Reason())
	}
	return out
}

// Reason words h's risk: "<path>/ holds <risk>" when the path lies below
// the match, "<path> is <risk>" otherwise.
func (h Hit) Reason() string {
	if h.Below {
		return h.Path + "/ holds " + h.Risk
	}
	return h.Path + " is " + h.Risk
}

// part is one folded pattern component: a literal, or, when segs is set,
// a wildcard in which '*' matches any run of characters (the table has no
// other wildcard) between the literal segments.
type part struct {
	lit  string
	segs []string
}

func (p part) match(name string) bool {
	if p.segs == nil {
		return p.lit == name
	}
	first, last := p.segs[0], p.segs[len(p.segs)-1]
	if len(name) < len(first)+len(last) || !strings.HasPrefix(name, first) || !strings.HasSuffix(name, last) {
		return false
	}
	mid := name[len(first) : len(name)-len(last)]
	for _, seg := range p.segs[1 : len(p.segs)-1] {
		i := strings.Index(mid, seg)
		if i < 0 {
			return false
		}
		mid = mid[i+len(seg):]
	}
	return true
}

// tableIndex is the compiled table.
type tableIndex struct {
	all       []*Entry
	order     map[*Entry]int
	byFirst   map[string][]*Entry // by a literal first part
	globFirst []*Entry            // first part has a '*'
	byLast    map[string][]*Entry // by a literal last part
	// A last part with a '*' ending in ".ext" is under globByExt["ext"]
	// (a name it matches has that extension), any other in globLast.
	globByExt map[string][]*Entry
	globLast  []*Entry
}

var index = sync.OnceValue(func() *tableIndex {
	idx := &tableIndex{order: map[*Entry]int{}, byFirst: map[string][]*Entry{}, byLast: map[string][]*Entry{}, globByExt: map[string][]*Entry{}}
	for i := range table {
		e := &table[i]
		p := e.Pattern
		e.dir = strings.HasSuffix(p, "/")
		for _, c := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
			f := Fold(c)
			if f == "" || strings.ContainsAny(f, "?[\\") {
				panic(fmt.Sprintf("names: bad pattern %q", p))
			}
			pt := part{lit: f}
			if strings.Contains(f, "*") {
				pt.segs = strings.Split(f, "*")
			}
			e.parts = append(e.parts, pt)
		}
		for k, x := range e.Except {
			e.Except[k] = Fold(x)
		}
		idx.all = append(idx.all, e)
		idx.order[e] = i
		e.order = i
		if e.parts[0].segs != nil {
			idx.globFirst = append(idx.globFirst, e)
		} else {
			idx.byFirst[e.parts[0].lit] = append(idx.byFirst[e.parts[0].lit], e)
		}
		if last := e.parts[len(e.parts)-1]; last.segs != nil {
			tail := last.segs[len(last.segs)-1]
			if i := strings.LastIndexByte(tail, '.'); i >= 0 {
				idx.globByExt[tail[i+1:]] = append(idx.globByExt[tail[i+1:]], e)
			} else {
				idx.globLast = append(idx.globLast, e)
			}
		} else {
			idx.byLast[last.lit] = append(idx.byLast[last.lit], e)
		}
	}
	return idx
})
