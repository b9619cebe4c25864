// Package ignore implements gitignore(5) for .openwikiignore files with
// git's exact semantics, checked against `git check-ignore --no-index` and
// `git ls-files --others --ignored` by the oracle tests.
//
// go-git's plumbing/format/gitignore was evaluated first and rejected: it
// matches components with filepath.Match and its own "**" loop, and so
// differs from git on `[!a]` and `[[:alpha:]]` classes, `[]a]`, `x**y`,
// a bare `**`, `abc/**` (it also matches abc itself, so `!abc/keep`
// cannot re-include), `a/**/b/c` against a/b/x/b/c (no backtracking),
// and trailing spaces (`foo\ ` followed by spaces becomes `foo\`, which
// matches nothing; tabs are trimmed too). Those are matcher bugs that no
// pre-processing of the lines can fix, so the matcher below is a port of
// git's own wildmatch.c (Rich Salz's public-domain code, as git ships it)
// and of git's dir.c parsing (add_patterns_from_buffer,
// trim_trailing_spaces, parse_path_pattern) and matching
// (match_basename, match_pathname, last_matching_pattern_from_list).
//
// What git gets from walking the tree rather than from pattern matching
// ("a file cannot be re-included when a parent directory is excluded")
// is the caller's: package mounts/hidden does not descend into hidden
// directories and judges every ancestor of a path first.
package ignore
