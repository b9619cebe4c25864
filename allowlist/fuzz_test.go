package allowlist

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/corral-sandbox/corral/internal/names"
)

// fuzzSeeds are argvs from the hostile cases and the control forms, joined
// with "\n" (the fuzzer's argv separator).
var fuzzSeeds = [][]string{
	a("find", ".", "-name", "*.md", "-exec", "sh", "-c", "id", "{}", ";"),
	a("find", ".", "-name", "*.md", "-print"),
	a("find", "-P", "src", "(", "-type", "f", "-o", "-empty", ")", "-newer", "README.md", "-print0"),
	a("sed", "-n", "1e id", "README.md"),
	a("sed", "s/.*/id/e", "README.md"),
	a("sed", "-n", "1,40p", "README.md"),
	a("sed", "-ne", "/a/,+3p;$p", "-e", "s|x|y|g", "README.md"),
	a("sed", "--in-place=.bak", "s/a/b/", "x"),
	a("rg", "--pre", "sh", "x", "."),
	a("rg", "x", ".", "--pre", "sh"),
	a("rg", "-e", "x", "--ignore-file", "README.md", "--", "-rf"),
	a("rg", "-uuu", "SECRET"),
	a("git", "-c", "core.pager=sh -c id", "log"),
	a("git", "log", "-1", "--", "--output=x"),
	a("git", "diff", "--no-index", "openwiki/a", "/etc/shadow"),
	a("git", "grep", "-n", "TODO", "HEAD", "--", "src"),
	a("grep", "x", "--", "-f"),
	a("grep", "-rnf", "README.md", "src"),
	a("grep", "x", "--exclude-from=.env", "README.md"),
	a("grep", "--ex=x", "-5", "y"),
	a("file", "-m", "secrets/key.pem", "README.md"),
	a("uniq", "README.md", "openwiki/../README.md"),
	a("cat", "openwiki/*"),
	a("cat", "docs/readme", "docs/k", "docs/up/x"),
	a("./cat", "x"),
	a("PAGER=id", "git", "log"),
	a("touch", "openwiki-old/x.md"),
	a("touch", "openwiki/.. /x"),
	a("touch", "-r", "README.md", "openwiki/a/b"),
	a("cp", "a", "openwiki/assets/"),
	a("cp", "-t", "openwiki", "src/a", "src/b"),
	a("mv", "openwiki/a", "openwiki/b"),
	a("mkdir", "-p", "openwiki/.claims"),
	a("rm", "-rf", "openwiki/x"),
	a("head", "-5", "README.md"),
	a("ls", "-laR", "--col=never", "src"),
	a("sort", "-o", "x", "y"),
	a("diff", "--to-file=src", "a", "b"),
	a("tr", "-d", "-"),
}

// FuzzCheck: Check never panics, and what it permits is within the
// policy: argv[0] is on the allowlist and never a forbidden program; every
// read path is canonical, resolves in the view and is not hidden; every
// write path is inside the scope, lexically and resolved, and reserved
// names never appear; the normalized argv is accepted again with the same
// paths.
func FuzzCheck(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(strings.Join(s, "\n"), uint8(0))
	}
	f.Add("touch\nopenwiki/pages/a.md", uint8(1))
	f.Add("cp\nREADME.md\nopenwiki/pages/a.md/", uint8(1))
	withGit, _ := catalogs(f)
	v := newFakeView()
	scopes := []Scope{dirScope, pageScope, roScope, {Dir: "."}}
	f.Fuzz(func(t *testing.T, joined string, scopeSel uint8) {
		argv := strings.Split(joined, "\n")
		scope := scopes[int(scopeSel)%len(scopes)]
		d, err := Check(withGit, v, scope, argv)
		if err != nil {
			var ref *Refusal
			if !errors.As(err, &ref) {
				t.Fatalf("Check(%q) failed without a refusal: %v", argv, err)
			}
			if ref.Index >= len(argv) || ref.Index < -1 {
				t.Fatalf("Check(%q) refusal index %d out of range", argv, ref.Index)
			}
			return
		}
		if len(d.Argv) == 0 || d.Argv[0] != argv[0] || withGit[argv[0]] == nil || NeverAllowed(argv[0]) {
			t.Fatalf("Check(%q) permitted argv[0] %q", argv, d.Argv)
		}
		for _, p := range d.Reads {
			assertReadable(t, v, argv, p)
		}
		for _, p := range d.Writes {
			assertReadable(t, v, argv, p)
			r, _ := v.Resolve(p)
			switch {
			case scope.ReadOnly:
				t.Fatalf("Check(%q) permitted a write in a read-only session", argv)
			case scope.Page != "":
				if p != scope.Page || r != scope.Page {
					t.Fatalf("Check(%q) permitted write %q in page mode", argv, p)
				}
			case !within(p, scope.Dir) || !within(r, scope.Dir):
				t.Fatalf("Check(%q) permitted write %q (-> %q) outside %q", argv, p, r, scope.Dir)
			}
			if names.ReservedPath(p) != "" || names.ReservedPath(r) != "" {
				t.Fatalf("Check(%q) permitted write to reserved %q", argv, p)
			}
		}
		if argv[0] == "git" {
			return // git's pinned -c flags are not options an agent may give
		}
		d2, err := Check(withGit, v, scope, d.Argv)
		if err != nil {
			t.Fatalf("normalized %q of %q refused: %v", d.Argv, argv, err)
		}
		if !slices.Equal(d.Reads, d2.Reads) || !slices.Equal(d.Writes, d2.Writes) {
			t.Fatalf("normalized %q of %q changed paths: %q/%q vs %q/%q", d.Argv, argv, d.Reads, d.Writes, d2.Reads, d2.Writes)
		}
	})
}

func assertReadable(t *testing.T, v *fakeView, argv []string, p string) {
	t.Helper()
	if c, err := CleanPath(p); err != nil || c != p {
		t.Fatalf("Check(%q) recorded non-canonical path %q", argv, p)
	}
	r, err := v.Resolve(p)
	if err != nil {
		t.Fatalf("Check(%q) permitted %q which does not resolve: %v", argv, p, err)
	}
	for _, q := range []string{p, r} {
		if rule, hidden := v.Hidden(q); hidden {
			t.Fatalf("Check(%q) permitted hidden %q (%s)", argv, q, rule)
		}
		if _, git := names.Hidden(q, false); git {
			t.Fatalf("Check(%q) permitted .git path %q", argv, q)
		}
	}
}
