// Package allowlist decides, before anything runs, whether an agent's argv
// is permitted: argv[0] must be a bare name with a grammar in the profile,
// every option must be one the grammar knows (parsed exactly as the tool's
// own getopt_long would), and every path-typed value is canonicalized and
// checked against the session's view and write scope.
//
// The package is pure: no OCI, containerd or Linux imports; it runs on any
// OS. What the kernel enforces lives in mounts, seccomp and sandbox.
package allowlist
