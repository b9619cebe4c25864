package review

import (
	"fmt"
	"path"

	"github.com/corral-sandbox/corral/mounts/changeset"
)

// The operations of a transaction's steps, as journaled.
const (
	opMkdirBase = "mkdir-base" // make a missing directory of the scope's base, shallowest first
	opStage     = "stage"      // make the staging directory inside the base
	opTemp      = "write-temp" // write a new content into staging/Temp
	opKeep      = "keep"       // give a modified file's base a second name (or a copy) at staging/Keep
	opVerify    = "verify"     // check that nothing moved since the plan
	opDelete    = "delete"     // move Path aside into staging/Temp
	opRmdir     = "rmdir"      // remove a directory a created file replaces
	opMkdir     = "mkdir"      // make a missing directory below the base
	opCreate    = "create"     // move staging/Temp to Path, which must not exist
	opModify    = "modify"     // swap staging/Temp and Path (or replace Path)
	opSync      = "sync"       // fsync every directory written
	opCommit    = "commit"     // record the transaction as committed
	opFinish    = "finish"     // remove the staging directory and the journal
)

// txStep is one step of an apply transaction. The exported fields are
// journaled: they are all a later recovery needs to undo the step or to
// finish the transaction. Contents are bound by their digests only.
type txStep struct {
	Op   string `json:"op"`
	Path string `json:"path,omitempty"`
	// Temp and Keep are names inside the staging directory.
	Temp string `json:"temp,omitempty"`
	Keep string `json:"keep,omitempty"`
	// Mode is the mode of a directory made again by an undo.
	Mode   uint32 `json:"mode,omitempty"`
	Before string `json:"before,omitempty"` // sha256 of the base bytes
	After  string `json:"after,omitempty"`  // sha256 of the new bytes

	// What doing the step needs; not journaled.
	o        *op    // the change (temp, keep, delete, create, modify)
	data     []byte // bytes to write (temp, keep)
	mode     uint32 // file mode to give (temp, keep)
	uid, gid int    // owner to give, -1 for none (temp, keep)
}

// facts is what inspecting the repository found that the plan depends on.
type facts struct {
	// base is the scope's base directory; baseMissing are its missing
	// ancestors and itself, shallowest first.
	base        string
	baseMissing []string
	// rmdirs are directories created files replace, deepest first, with
	// their modes; mkdirs are missing directories below the base,
	// shallowest first.
	rmdirs []dirMode
	mkdirs []string
	// baseUID and baseGID own the deepest existing directory of the base
	// chain; new files get them when root applies.
	baseUID, baseGID int
	// root is whether the applying process may give files away.
	root bool
}

type dirMode struct {
	rel  string
	mode uint32
}

// stagingName is the staging directory of transaction id, inside the
// scope's base directory.
func stagingName(id string) string { return ".corral-apply-" + id }

// planSteps is the transaction for ops, given what inspection found: a
// pure function from the approved changes to an ordered list of steps,
// each with its undo (see txStep.do and txStep.undo). ops are in path
// order.
func planSteps(id string, ops []*op, f facts) []*txStep {
	staging := path.Join(f.base, stagingName(id))
	var steps []*txStep
	for _, d := range f.baseMissing {
		steps = append(steps, &txStep{Op: opMkdirBase, Path: d, Mode: 0o755})
	}
	steps = append(steps, &txStep{Op: opStage, Path: staging, Mode: 0o700})
	var writes, deletes []*op
	for _, o := range ops {
		if o.write() {
			writes = append(writes, o)
		} else {
			deletes = append(deletes, o)
		}
	}
	for i, o := range writes {
		temp := fmt.Sprintf("w%d", i)
		mode, uid, gid := uint32(0o644), -1, -1
		if f.root {
			uid, gid = f.baseUID, f.baseGID
		}
		if o.c.ch.Kind == changeset.Modify {
			mode, uid, gid = o.orig.Mode&0o777, int(o.orig.Uid), int(o.orig.Gid)
		}
		o.temp = temp
		steps = append(steps, &txStep{Op: opTemp, Temp: temp, After: o.c.after, o: o, data: o.c.ch.After, mode: mode, uid: uid, gid: gid})
		if o.c.ch.Kind == changeset.Modify {
			o.keep = fmt.Sprintf("o%d", i)
			steps = append(steps, &txStep{Op: opKeep, Path: o.rel, Keep: o.keep, Before: o.c.before, o: o, data: o.c.ch.Before, mode: mode, uid: uid, gid: gid})
		}
	}
	steps = append(steps, &txStep{Op: opVerify})
	for i, o := range deletes {
		o.temp = fmt.Sprintf("d%d", i)
		steps = append(steps, &txStep{Op: opDelete, Path: o.rel, Temp: o.temp, Before: o.c.before, o: o})
	}
	for _, d := range f.rmdirs {
		steps = append(steps, &txStep{Op: opRmdir, Path: d.rel, Mode: d.mode})
	}
	for _, d := range f.mkdirs {
		steps = append(steps, &txStep{Op: opMkdir, Path: d, Mode: 0o755})
	}
	for _, o := range writes {
		s := &txStep{Op: opCreate, Path: o.rel, Temp: o.temp, After: o.c.after, o: o}
		if o.c.ch.Kind == changeset.Modify {
			s.Op, s.Keep, s.Before = opModify, o.keep, o.c.before
		}
		steps = append(steps, s)
	}
	return append(steps, &txStep{Op: opSync}, &txStep{Op: opCommit}, &txStep{Op: opFinish})
}
