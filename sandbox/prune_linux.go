package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/corral-sandbox/corral/mounts/changeset"
)

// Ended is a session removed with its change set kept: by Prune (it
// expired), by EndSession (its server ended), or by a sweep.
type Ended struct {
	ID   string `json:"id"`
	Repo string `json:"repo"`
	// Patch is the file under StateDir/patches that keeps the session's
	// change set as a unified patch (git apply-able); "" when the session
	// had no change.
	Patch string `json:"patch,omitempty"`
	// Changes counts the changes in Patch.
	Changes int `json:"changes"`
	// Violations are the changes the set was rejected for; they are left
	// out of Patch and listed here instead.
	Violations []changeset.Problem `json:"violations,omitempty"`
	// Lost says why nothing could be kept (the write area was gone).
	Lost string `json:"lost,omitempty"`
}

// patchesDir is where ended sessions' change sets are kept.
func (e *Executor) patchesDir() string { return filepath.Join(e.cfg.StateDir, "patches") }

// Prune removes the persistent sessions that have gone unused for longer
// than their idle TTL and that no process has open, each non-empty change
// set kept as StateDir/patches/<id>.patch. It needs no containerd (a
// container an expired session left is reaped by the next container
// sweep). Every New prunes (Sweep); a long-lived owner also calls it on a
// timer.
//
// The report includes what this executor's own start pruned.
func (e *Executor) Prune(ctx context.Context) ([]Ended, error) {
	rep, err := e.sweepSessions(ctx, false)
	swept := e.takeSwept()
	pruned := append(append([]Ended{}, swept.Pruned...), rep.Pruned...)
	return pruned, err
}

// EndSession removes the persistent session id like RemoveSession, but
// first keeps its change set as a patch file, as Prune does: what an
// agent wrote is never silently lost. `serve --mcp --repo` ends the
// session it made this way when it exits. A session another process has
// open is refused (errdefs.ErrFailedPrecondition); an unknown id wraps
// errdefs.ErrNotFound.
func (e *Executor) EndSession(ctx context.Context, id string) (Ended, error) {
	dir, err := e.sessionDir(id)
	if err != nil {
		return Ended{}, err
	}
	rec, err := readRecord(dir)
	if err != nil {
		return Ended{}, err
	}
	release, free := tryExclusive(dir)
	if !free {
		return Ended{}, fmt.Errorf("session %s: %w: a process has it open", id, errdefs.ErrFailedPrecondition)
	}
	defer release()
	if err := e.reapSession(ctx, id); err != nil {
		return Ended{}, err
	}
	return e.end(ctx, dir, rec)
}

// end keeps the change set of the session in dir (held exclusively by
// the caller) and removes the session.
func (e *Executor) end(_ context.Context, dir string, rec SessionRecord) (Ended, error) {
	ended := Ended{ID: rec.ID, Repo: rec.Repo, Violations: []changeset.Problem{}}
	cs, err := offlineChanges(&store{dir: dir, record: rec})
	switch {
	case errors.Is(err, mounts.ErrNotMounted) || errdefs.IsDataLoss(err):
		ended.Lost = "the write area was gone (the machine rebooted, or its mounts were removed)"
	case err != nil:
		return ended, fmt.Errorf("session %s: keeping its change set: %w", rec.ID, err)
	default:
		ended.Violations = append(ended.Violations, cs.Violations...)
		keep := &changeset.Set{}
		for _, c := range cs.Changes {
			if !slices.ContainsFunc(cs.Violations, func(v changeset.Problem) bool { return v.Path == c.Path }) {
				keep.Changes = append(keep.Changes, c)
			}
		}
		if len(keep.Changes) > 0 {
			patch, err := changeset.Patch(keep)
			if err != nil {
				return ended, fmt.Errorf("session %s: keeping its change set: %w", rec.ID, err)
			}
			if err := os.MkdirAll(e.patchesDir(), 0o700); err != nil {
				return ended, err
			}
			p := filepath.Join(e.patchesDir(), rec.ID+".patch")
			if err := writeFileAtomic(p, patch); err != nil {
				return ended, fmt.Errorf("session %s: keeping its change set: %w", rec.ID, err)
			}
			ended.Patch, ended.Changes = p, len(keep.Changes)
		}
	}
	if err := removeSessionDir(dir); err != nil {
		return ended, err
	}
	return ended, nil
}

// offlineChanges collects the change set of the session st without
// opening it: no rescan, no inuse lock (the caller holds it
// exclusively), the mounts only read. The repository may be gone.
func offlineChanges(st *store) (*changeset.Set, error) {
	prof, err := st.profile()
	if err != nil {
		return nil, err
	}
	hs, err := st.hiddenSet()
	if err != nil {
		return nil, err
	}
	p, err := policyOf(st.config(prof), st.record.Repo, hs, st.layoutDir())
	if err != nil {
		return nil, err
	}
	l, err := mounts.Open(st.layoutDir(), p.plan)
	if err != nil {
		return nil, err
	}
	return collect(p, l)
}

// writeFileAtomic writes data to p through a synced temporary file and a
// rename, so p is either absent or whole.
func writeFileAtomic(p string, data []byte) error {
	tmp := p + ".tmp"
	_ = os.Remove(tmp)
	if err := writeFileSync(tmp, data); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// RemoveSession removes a persistent session: its containers (a running
// invocation is killed; when containerd cannot be reached they are left
// to the next container sweep, and their tools to corral-init's
// deadline), its host mounts (unmounted deepest first, never removed
// across a mount) and its state directory. What the session wrote is
// gone with it; collect its change set first, or use EndSession. An
// unknown id wraps errdefs.ErrNotFound.
func (e *Executor) RemoveSession(ctx context.Context, id string) error {
	dir, err := e.sessionDir(id)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(filepath.Join(dir, recordFile)); err != nil {
		return fmt.Errorf("session %s: %w", id, errdefs.ErrNotFound)
	}
	if err := e.reapSession(ctx, id); err != nil {
		return err
	}
	return removeSessionDir(dir)
}

// reapSession kills and deletes the session's containers, when containerd
// answers.
func (e *Executor) reapSession(ctx context.Context, id string) error {
	client, err := e.Connect(ctx)
	if err != nil {
		fmt.Fprintf(e.cfg.Log, "corral: session %s: its containers are left to the next sweep: %v\n", id, oneLine(err))
		return nil
	}
	cctx, cancel := context.WithTimeout(e.Context(ctx), time.Minute)
	defer cancel()
	filter := fmt.Sprintf("labels.%q==corral,labels.%q==%q,labels.%q==%q", LabelOwner, LabelStateDir, e.cfg.StateDir, LabelSession, id)
	cs, err := client.Containers(cctx, filter)
	if err != nil {
		return e.wrapContainerd("listing the session's containers", err)
	}
	var errs []error
	for _, c := range cs {
		if err := e.reap(cctx, c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
