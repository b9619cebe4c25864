// Package review is the only way a change set reaches a repository.
//
// A change set comes from a sandbox's write area (changeset.Collect) or from a
// patch artifact (ParsePatch, which accepts only git-style unified text
// diffs of regular files and applies them strictly, in memory, to the
// repository's current bytes). Review validates it with the same rules as
// collection and the same write policy as the container's writes and gives
// each change a risk class recomputed from its path and bytes (Classify)
// and an approval token bound to its content. Preview checks it against
// the repository without writing. Apply writes the approved changes, all or
// none, after checking again everything Review and Preview checked: the
// approval check, the risk class and the base hashes live inside the write
// primitive, so that calling it directly cannot skip the reviewer. Apply
// runs as a transaction planned as steps with undos, journaled in corral's
// state directory before the first write and staged inside the write scope;
// Recover finishes or rolls back one a crash interrupted.
//
// Every repository access goes through internal/rootfs under NoSymlinks
// (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS
// from the repository's root) and O_NOFOLLOW below it: a symbolic link anywhere on
// the way refuses the change, and one swapped in during an apply is
// detected before the commit (or, once the commit has begun, not followed:
// the writes land in the directories opened before).
package review
