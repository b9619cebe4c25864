// Package rootfs is corral's one way to touch a directory tree that someone
// else controls: the repository (untrusted content), the session's write
// area (written by the agent), and the view inside the container. Every
// lookup below such a tree goes through a *Dir, opened once from a trusted
// path with OpenRoot, in the style of runc's internal/pathrs.
//
// # Resolve semantics
//
// A path handed to a *Dir is named unsafePath: it is resolved by the
// kernel with openat2(2), never by string manipulation, under one of two
// named semantics:
//
//   - NoSymlinks (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS):
//     no component may be a symbolic link and ".." cannot climb above the
//     root. For everything that decides or writes: the start checks of a
//     session's write scope (a write directory reached through a link must
//     refuse the start), the copy of an assigned page, review's every read
//     and write of the repository (writes never follow links), the write
//     half of the in-container file tools, and the View's type lookups.
//   - Beneath (RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS): symbolic links are
//     followed, but only while they stay below the root. For the read half
//     of the in-container file tools, which must see the repository's own
//     relative links as the container's kernel does; the host has already
//     judged where each link lands before the call runs.
//
// Magic links (/proc/self/fd/N and friends) are refused by both.
//
// # Why not chroot-style resolution
//
// RESOLVE_IN_ROOT, like filepath-securejoin's SecureJoin, clamps an escape
// to the root: a link to /etc/passwd quietly becomes <root>/etc/passwd and
// ".." at the root stays at the root. That is right for a container
// runtime building a rootfs, and wrong for corral: an agent that asked for
// a path must get the file that path names or a refusal that says why,
// never a different file that happens to exist under the root. So rootfs
// refuses escapes (EXDEV) and links where they are not allowed (ELOOP);
// View.Resolve in package mounts/hidden follows links itself, one
// component at a time through these directories, to name the link that
// escapes.
//
// # Races
//
// openat2 fails with EAGAIN when a rename or a mount anywhere on the
// system raced a lookup that resolved "..". Every openat2 of the package
// goes through one retry loop with a deadline (retryEAGAIN): a lookup that
// keeps racing fails rather than spinning.
//
// Once open, a *Dir pins the directory: its entries are read with
// getdents on a fresh open file description, subdirectories and files are
// opened relative to it with O_NOFOLLOW (a name swapped for a link between
// reading the directory and opening the entry fails with ELOOP instead of
// being followed), and SameInode lets a caller check that what it opened
// is what it examined. Walk visits a tree that way, depth first in name
// order.
//
// # Reads
//
// Nothing but regular files is ever opened for reading (opening a fifo or
// a device has effects), always with O_NONBLOCK|O_NOCTTY, and ReadAtMost
// reads at most one byte past a caller's limit, so a file that grows
// cannot make a reader allocate more than it asked for.
package rootfs
