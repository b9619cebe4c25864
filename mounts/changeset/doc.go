// Package changeset is what a session changed and the one text format it
// travels in.
//
// A Set holds Changes (one regular file created, modified or deleted, with
// its bytes and sha256 digests) and the Problems that reject it. Collect
// reads a Set from an overlay write area's upper directory (CollectPage from
// page mode's single copied file), never following a link and within Limits;
// the same name rules (CheckName, CheckPath) decide what a change may touch
// wherever a change set is read or written.
//
// The format is a git-style unified diff of regular files: Patch renders a
// Set in it (through go-gitdiff's formatter, with hunks from go-udiff), and
// ParsePatch reads it back strictly, refusing everything else (preambles,
// renames, mode changes, binary patches, hunk headers whose counts do not
// match their lines) with the line at fault; the writer and its reader live
// together so that what corral writes is what it accepts. Applying a parsed
// patch to a repository's bytes is FilePatch.Apply; deciding whether a patch
// may touch a path at all is the caller's (package review).
package changeset
