package rootfs

import (
	"errors"
	"io/fs"

	"golang.org/x/sys/unix"
)

// SkipDir and SkipAll, returned by a Visitor's Entry, skip a directory's
// contents or end the walk; they are io/fs's, so the walk reads like
// fs.WalkDir.
var (
	SkipDir = fs.SkipDir
	SkipAll = fs.SkipAll
)

// Visitor is what Walk calls.
type Visitor struct {
	// Dir, when set, is called with each directory the walk enters, the
	// start included, and its entries (sorted by name), before they are
	// visited: the place to read a directory's own files (an ignore file)
	// or watch it. SkipDir skips the directory's entries.
	Dir func(d *Dir, entries []fs.DirEntry) error
	// Entry is called with each entry of a directory, in name order, and
	// the open directory holding it (d.Join(e.Name()) is its path). For a
	// directory entry, nil enters it right away (depth first), SkipDir
	// does not; SkipAll ends the walk.
	Entry func(d *Dir, e fs.DirEntry) error
}

// Walk visits the tree below start, depth first and in name order: every
// directory is read with getdents on its own descriptor and entered
// through openat(O_NOFOLLOW|O_DIRECTORY) relative to its parent, so the
// walk never follows a symbolic link and never leaves the tree, whatever
// is renamed meanwhile (an entry swapped for a link is not entered:
// ELOOP, returned; one removed since its directory was read is skipped).
// Walk does not close start.
func Walk(start *Dir, v Visitor) error {
	err := walk(start, v)
	if errors.Is(err, SkipAll) {
		return nil
	}
	return err
}

func walk(d *Dir, v Visitor) error {
	entries, err := d.ReadDir(0)
	if err != nil {
		return err
	}
	if v.Dir != nil {
		if err := v.Dir(d, entries); errors.Is(err, SkipDir) {
			return nil
		} else if err != nil {
			return err
		}
	}
	for _, e := range entries {
		err := v.Entry(d, e)
		if errors.Is(err, SkipDir) {
			continue
		}
		if err != nil {
			return err
		}
		if !e.IsDir() {
			continue
		}
		sub, err := d.Sub(e.Name())
		if errors.Is(err, unix.ENOENT) {
			continue // removed since the directory was read
		}
		if err != nil {
			return err
		}
		err = walk(sub, v)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
