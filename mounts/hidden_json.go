package mounts

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/containerd/errdefs"
)

// hiddenSetVersion is the version of the persisted form of a HiddenSet.
const hiddenSetVersion = 1

// hiddenSetJSON is the persisted form of a HiddenSet: the options, the
// ignore files as they were read when the set was computed (the patterns
// only, by line) and the hidden paths with their rules. Nothing in it is
// read from the repository again, so a later change to an ignore file,
// by the agent or anyone else, cannot change a reopened session's set.
type hiddenSetJSON struct {
	Version     int              `json:"version"`
	Options     hideOptionsJSON  `json:"options"`
	IgnoreFiles []ignoreFileJSON `json:"ignore_files"`
	Hides       []hideJSON       `json:"hides"`
}

type hideOptionsJSON struct {
	IgnoreFileName string   `json:"ignore_file_name"`
	WriteDir       string   `json:"write_dir"`
	Forced         []string `json:"forced"`
}

type ignoreFileJSON struct {
	Dir      string        `json:"dir"`
	Source   string        `json:"source"`
	Patterns []patternJSON `json:"patterns"`
}

type patternJSON struct {
	Line int    `json:"line"`
	Text string `json:"text"`
}

type hideJSON struct {
	Path string `json:"path"`
	Rule string `json:"rule"`
	Dir  bool   `json:"dir,omitempty"`
}

// MarshalJSON persists the set so that a session reopened later (by
// another corral process, after a restart) judges paths exactly as the
// session did when it started.
func (h *HiddenSet) MarshalJSON() ([]byte, error) {
	out := hiddenSetJSON{
		Version: hiddenSetVersion,
		Options: hideOptionsJSON{IgnoreFileName: h.opts.IgnoreFileName, WriteDir: h.opts.WriteDir, Forced: h.opts.Forced},
		Hides:   make([]hideJSON, 0, len(h.paths)),
	}
	dirs := make([]string, 0, len(h.ignores))
	for d := range h.ignores {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		f := h.ignores[d]
		fj := ignoreFileJSON{Dir: f.dir, Source: f.source, Patterns: make([]patternJSON, 0, len(f.patterns))}
		for _, p := range f.patterns {
			fj.Patterns = append(fj.Patterns, patternJSON{Line: p.line, Text: p.text})
		}
		out.IgnoreFiles = append(out.IgnoreFiles, fj)
	}
	for _, p := range h.paths {
		e := h.hides[p]
		out.Hides = append(out.Hides, hideJSON{Path: e.Path, Rule: e.Rule, Dir: e.Dir})
	}
	return json.Marshal(out)
}

// UnmarshalHiddenSet restores a set persisted with MarshalJSON. It fails
// with errdefs.ErrInvalidArgument on an unknown version or a malformed
// entry; it never reads the repository.
func UnmarshalHiddenSet(data []byte) (*HiddenSet, error) {
	var in hiddenSetJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("decoding hidden set: %w: %v", errdefs.ErrInvalidArgument, err)
	}
	if in.Version != hiddenSetVersion {
		return nil, fmt.Errorf("decoding hidden set: %w: version %d, want %d", errdefs.ErrInvalidArgument, in.Version, hiddenSetVersion)
	}
	h, err := newHiddenSet(HideOptions{IgnoreFileName: in.Options.IgnoreFileName, WriteDir: in.Options.WriteDir, Forced: in.Options.Forced})
	if err != nil {
		return nil, fmt.Errorf("decoding hidden set: %w", err)
	}
	for _, fj := range in.IgnoreFiles {
		if !canonical(fj.Dir) || !canonical(fj.Source) {
			return nil, fmt.Errorf("decoding hidden set: %w: ignore file %q in %q", errdefs.ErrInvalidArgument, fj.Source, fj.Dir)
		}
		f := &ignoreFile{dir: fj.Dir, source: fj.Source}
		for _, p := range fj.Patterns {
			f.patterns = append(f.patterns, parsePattern(p.Text, p.Line))
		}
		h.ignores[fj.Dir] = f
	}
	for _, e := range in.Hides {
		if !canonical(e.Path) || e.Path == "." {
			return nil, fmt.Errorf("decoding hidden set: %w: path %q", errdefs.ErrInvalidArgument, e.Path)
		}
		h.hides[e.Path] = Hide{Path: e.Path, Rule: e.Rule, Dir: e.Dir}
		h.paths = append(h.paths, e.Path)
	}
	sort.Strings(h.paths)
	return h, nil
}
