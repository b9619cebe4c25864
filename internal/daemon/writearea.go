package daemon

import (
	"fmt"

	"github.com/containerd/errdefs"
)

// Write areas. A writable session mounts a tmpfs of its profile's
// write_area (resources.write_area, at most 16GiB) for its whole life.
// tmpfs pages are charged to the memory cgroup of the call that wrote
// them, and to that cgroup's parent once the call's cgroup is removed
// (the kernel's cgroup-v2.rst, "Memory Ownership"): no call's memory
// limit bounds what a session holds across its calls, and --max-memory
// counts the calls running only. So the write areas are capped by their
// sizes, reserved when a session is created: MaxWriteAreaPerUID for
// each owner MaxSessionsPerUID counts, MaxWriteArea for every session
// together. A read-only session mounts none and reserves nothing.
// Sessions recorded before a daemon kept write areas in their owner
// records count 0.

// ErrWriteAreas is a creation whose write area would pass a write-area
// cap: Of names whose write areas the cap counts ("uid 1001", "pod:UID",
// "this host"), Held what they hold (bytes, creations in flight
// included), Want the new session's, Cap and Flag the cap. It wraps
// errdefs.ErrResourceExhausted (422 limit).
type ErrWriteAreas struct {
	Of              string
	Held, Want, Cap int64
	Flag            string
}

func (e *ErrWriteAreas) Error() string {
	return fmt.Sprintf("write areas of %s: %s held, and this session's %s would pass the daemon's %s %s; remove a session first, or use a profile with a smaller write_area (or a read-only session)",
		e.Of, size(e.Held), size(e.Want), e.Flag, size(e.Cap))
}

// Unwrap returns errdefs.ErrResourceExhausted.
func (e *ErrWriteAreas) Unwrap() error { return errdefs.ErrResourceExhausted }

// reserveWriteArea counts bytes, the write area of the session r
// creates, against MaxWriteArea (every session's, pending creations
// included) and, when r's owner is capped, against MaxWriteAreaPerUID
// (that owner's), under the one lock the session caps take, so that
// parallel creations cannot overshoot; the bytes go into the creation's
// pending owner record (written to disk when it is committed, gone with
// it when the creation fails). It fails with *ErrWriteAreas before
// anything is made. The backend calls it once, after reading the
// profile (CreateConfig).
func (r *reservation) reserveWriteArea(bytes int64) error {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	type areaCap struct {
		max      int64
		flag, of string
		match    func(ownerRecord) bool
	}
	caps := []areaCap{{max: s.opt.MaxWriteArea, flag: "--max-write-area", of: "this host",
		match: func(ownerRecord) bool { return true }}}
	if r.owner != "" {
		owner := r.owner
		caps = append(caps, areaCap{max: s.opt.MaxWriteAreaPerUID, flag: "--max-write-area-per-uid", of: r.of,
			match: func(rec ownerRecord) bool { return rec.owner() == owner }})
	}
	for _, c := range caps {
		if c.max <= 0 {
			continue
		}
		if held := s.owners.writeAreas(c.match); held+bytes > c.max {
			return &ErrWriteAreas{Of: c.of, Held: held, Want: bytes, Cap: c.max, Flag: c.flag}
		}
	}
	return s.owners.setWriteArea(r.id, bytes)
}

// writeAreas returns the write-area bytes of the recorded sessions that
// match.
func (o *owners) writeAreas(match func(ownerRecord) bool) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var n int64
	for _, r := range o.records {
		if match(*r) {
			n += r.WriteArea
		}
	}
	return n
}

// setWriteArea sets the write area of id's pending record (in memory:
// its commit writes it).
func (o *owners) setWriteArea(id string, n int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok := o.records[id]
	if !ok || !r.Pending {
		return fmt.Errorf("write area: %w: session %s has no pending owner record", errdefs.ErrFailedPrecondition, id)
	}
	r.WriteArea = n
	return nil
}
