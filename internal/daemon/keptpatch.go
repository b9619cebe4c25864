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

// This file bounds the patches the daemon keeps in Pod mode. A session
// a Pod owns that ends without discard — its own DELETE, its idle TTL,
// its Pod's deletion — keeps its change set under
// STATE_DIR/patches/<pod uid>/<id>.patch with its record (an
// api.PodPatch) beside it, so that every kept patch is owned, counted,
// listed and swept alike:
//
//   - --max-kept-patch-bytes caps the bytes one Pod's kept patches hold.
//     A DELETE without discard that would pass it is refused (422) and
//     removes nothing. An end no one can be asked about (idle expiry, the
//     Pod's deletion) never loses the change set: the patch is kept, the
//     owner recorded over budget (audit.PatchBudget), and the Pod may
//     create no session until it removes kept patches.
//   - --kept-patch-retention removes a kept patch that long after its
//     session ended, on the prune timer (audit.PatchRemoved).
//   - A Pod lists, fetches and removes its own kept patches (GET and
//     DELETE /v1/patches); another Pod's answer 404.

// ErrPatchBudget is a session end or creation over the daemon's
// --max-kept-patch-bytes: Of is the owner ("pod:UID"), Kept the bytes
// its kept patches hold, Need the patch the end would keep (0 for a
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

// keptBytes returns the bytes of Pod uid's kept patches (every .patch
// under STATE_DIR/patches/<uid>, pending ends included).
func (s *Server) keptBytes(uid string) (int64, error) {
	entries, err := os.ReadDir(filepath.Join(s.podPatchesDir(), uid))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("counting the kept patches of pod:%s: %w", uid, err)
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
			return 0, fmt.Errorf("counting the kept patches of pod:%s: %w", uid, err)
		}
		n += info.Size()
	}
	return n, nil
}

// overBudget refuses a creation by Pod uid while its kept patches are
// over --max-kept-patch-bytes (nil when no cap applies).
func (s *Server) overBudget(uid string) error {
	if s.opt.MaxKeptPatchBytes <= 0 {
		return nil
	}
	kept, err := s.keptBytes(uid)
	if err != nil {
		return err
	}
	if kept > s.opt.MaxKeptPatchBytes {
		return &ErrPatchBudget{Of: "pod:" + uid, Kept: kept, Budget: s.opt.MaxKeptPatchBytes}
	}
	return nil
}

// endOwnSession ends Pod rec.Pod's session id without discard (its
// DELETE when reason is endByDelete, a prune it asked for when
// endByPrune, else the daemon's: reason says why)
// and keeps its patch with the Pod's kept patches (endPodSession). A
// DELETE whose patch would put the Pod over --max-kept-patch-bytes is
// refused first, nothing removed; an end no one is asked about keeps the
// patch whatever its size, and a Pod it puts over the budget is audited
// (audit.PatchBudget) and may create no session until under it.
func (s *Server) endOwnSession(ctx context.Context, rec ownerRecord, id, reason string) (api.Removed, error) {
	s.patchesMu.Lock()
	defer s.patchesMu.Unlock()
	budget := s.opt.MaxKeptPatchBytes
	if budget > 0 && asked(reason) {
		need, err := s.b.KeptPatchSize(ctx, id)
		if err != nil {
			return api.Removed{}, fmt.Errorf("sizing its patch against the daemon's --max-kept-patch-bytes: %w", err)
		}
		kept, err := s.keptBytes(rec.Pod)
		if err != nil {
			return api.Removed{}, err
		}
		if need > 0 && kept+need > budget {
			return api.Removed{}, &ErrPatchBudget{Of: rec.owner(), Session: id, Kept: kept, Need: need, Budget: budget}
		}
	}
	dir := filepath.Join(s.podPatchesDir(), rec.Pod)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return api.Removed{}, err
	}
	pp, rm, err := s.endPodSession(ctx, rec.Pod, dir, id, reason)
	if err != nil || pp == nil || pp.Path == "" || budget <= 0 {
		return rm, err
	}
	kept, kerr := s.keptBytes(rec.Pod)
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

// keptPatchOf returns the kept patch id when the peer may see it: an
// admin any, in Pod mode a Pod its own; else the one 404 of a patch that
// does not exist. Outside Pod mode a non-admin is refused.
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
	if !s.admin(p) && (!s.podMode() || p.Pod == "") {
		return nil, errAdminsOnly("patches")
	}
	list, err := s.podPatches()
	if err != nil || s.admin(p) {
		return list, err
	}
	return slices.DeleteFunc(list, func(pp api.PodPatch) bool { return pp.PodUID != p.Pod }), nil
}

// removePatch is DELETE /v1/patches/{id}: an admin, or the Pod that owned
// the session, removes a kept patch and its record (audited).
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
	if s.admin(p) {
		who = "an admin"
	}
	if err := s.dropKept(r.Context(), pp, "removed by "+who); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Removed{Removed: id, Patch: pp.Path})
}

// dropKept removes the kept patch pp (its file and record, under
// STATE_DIR/patches/<pod uid> only) and audits why; s.patchesMu held.
func (s *Server) dropKept(ctx context.Context, pp api.PodPatch, reason string) error {
	if !idPattern.MatchString(pp.ID) || pp.PodUID == "" || strings.ContainsAny(pp.PodUID, "/.") {
		return fmt.Errorf("patch %s: %w: its record names no Pod", pp.ID, errdefs.ErrFailedPrecondition)
	}
	dir := filepath.Join(s.podPatchesDir(), pp.PodUID)
	if err := errors.Join(removeIfExists(filepath.Join(dir, pp.ID+".patch")), removeIfExists(filepath.Join(dir, pp.ID+".json"))); err != nil {
		return fmt.Errorf("patch %s: removing it: %w", pp.ID, err)
	}
	_ = os.Remove(dir) // the Pod's last one: an empty directory goes
	fmt.Fprintf(s.opt.Log, "corral daemon: pod:%s: kept patch %s removed: %s\n", pp.PodUID, pp.ID, reason)
	if err := s.b.Audit(ctx, pp.ID, &audit.PatchRemoved{Reason: reason, Pod: pp.PodUID, Patch: pp.Path, Files: pp.Files}); err != nil {
		return fmt.Errorf("patch %s: auditing its removal: %w", pp.ID, err)
	}
	return nil
}

// SweepKeptPatches removes, in Pod mode, every kept patch whose session
// ended at least --kept-patch-retention ago (the prune timer), auditing
// each. Records still pending (a daemon stopped while ending their
// session) are left to EndGonePods. Outside Pod mode, or with no
// retention, it does nothing.
func (s *Server) SweepKeptPatches(ctx context.Context) error {
	if !s.podMode() || s.opt.KeptPatchRetention <= 0 {
		return nil
	}
	s.patchesMu.Lock()
	defer s.patchesMu.Unlock()
	list, err := s.podPatches()
	if err != nil {
		return err
	}
	now := s.now()
	reason := fmt.Sprintf("ended more than --kept-patch-retention %s ago", s.opt.KeptPatchRetention)
	var errs []error
	for _, pp := range list {
		if now.Sub(pp.Ended) < s.opt.KeptPatchRetention {
			continue
		}
		errs = append(errs, s.dropKept(ctx, pp, reason))
	}
	return errors.Join(errs...)
}
