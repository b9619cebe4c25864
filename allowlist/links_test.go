package allowlist

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// followRule is the rule every dereferencing form of a recursive tool is
// refused by (profiles/builtin/tools.yaml, find.go).
const followRule = "recursive tools never follow symbolic links"

// TestRecursiveToolsNeverFollowLinks: every tool whose grammar recurses
// refuses the forms that follow symbolic links found inside directories
// (ls -L, ls -R with -H, grep -R, rg -L, find -L/-H/-follow/-xtype, cp
// -L/-H) in every spelling getopt accepts, naming the rule, or runs with
// the non-dereferencing form pinned (find -P, diff --no-dereference). cp
// never makes a link (-s, -l, -a, -d).
func TestRecursiveToolsNeverFollowLinks(t *testing.T) {
	runRows(t, []checkRow{
		// ls: -L follows every link it lists; -H only operands, which the
		// policy resolved, but not while recursing.
		{argv: a("ls", "-L", "src"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("ls", "--dereference", "src"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("ls", "--dereference=x", "src"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("ls", "--deref", "src"), kind: KindArg, index: 1, rule: "ambiguous"},
		{argv: a("ls", "-lL", "src"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("ls", "-Ll", "src"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("ls", "-RL", "src"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("ls", "-aRL", "."), kind: KindArg, index: 1, rule: followRule},
		{argv: a("ls", "-l", "src", "-L"), kind: KindArg, index: 3, rule: followRule},
		{argv: a("ls", "-RH", "src"), kind: KindArg, index: 1, rule: "options --recursive and --dereference-command-line are not allowed together for ls: " + followRule},
		{argv: a("ls", "-HR", "src"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("ls", "-R", "-H", "src"), kind: KindArg, index: 2, rule: followRule},
		{argv: a("ls", "-H", "-R", "src"), kind: KindArg, index: 2, rule: followRule},
		{argv: a("ls", "--recursive", "--dereference-command-line", "src"), kind: KindArg, index: 2, rule: followRule},
		{argv: a("ls", "--rec", "--dereference-command-line", "src"), kind: KindArg, index: 2, rule: followRule},
		{argv: a("ls", "-H", "src", "--recursive"), kind: KindArg, index: 3, rule: followRule},
		{argv: a("ls", "-lRaH", "src"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("ls", "-lH", "src"), want: a("ls", "-l", "--dereference-command-line", "--", "src")},
		{argv: a("ls", "-laR", "src"), want: a("ls", "-l", "--all", "--recursive", "--", "src")},

		// grep: -r follows only links named as operands; -R all of them.
		{argv: a("grep", "-R", "x", "src"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("grep", "-rR", "x", "src"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("grep", "-nR", "x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("grep", "-Rn", "x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("grep", "--dereference-recursive", "x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("grep", "--dereference", "x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("grep", "--der", "x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("grep", "--deref=1", "x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("grep", "x", "src", "-R"), kind: KindArg, index: 3, rule: followRule},
		{argv: a("grep", "-e", "x", "-inR", "src"), kind: KindArg, index: 3, rule: followRule},
		{argv: a("grep", "-rn", "x", "src"), want: a("grep", "--recursive", "--line-number", "--", "x", "src")},
		{argv: a("grep", "-d", "recurse", "x", "src"), want: a("grep", "--directories=recurse", "--", "x", "src")},

		// rg (clap: no abbreviations): -L/--follow.
		{argv: a("rg", "-L", "x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("rg", "-nL", "x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("rg", "-Ln", "x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("rg", "--follow", "x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("rg", "--follow=yes", "x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("rg", "x", "src", "-L"), kind: KindArg, index: 3, rule: followRule},
		{argv: a("rg", "--fol", "x"), kind: KindArg, index: 1, rule: "unknown option"},
		{argv: a("rg", "-n", "x", "src"), want: a("rg", "--no-config", "--line-number", "--", "x", "src")},

		// find: -P is pinned; -H, -L, -follow and -xtype are refused.
		{argv: a("find", "-L", "."), kind: KindArg, index: 1, rule: followRule},
		{argv: a("find", "-H", "."), kind: KindArg, index: 1, rule: followRule},
		{argv: a("find", "-P", "-L", "."), kind: KindArg, index: 2, rule: followRule},
		{argv: a("find", "-P", "-H", "src"), kind: KindArg, index: 2, rule: followRule},
		{argv: a("find", "-H", "-P", "."), kind: KindArg, index: 1, rule: followRule},
		{argv: a("find", "-HL", "."), kind: KindArg, index: 1, rule: "unknown find expression"},
		{argv: a("find", ".", "-L"), kind: KindArg, index: 2, rule: "unknown find expression"},
		{argv: a("find", ".", "-follow"), kind: KindArg, index: 2, rule: followRule},
		{argv: a("find", ".", "-name", "x", "-o", "-follow"), kind: KindArg, index: 5, rule: followRule},
		{argv: a("find", ".", "-xtype", "l"), kind: KindArg, index: 2, rule: followRule},
		{argv: a("find", ".", "!", "-xtype", "f"), kind: KindArg, index: 3, rule: followRule},
		{argv: a("find", "."), want: a("find", "-P", ".")},
		{argv: a("find"), want: a("find", "-P")},
		{argv: a("find", "-P", "-P", "src", "-type", "l"), want: a("find", "-P", "src", "-type", "l")},

		// cp: no dereferencing, no links made.
		{argv: a("cp", "-L", "src", "openwiki/x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("cp", "-rL", "src", "openwiki/x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("cp", "-Lr", "src", "openwiki/x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("cp", "--dereference", "-r", "src", "openwiki/x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("cp", "--deref", "-r", "src", "openwiki/x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("cp", "--dereference=1", "src", "openwiki/x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("cp", "-r", "src", "openwiki/x", "-L"), kind: KindArg, index: 4, rule: followRule},
		{argv: a("cp", "-H", "src", "openwiki/x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("cp", "-rH", "src", "openwiki/x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("cp", "-rTH", "src", "openwiki/x"), kind: KindArg, index: 1, rule: followRule},
		{argv: a("cp", "-s", "README.md", "openwiki/x"), kind: KindArg, index: 1, rule: "no tool makes links"},
		{argv: a("cp", "-rs", "src", "openwiki/x"), kind: KindArg, index: 1, rule: "no tool makes links"},
		{argv: a("cp", "--symbolic-link", "README.md", "openwiki/x"), kind: KindArg, index: 1, rule: "no tool makes links"},
		{argv: a("cp", "--sym", "README.md", "openwiki/x"), kind: KindArg, index: 1, rule: "no tool makes links"},
		{argv: a("cp", "-l", "README.md", "openwiki/x"), kind: KindArg, index: 1, rule: "no tool makes links"},
		{argv: a("cp", "-rl", "src", "openwiki/x"), kind: KindArg, index: 1, rule: "no tool makes links"},
		{argv: a("cp", "--link", "README.md", "openwiki/x"), kind: KindArg, index: 1, rule: "no tool makes links"},
		{argv: a("cp", "--li", "README.md", "openwiki/x"), kind: KindArg, index: 1, rule: "no tool makes links"},
		{argv: a("cp", "-a", "src", "openwiki/x"), kind: KindArg, index: 1, rule: "no tool makes links"},
		{argv: a("cp", "-rd", "src", "openwiki/x"), kind: KindArg, index: 1, rule: "no tool makes links"},
		{argv: a("cp", "-rT", "src", "openwiki/x"), want: a("cp", "--recursive", "--no-target-directory", "--", "src", "openwiki/x")},
		{argv: a("cp", "-rP", "src", "openwiki/x"), want: a("cp", "--recursive", "--no-dereference", "--", "src", "openwiki/x")},

		// diff: --no-dereference is pinned, whatever else is given.
		{argv: a("diff", "-r", "src", "docs"), want: a("diff", "--no-dereference", "--recursive", "--", "src", "docs")},
		{argv: a("diff", "-ru", "src", "docs"), want: a("diff", "--no-dereference", "--recursive", "-u", "--", "src", "docs")},
		{argv: a("diff", "--no-d", "-r", "src", "docs"), want: a("diff", "--no-dereference", "--no-dereference", "--recursive", "--", "src", "docs")},
		{argv: a("diff", "README.md", "docs/readme"), want: a("diff", "--no-dereference", "--", "README.md", "docs/readme")},

		// Tools that never recurse follow only their operands, which the
		// policy resolved inside the view.
		{argv: a("file", "-L", "docs/readme"), want: a("file", "--dereference", "--", "docs/readme")},
		{argv: a("stat", "-L", "docs/readme"), want: a("stat", "--dereference", "--", "docs/readme")},
		{argv: a("file", "-L", "docs/passwd"), kind: KindPath, index: 2, rule: "resolves outside the repository"},
	})
}

// TestConflicts: a conflict refuses its options only together, in any
// order and spelling, at the index of the later one; a malformed conflict
// is a grammar error.
func TestConflicts(t *testing.T) {
	c := &Command{
		Name: "tool", EndOfOptions: true, Abbreviations: true,
		Options: []Option{
			{Short: "r", Long: "recursive"},
			{Short: "f", Long: "follow"},
			{Short: "x"},
			{Short: "d", Deny: "no"},
		},
		Layout:    Layout{Operands: []Operand{{Type: TypePattern, Variadic: true}}},
		Conflicts: []Conflict{{Options: []string{"recursive", "follow"}, Reason: "never both"}},
	}
	require.NoError(t, c.Validate())
	cmds := map[string]*Command{"tool": c}
	for _, tc := range []struct {
		argv  []string
		index int // -1: permitted
	}{
		{a("tool", "-r", "x"), -1},
		{a("tool", "-f", "x"), -1},
		{a("tool", "-rf", "x"), 1},
		{a("tool", "-fr"), 1},
		{a("tool", "-r", "y", "--fol"), 3},
		{a("tool", "--follow", "-x", "--rec"), 3},
	} {
		_, err := Check(cmds, newFakeView(), dirScope, tc.argv)
		if tc.index < 0 {
			require.NoError(t, err, "%q", tc.argv)
			continue
		}
		var ref *Refusal
		require.ErrorAs(t, err, &ref, "%q", tc.argv)
		require.Equal(t, KindArg, ref.Kind)
		require.Equal(t, tc.index, ref.Index, "%q: %v", tc.argv, ref)
		require.Equal(t, "options --recursive and --follow are not allowed together for tool: never both", ref.Rule)
	}

	for _, bad := range []Conflict{
		{Options: []string{"recursive"}, Reason: "r"},
		{Options: []string{"recursive", "follow"}},
		{Options: []string{"recursive", "nope"}, Reason: "r"},
		{Options: []string{"recursive", "d"}, Reason: "r"},
		{Options: []string{"recursive", "r", "follow"}, Reason: "r"},
		{Options: []string{"recursive", "recursive"}, Reason: "r"},
	} {
		cc := *c
		cc.Conflicts = []Conflict{bad}
		require.Error(t, cc.Validate(), "%+v", bad)
	}
	f := &Command{Name: "find", Syntax: SyntaxFind, Conflicts: c.Conflicts}
	require.Error(t, f.Validate())
}
