package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/sandbox/api"
)

// This file bounds the patches the daemon keeps for their owners. A
// session ended without discard — its owner's DELETE, its idle TTL, in
// Pod mode its Pod's deletion — whose owner is capped (keepsOwn: in Pod
// mode a Pod, outside it a uid but root) keeps its change set under
// STATE_DIR/patches/<owner>/<id>.patch (<owner> the Pod's UID, or
// "uid-N": keptKey) with its record (an api.PodPatch) beside it, so that
// every kept patch is owned, counted, listed and swept alike, in both
// modes:
//
//   - --max-kept-patch-bytes caps the bytes one owner's kept patches
//     hold. A DELETE without discard that would pass it is refused (422)
//     and removes nothing. An end no one can be asked about (idle expiry,
//     the Pod's deletion) never loses the change set: the patch is kept,
//     the owner recorded over budget (audit.PatchBudget), and the owner
//     may create no session until it removes kept patches.
//   - --kept-patch-retention removes a kept patch that long after its
//     session ended, on the prune timer (audit.PatchRemoved).
//   - An owner lists, fetches and removes its own kept patches (GET and
//     DELETE /v1/patches); another owner's answer 404.
//
// Root's sessions (and the CLI's) keep the executor's
// STATE_DIR/patches/<id>.patch, as patches kept before owners had
// directories do: they have no record, so they are root's (the admins')
// alone, listed and served to them.

// ErrPatchBudget is a session end or creation over the daemon's
// --max-kept-patch-bytes: Of is the owner ("pod:UID", "uid:N"), Kept
// the bytes its kept patches hold, Need the patch the end would keep (0 for a
// creation), Budget the cap. It wraps errdefs.ErrResourceExhausted (422
// limit).
type ErrPatchBudget struct {
	Of                 string
	Session            string
	Kept, Need, Budget int64
}

func (e *ErrPatchBudget) Error() string {
	if e.Need == 0 {
		return fmt.Sprintf("kept patches of %s: %s, over the daemon's --max-kept-patch-bytes %s: no new session until they are under it; fetch what you need (GET /v1/patches, GET /v1/patches/{id}) and remove them (DELETE /v1/patches/{id})",
			e.Of, size(e.Kept), size(e.Budget))
	}
	return fmt.Sprintf("session %s: its patch (%s) would put the kept patches of %s (%s) over the daemon's --max-kept-patch-bytes %s; nothing was removed: fetch its diff (GET /v1/sessions/%s/diff?format=patch) and remove it with ?discard=true, or remove kept patches first (DELETE /v1/patches/{id})",
		e.Session, size(e.Need), e.Of, size(e.Kept), size(e.Budget), e.Session)
}

// Unwrap returns errdefs.ErrResourceExhausted.
func (e *ErrPatchBudget) Unwrap() error { return errdefs.ErrResourceExhausted }

// Why a Pod's session ends without discard, as audited; "" is the Pod's
// own DELETE, which the caller answers for. A DELETE and a prune are
// requests, whose caller can be answered: they are sized against
// --max-kept-patch-bytes (asked); an idle expiry is not.
const (
	endByDelete = ""
	endByPrune  = "pruned on request (POST /v1/sessions/prune)"
	endByIdle   = "idle past its TTL"
)

// asked reports whether an end for reason is a caller's request, refused
// rather than kept over the budget.
func asked(reason string) bool { return reason == endByDelete || reason == endByPrune }

// keepsOwn reports whether a session whose owner record is rec keeps
// its patch with its owner's kept patches, counted against
// --max-kept-patch-bytes: in Pod mode a Pod's session (every Pod is
// capped); outside it a session of a uid but root, the owners
// --max-sessions-per-uid counts (ownerCapped).
func (s *Server) keepsOwn(rec ownerRecord) bool {
	if s.podMode() {
		return rec.Pod != ""
	}
	return rec.Pod == "" && rec.UID != 0
}

// keptKey returns the directory, under STATE_DIR/patches, of the kept
// patches of owner (ownerRecord.owner): a Pod's UID for "pod:UID",
// "uid-N" for "uid:N". A name that could leave the directory is refused.
func keptKey(owner string) (string, error) {
	var key string
	if uid, ok := strings.CutPrefix(owner, "pod:"); ok {
		key = uid
	} else if n, ok := strings.CutPrefix(owner, "uid:"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
		key = "uid-" + n
	}
	if key == "" || strings.ContainsAny(key, "/.") || (strings.HasPrefix(key, "uid-") && !strings.HasPrefix(owner, "uid:")) {
		return "", fmt.Errorf("kept patches of %q: %w: not an owner", owner, errdefs.ErrInvalidArgument)
	}
	return key, nil
}

// ownerOfKey is the owner whose kept patches directory key is (keptKey's
// inverse).
func ownerOfKey(key string) string {
	if n, ok := strings.CutPrefix(key, "uid-"); ok {
		return "uid:" + n
	}
	return "pod:" + key
}

// keptDir returns owner's kept patches directory.
func (s *Server) keptDir(owner string) (string, error) {
	key, err := keptKey(owner)
	if err != nil {
		return "", err
	}
	return filepath.Join(s.patchesDir(), key), nil
}

// keptBytes returns the bytes of owner's kept patches (every .patch in
// its directory, pending ends included).
func (s *Server) keptBytes(owner string) (int64, error) {
	dir, err := s.keptDir(owner)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("counting the kept patches of %s: %w", owner, err)
	}
	var n int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".patch") || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("counting the kept patches of %s: %w", owner, err)
		}
		n += info.Size()
	}
	return n, nil
}

// overBudget refuses a creation by owner while its kept patches are over
// --max-kept-patch-bytes (nil when no cap applies).
func (s *Server) overBudget(owner string) error {
	if s.opt.MaxKeptPatchBytes <= 0 {
		return nil
	}
	kept, err := s.keptBytes(owner)
	if err != nil {
		return err
	}
	if kept > s.opt.MaxKeptPatchBytes {
		return &ErrPatchBudget{Of: owner, Kept: kept, Budget: s.opt.MaxKeptPatchBytes}
	}
	return nil
}

// endOwnSession ends session id of the owner rec names (keepsOwn)
// without discard (its DELETE when reason is endByDelete, a prune it
// asked for when endByPrune, else the daemon's: reason says why) and
// keeps its patch with the owner's kept patches (endKeptSession). A
// DELETE whose patch would put the owner over --max-kept-patch-bytes is
// refused first, nothing removed; an end no one is asked about keeps the
// patch whatever its size, and an owner it puts over the budget is
// audited (audit.PatchBudget) and may create no session until under it.
func (s *Server) endOwnSession(ctx context.Context, rec ownerRecord, id, reason string) (api.Removed, error) {
	budget := s.opt.MaxKeptPatchBytes
	var need int64
	if budget > 0 && asked(reason) {
		// Sized before the ends are serialized: a wait for a call slot
		// never holds another owner's end.
		var err error
		if need, err = s.sizeKeptPatch(ctx, id); err != nil {
			if errdefs.IsResourceExhausted(err) || errdefs.IsNotFound(err) || ctx.Err() != nil {
				return api.Removed{}, err
			}
			// A change set that cannot be collected now (the session's
			// repository replaced, its write area lost) cannot be
			// sized: the session ends as an idle expiry does, keeping
			// what the end can keep, and an owner it puts over the
			// budget is refused new sessions (below).
			fmt.Fprintf(s.opt.Log, "corral daemon: session %s: its patch could not be sized against --max-kept-patch-bytes (%v); ended as an expiry is\n", id, err)
			need = 0
		}
	}
	s.patchesMu.Lock()
	defer s.patchesMu.Unlock()
	if budget > 0 && asked(reason) {
		kept, err := s.keptBytes(rec.owner())
		if err != nil {
			return api.Removed{}, err
		}
		if need > 0 && kept+need > budget {
			return api.Removed{}, &ErrPatchBudget{Of: rec.owner(), Session: id, Kept: kept, Need: need, Budget: budget}
		}
	}
	dir, err := s.keptDir(rec.owner())
	if err != nil {
		return api.Removed{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return api.Removed{}, err
	}
	pp, rm, err := s.endKeptSession(ctx, dir, id, reason)
	if err != nil || pp == nil || pp.Path == "" || budget <= 0 {
		return rm, err
	}
	kept, kerr := s.keptBytes(rec.owner())
	if kerr != nil || kept <= budget {
		return rm, kerr
	}
	// Kept over the budget (an end no one could be asked about, or a
	// write between the request's sizing and the end): recorded, never
	// lost; the Pod's creations are refused until it is under.
	fmt.Fprintf(s.opt.Log, "corral daemon: %s: its kept patches hold %s, over --max-kept-patch-bytes %s (session %s's patch kept); its new sessions are refused until it removes kept patches\n",
		rec.owner(), size(kept), size(budget), id)
	if aerr := s.b.Audit(ctx, id, &audit.PatchBudget{Owner: rec.owner(), Kept: kept, Budget: budget, Patch: pp.Path}); aerr != nil {
		return rm, fmt.Errorf("auditing the kept patches over --max-kept-patch-bytes: %w", aerr)
	}
	return rm, nil
}

// sizeKeptPatch returns the size of the patch session id's end would
// keep (Backend.KeptPatchSize: rendered into a counting writer, never
// held whole). Rendering it holds the session's change set in memory, so
// it takes a slot of the call cap for the caller ctx carries, as a diff
// does (at most --max-running at once; 429 busy past the queue wait).
func (s *Server) sizeKeptPatch(ctx context.Context, id string) (int64, error) {
	p, _ := peerOf(ctx)
	release, err := s.lim.acquire(ctx, ownerKey(p), s.ownerCapped(p), "", 0)
	if err != nil {
		return 0, err
	}
	defer release()
	need, err := s.b.KeptPatchSize(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("sizing its patch against the daemon's --max-kept-patch-bytes: %w", err)
	}
	return need, nil
}

// keptPatchOf returns the kept patch id when the peer may see it: an
// admin any, another caller its own owner's (a Pod's, a uid's); else the
// one 404 of a patch that does not exist.
func (s *Server) keptPatchOf(r *http.Request, id string) (api.PodPatch, error) {
	list, err := s.visiblePatches(r)
	if err != nil {
		return api.PodPatch{}, err
	}
	i := slices.IndexFunc(list, func(pp api.PodPatch) bool { return pp.ID == id })
	if !idPattern.MatchString(id) || i < 0 {
		return api.PodPatch{}, fmt.Errorf("patch %s: %w", id, errdefs.ErrNotFound)
	}
	return list[i], nil
}

// visiblePatches lists the kept patches the peer may see.
func (s *Server) visiblePatches(r *http.Request) ([]api.PodPatch, error) {
	p, _ := peerOf(r.Context())
	list, err := s.keptPatches()
	if err != nil || s.admin(p) {
		return list, err
	}
	owner := ownerKey(p)
	return slices.DeleteFunc(list, func(pp api.PodPatch) bool { return pp.OwnedBy != owner }), nil
}

// removePatch is DELETE /v1/patches/{id}: an admin, or the owner of the
// session (its Pod, its uid), removes a kept patch and its record
// (audited).
func (s *Server) removePatch(w http.ResponseWriter, r *http.Request) {
	s.patchesMu.Lock()
	defer s.patchesMu.Unlock()
	id := r.PathValue("id")
	pp, err := s.keptPatchOf(r, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p, _ := peerOf(r.Context())
	who := "its owner Pod"
	if pp.PodUID == "" {
		who = "its owner (" + pp.OwnedBy + ")"
	}
	if s.admin(p) {
		who = "an admin"
	}
	if err := s.dropKept(r.Context(), pp, "removed by "+who); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Removed{Removed: id, Patch: pp.Path})
}

// dropKept removes the kept patch pp (its file and record, in its
// owner's directory only; a patch of root's, in the executor's
// STATE_DIR/patches, has no record) and audits why; s.patchesMu held.
func (s *Server) dropKept(ctx context.Context, pp api.PodPatch, reason string) error {
	if !idPattern.MatchString(pp.ID) {
		return fmt.Errorf("patch %s: %w: not a session id", pp.ID, errdefs.ErrFailedPrecondition)
	}
	var files []string
	dir := s.patchesDir()
	if pp.OwnedBy == "" {
		files = []string{filepath.Join(dir, pp.ID+".patch")}
	} else {
		var err error
		if dir, err = s.keptDir(pp.OwnedBy); err != nil {
			return fmt.Errorf("patch %s: %w", pp.ID, err)
		}
		files = []string{filepath.Join(dir, pp.ID+".patch"), filepath.Join(dir, pp.ID+".json")}
	}
	var errs []error
	for _, f := range files {
		errs = append(errs, removeIfExists(f))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("patch %s: removing it: %w", pp.ID, err)
	}
	owner := orNone(pp.OwnedBy)
	if pp.OwnedBy != "" {
		_ = os.Remove(dir) // the owner's last one: an empty directory goes
	} else {
		owner = "root"
	}
	fmt.Fprintf(s.opt.Log, "corral daemon: %s: kept patch %s removed: %s\n", owner, pp.ID, reason)
	if err := s.b.Audit(ctx, pp.ID, &audit.PatchRemoved{Reason: reason, Pod: pp.PodUID, Patch: pp.Path, Files: pp.Files}); err != nil {
		return fmt.Errorf("patch %s: auditing its removal: %w", pp.ID, err)
	}
	return nil
}

// SweepKeptPatches removes every owned kept patch whose session ended
// at least --kept-patch-retention ago (the prune timer), auditing each.
// Records still pending (a daemon stopped while ending their session)
// are left to EndGonePods; root's patches (no owner, no record) are
// never swept. With no retention it does nothing.
func (s *Server) SweepKeptPatches(ctx context.Context) error {
	if s.opt.KeptPatchRetention <= 0 {
		return nil
	}
	s.patchesMu.Lock()
	defer s.patchesMu.Unlock()
	list, err := s.keptPatches()
	if err != nil {
		return err
	}
	now := s.now()
	reason := fmt.Sprintf("ended more than --kept-patch-retention %s ago", s.opt.KeptPatchRetention)
	var errs []error
	for _, pp := range list {
		if pp.OwnedBy == "" || now.Sub(pp.Ended) < s.opt.KeptPatchRetention {
			continue
		}
		errs = append(errs, s.dropKept(ctx, pp, reason))
	}
	return errors.Join(errs...)
}
