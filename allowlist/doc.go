// Package allowlist decides, before anything runs, whether an agent's argv
// is permitted: argv[0] must be a bare name with a grammar in the profile,
// every option must be one the grammar knows (parsed exactly as the tool's
// own getopt_long would), and every path-typed value is canonicalized and
// checked against the session's view and write scope.
//
// A permitted argv is returned normalized (Decision.Argv): options are
// spelled in full and one per argument ("--lines=5", never "-n5", "--li" or
// a cluster), path values are given in their canonical spelling (so the
// kernel resolves exactly the path that was checked), the grammar's fixed
// flags are prepended (sed --sandbox, rg --no-config, git's pinned
// configuration), and "--" stands before the operands of every tool that
// honours it. The executor must run that argv, and only it, with a clean
// environment (no POSIXLY_CORRECT, RIPGREP_CONFIG_PATH, GIT_* or pager
// variables), because the environment can change how a tool parses.
//
// A read-path operand that looks like a URL ("http://x") is what the tool
// takes it for, a relative file name, and is passed in its canonical
// spelling ("http:/x"); option values, write paths and the file tools
// refuse URLs.
//
// CleanPath, CheckRead and CheckWrite are the same path policy for the
// host-side file tools. Grammars are data (Command, usually decoded with
// ParseCatalog from profiles/builtin/tools.yaml); NeverAllowed names the
// programs no grammar may offer.
//
// The package is pure: no OCI, containerd or Linux imports; it runs on any
// OS. What the kernel enforces lives in mounts, seccomp and sandbox.
package allowlist
