// Package names is corral's one table of special file names, and the one
// folding under which names are compared.
//
// A repository is untrusted: it may hold names that tools and agents act
// on by themselves (AGENTS.md, .claude/, .vscode/tasks.json, .envrc), names
// that carry secrets (.env, id_ed25519, .aws/credentials), and names that
// belong to git or to corral (.git, .claims). Every part of corral that
// judges a name asks this package, so that the view, the write policy, the
// file tools, the change-set collector and review can never disagree:
//
//   - Hidden: the built-in hide lists (agent-config, secrets) and the names
//     hidden in every view (.git), for the view and the read policy;
//     HiddenEntry judges one entry of a directory, for the view's walk;
//   - Reserved: the names no sandbox may ever write (.git, git~1, .claims,
//     ignore files, git control files), for the write policy and the
//     collector;
//   - Match and Risk: every entry a path matches, and the reasons review
//     rates a change to it high risk.
//
// Names are compared folded (Fold): Unicode NFKC, full case folding, format
// and other default-ignorable characters dropped, an NTFS stream suffix
// (":name") cut and trailing dots and spaces dropped, as NTFS does and as
// git's core.protectNTFS and core.protectHFS assume. So ".ｇｉｔ",
// "．claims", "ＡＧＥＮＴＳ.md", ".claims." and ".claims " all name
// the entries they look like. Folding only ever makes more names match: a
// false match hides or refuses a harmless file, a missed one leaks.
//
// The package is pure and platform-neutral; paths are canonical
// repository-relative paths as allowlist.CleanPath produces them.
package names
