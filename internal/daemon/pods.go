package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/internal/kubepod"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/fsnotify/fsnotify"
)

// This file is Pod mode's lifecycle: when the kubelet removes a Pod's
// directory (the Pod was deleted), the sessions it owned end — their
// containers killed, their change sets kept as patches under
// STATE_DIR/patches/<pod uid>/<session id>.patch with a JSON record
// beside it — and the patches are served to admins (GET /v1/patches).

// patchesDir is STATE_DIR/patches: the executor's kept patches
// (<id>.patch, root's), and a directory per owner of kept patches
// (keptKey).
func (s *Server) patchesDir() string { return filepath.Join(s.opt.StateDir, "patches") }

// EndGonePods ends the sessions of every owner Pod whose directory under
// the kubelet root is gone (at start, for sessions re-adopted after the
// daemon was down, and on the prune timer, in case an event was missed).
// Then, in either mode, it finishes the ends of sessions a stopped
// daemon left pending (finishPendingEnds).
func (s *Server) EndGonePods(ctx context.Context) ([]api.PodPatch, error) {
	if !s.podMode() {
		return s.finishPendingEnds(ctx)
	}
	var out []api.PodPatch
	var errs []error
	for _, uid := range s.owners.pods() {
		if _, err := os.Lstat(kubepod.PodDir(s.opt.KubeletRoot, uid)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		kept, err := s.EndPod(ctx, uid)
		out = append(out, kept...)
		errs = append(errs, err)
	}
	kept, err := s.finishPendingEnds(ctx)
	return append(out, kept...), errors.Join(append(errs, err)...)
}

// pendingEnds returns the sessions, with their owners' kept patches
// directories, whose end (the owner's DELETE, an idle expiry:
// endOwnSession) a stopped daemon left pending: their record says
// pendingEnd. Their owner records stay (ForgetMissing) until
// finishPendingEnds completes them, so that no kept patch is left
// counted against its owner's budget but neither listed nor removable.
func (s *Server) pendingEnds() map[string]string {
	out := map[string]string{}
	for id, rec := range s.owners.all() {
		if !s.keepsOwn(rec) {
			continue
		}
		dir, err := s.keptDir(rec.owner())
		if err != nil {
			continue
		}
		if pp, err := readPodPatch(filepath.Join(dir, id+".json")); err == nil && pp.Error == pendingEnd {
			out[id] = dir
		}
	}
	return out
}

// finishPendingEnds completes the pending ends (pendingEnds) whose
// session is gone: the patch a stopped daemon left is moved beside its
// record and the record completed, as endKeptSession resumes a deleted
// Pod's. A session still there is left to its next end.
func (s *Server) finishPendingEnds(ctx context.Context) ([]api.PodPatch, error) {
	pending := s.pendingEnds()
	if len(pending) == 0 {
		return nil, nil
	}
	all, err := s.b.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	for _, x := range all {
		delete(pending, x.ID)
	}
	s.patchesMu.Lock()
	defer s.patchesMu.Unlock()
	var out []api.PodPatch
	var errs []error
	for id, dir := range pending {
		pp, _, err := s.endKeptSession(ctx, dir, id, "its end was interrupted by the daemon's stop and finished by the next daemon")
		if err != nil {
			errs = append(errs, fmt.Errorf("session %s: %w", id, err))
		}
		if pp != nil {
			out = append(out, *pp)
		}
	}
	return out, errors.Join(errs...)
}

// gonePodsSessions returns the sessions owned by Pods whose directory
// under the kubelet root is gone (Pod mode; else none).
func (s *Server) gonePodsSessions() []string {
	if !s.podMode() {
		return nil
	}
	var ids []string
	for _, uid := range s.owners.pods() {
		if _, err := os.Lstat(kubepod.PodDir(s.opt.KubeletRoot, uid)); errors.Is(err, fs.ErrNotExist) {
			ids = append(ids, s.owners.ofPod(uid)...)
		}
	}
	return ids
}

// EndPod ends every session Pod uid owns: each is removed as DELETE
// /v1/sessions/{id} removes it (running containers killed and reaped,
// the change set collected from the session's own write area and base
// copy, never from the repository, which the kubelet may already have
// removed), and its patch moved to STATE_DIR/patches/<uid>/<id>.patch
// with <id>.json (an api.PodPatch) beside it (endKeptSession).
func (s *Server) EndPod(ctx context.Context, uid string) ([]api.PodPatch, error) {
	s.patchesMu.Lock()
	defer s.patchesMu.Unlock()
	ids := s.owners.ofPod(uid)
	if len(ids) == 0 {
		return nil, nil
	}
	dir, err := s.keptDir("pod:" + uid)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pod %s: %w", uid, err)
	}
	var out []api.PodPatch
	var errs []error
	for _, id := range ids {
		pp, _, err := s.endKeptSession(ctx, dir, id, "its owner Pod was deleted")
		if err != nil {
			errs = append(errs, fmt.Errorf("pod %s: session %s: %w", uid, id, err))
		}
		if pp != nil {
			out = append(out, *pp)
		}
	}
	return out, errors.Join(errs...)
}

// pendingEnd is the error of a kept patch's record written before its
// session is ended: what a daemon killed meanwhile leaves listed.
const pendingEnd = "ending: the daemon stopped before this session's end was recorded; the next daemon (at its start or prune tick) ends it"

// endKeptSession ends session id and keeps its patch in dir, its owner's
// kept patches directory (keptDir), in
// an order that a daemon killed at any step resumes from, so that a kept
// patch is never left without its record nor a session without its end:
// the record first (pendingEnd), then the session ended, its patch moved
// beside the record, the record completed, and the session's owner
// record dropped last — a restarted daemon still finds the session
// owned (ForgetMissing keeps it: a gone Pod's, a pending end) and ends
// what is left:
// a session already ended has its patch, if it kept one, where the
// executor keeps patches (STATE_DIR/patches/<id>.patch) or already
// beside the record. The hook endStep (tests) stops it after a step as a
// kill would. reason, when not "", is audited as why the session ended
// (audit.SessionEnded); the Pod's own DELETE audits nothing more. It
// returns the record, or nil when there is nothing to keep, and the
// session's end as DELETE answers it (its Patch the kept record's).
func (s *Server) endKeptSession(ctx context.Context, dir, id, reason string) (*api.PodPatch, api.Removed, error) {
	rec := s.owners.get(id)
	jsonPath, dst := filepath.Join(dir, id+".json"), filepath.Join(dir, id+".patch")
	if prev, err := readPodPatch(jsonPath); err == nil && prev.Error != pendingEnd {
		// Recorded whole by a daemon that stopped before dropping the
		// owner record.
		return nil, api.Removed{Removed: id}, s.owners.remove(id)
	}
	pp := api.PodPatch{ID: id, PodUID: rec.Pod, OwnedBy: rec.owner(), Volume: rec.Volume, Ended: s.now().UTC(), Files: []string{}}
	pending := pp
	pending.Error = pendingEnd
	if err := writeJSONFile(jsonPath, pending); err != nil {
		return nil, api.Removed{}, fmt.Errorf("recording its patch: %w", err)
	}
	if err := s.endStep("recorded"); err != nil {
		return nil, api.Removed{}, err
	}
	var problems []error
	rm, err := s.b.Remove(ctx, id, false)
	switch {
	case errdefs.IsNotFound(err):
		// Ended already, by a daemon that stopped before it had
		// recorded the end (or by the Pod's own DELETE).
		rm = api.Removed{Removed: id}
		for _, p := range []string{dst, filepath.Join(s.patchesDir(), id+".patch")} {
			if _, err := os.Lstat(p); err == nil {
				rm.Patch = p
				break
			}
		}
		if rm.Patch == "" {
			// Nothing was kept: nothing to record.
			return nil, rm, errors.Join(removeIfExists(jsonPath), s.owners.remove(id))
		}
	case err != nil:
		// The record stays pending, the owner record too: retried.
		return nil, rm, fmt.Errorf("ending it: %w", err)
	}
	if err := s.endStep("ended"); err != nil {
		return nil, rm, err
	}
	if rm.PatchError != "" {
		problems = append(problems, errors.New(rm.PatchError))
	}
	if rm.Lost != "" {
		problems = append(problems, errors.New("its writes were lost: "+rm.Lost))
	}
	if rm.Patch != "" {
		if rm.Patch != dst {
			if err := os.Rename(rm.Patch, dst); err != nil {
				problems = append(problems, err)
				dst = rm.Patch
			}
		}
		if err := s.endStep("moved"); err != nil {
			return nil, rm, err
		}
		pp.Path, rm.Patch = dst, dst
		if files, err := patchFiles(dst); err != nil {
			problems = append(problems, err)
		} else {
			pp.Files = files
		}
	}
	if len(problems) > 0 {
		pp.Error = errors.Join(problems...).Error()
	}
	var errs []error
	if reason != "" {
		ev := &audit.SessionEnded{Reason: reason, Pod: rec.Pod, Patch: pp.Path, Files: pp.Files, Error: pp.Error}
		if err := s.b.Audit(ctx, id, ev); err != nil {
			errs = append(errs, fmt.Errorf("auditing its end: %w", err))
		}
	}
	if err := writeJSONFile(jsonPath, pp); err != nil {
		return &pp, rm, errors.Join(append(errs, fmt.Errorf("recording its patch: %w", err))...)
	}
	if err := s.endStep("completed"); err != nil {
		return nil, rm, err
	}
	if err := s.owners.remove(id); err != nil {
		errs = append(errs, err)
	}
	if reason != "" {
		fmt.Fprintf(s.opt.Log, "corral daemon: %s: session %s ended: %s (patch: %s)\n", rec.owner(), id, reason, orNone(pp.Path))
	}
	return &pp, rm, errors.Join(errs...)
}

// endStep runs the test hook endPodHook after a step of endKeptSession.
func (s *Server) endStep(step string) error {
	if s.endPodHook == nil {
		return nil
	}
	return s.endPodHook(step)
}

func readPodPatch(p string) (api.PodPatch, error) {
	var pp api.PodPatch
	data, err := os.ReadFile(p)
	if err != nil {
		return pp, err
	}
	return pp, json.Unmarshal(data, &pp)
}

func removeIfExists(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// patchFiles lists the paths a patch file changes.
func patchFiles(p string) ([]string, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	files, _, err := gitdiff.Parse(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("reading the kept patch: %w", err)
	}
	out := []string{}
	for _, f := range files {
		name := f.NewName
		if f.IsDelete {
			name = f.OldName
		}
		out = append(out, name)
	}
	return out, nil
}

func writeJSONFile(p string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// keptPatches reads every kept patch record, oldest first: each
// owner's (its OwnedBy the directory's owner, whatever the record says),
// then root's — the executor's STATE_DIR/patches/<id>.patch, kept by a
// session of root's or before owners had directories: no record, no
// owner (OwnedBy ""), listed to the admins alone, Ended its file's
// time. A record whose session is still being ended (pendingEnd) is not
// one yet, nor is a patch of root's whose id an owner's record names (an
// end between its two steps).
func (s *Server) keptPatches() ([]api.PodPatch, error) {
	out := []api.PodPatch{}
	entries, err := os.ReadDir(s.patchesDir())
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	owned := map[string]bool{}
	var roots []api.PodPatch
	for _, owner := range entries {
		if !owner.IsDir() {
			id, ok := cutSuffix(owner.Name(), ".patch")
			if !ok || !idPattern.MatchString(id) || !owner.Type().IsRegular() {
				continue
			}
			info, err := owner.Info()
			if err != nil {
				continue // removed meanwhile
			}
			p := filepath.Join(s.patchesDir(), owner.Name())
			roots = append(roots, api.PodPatch{ID: id, Ended: info.ModTime().UTC(), Files: []string{}, Path: p})
			continue
		}
		entries, err := os.ReadDir(filepath.Join(s.patchesDir(), owner.Name()))
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			id, ok := cutSuffix(e.Name(), ".json")
			if !ok || !idPattern.MatchString(id) {
				continue
			}
			owned[id] = true
			data, err := os.ReadFile(filepath.Join(s.patchesDir(), owner.Name(), e.Name()))
			if err != nil {
				return nil, err
			}
			var pp api.PodPatch
			if err := json.Unmarshal(data, &pp); err != nil {
				pp = api.PodPatch{ID: id, Files: []string{}, Error: "unreadable record: " + err.Error()}
				if !strings.HasPrefix(owner.Name(), "uid-") {
					pp.PodUID = owner.Name()
				}
			}
			if pp.Error == pendingEnd {
				// Its session is being ended (or will be, by the
				// next daemon): not kept yet.
				continue
			}
			pp.OwnedBy = ownerOfKey(owner.Name())
			out = append(out, pp)
		}
	}
	for _, pp := range roots {
		if !owned[pp.ID] {
			out = append(out, pp)
		}
	}
	slices.SortFunc(out, func(a, b api.PodPatch) int { return a.Ended.Compare(b.Ended) })
	return out, nil
}

func (s *Server) listPatches(w http.ResponseWriter, r *http.Request) {
	list, err := s.visiblePatches(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getPatch(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	pp, err := s.keptPatchOf(r, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if pp.Path == "" {
		writeText(w, api.MediaPatch, nil)
		return
	}
	// Streamed from the file, never read whole: a patch can be as large
	// as a session's write area, and a Pod may ask for it many times at
	// once. A patch removed meanwhile (the retention sweep, its owner's
	// DELETE) is one that does not exist.
	f, err := os.Open(pp.Path)
	if errors.Is(err, fs.ErrNotExist) {
		s.fail(w, r, fmt.Errorf("patch %s: %w", id, errdefs.ErrNotFound))
		return
	}
	if err != nil {
		s.fail(w, r, fmt.Errorf("patch %s: %w", id, err))
		return
	}
	defer f.Close()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(answerWrite))
	w.Header().Set("Content-Type", api.MediaPatch)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f)
}

// WatchPods ends the sessions of each owner Pod when the kubelet removes
// its directory (KubeletRoot/pods/<uid>), until ctx ends: an inotify
// watch (fsnotify) on the pods directory, waiting for the directory to
// exist first. Outside Pod mode it returns at once.
func (s *Server) WatchPods(ctx context.Context) error {
	if !s.podMode() {
		return nil
	}
	pods := filepath.Join(s.opt.KubeletRoot, "pods")
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	for {
		if err = w.Add(pods); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(5 * time.Second):
		}
	}
	// A Pod deleted between the start-up check and the watch.
	s.logEnded(s.EndGonePods(ctx))
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-w.Errors:
			fmt.Fprintf(s.opt.Log, "corral daemon: watching %s: %v\n", pods, err)
			s.logEnded(s.EndGonePods(ctx))
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if !ev.Has(fsnotify.Remove) && !ev.Has(fsnotify.Rename) {
				continue
			}
			uid := filepath.Base(ev.Name)
			if _, err := os.Lstat(ev.Name); !errors.Is(err, fs.ErrNotExist) {
				continue
			}
			s.logEnded(s.EndPod(ctx, uid))
		}
	}
}

func (s *Server) logEnded(_ []api.PodPatch, err error) {
	if err != nil {
		fmt.Fprintf(s.opt.Log, "corral daemon: ending deleted Pods' sessions: %v\n", err)
	}
}
