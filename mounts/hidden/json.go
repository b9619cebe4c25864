package hidden

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/names"
	"github.com/corral-sandbox/corral/mounts/ignore"
)

// setVersion is the version of the persisted form of a Set. Version 1
// (before the built-in hide lists) is still read: its "forced" patterns
// were the agent-config list's.
const setVersion = 2

// setJSON is the persisted form of a Set: the options, the
// ignore files as they were read when the set was computed (the patterns
// only, by line) and the hidden paths with their rules. Nothing in it is
// read from the repository again, so a later change to an ignore file,
// by the agent or anyone else, cannot change a reopened session's set.
type setJSON struct {
	Version        int              `json:"version"`
	Options        optionsJSON      `json:"options"`
	IgnoreFiles    []ignoreFileJSON `json:"ignore_files"`
	GitignoreFiles []ignoreFileJSON `json:"gitignore_files,omitempty"`
	Hides          []hideJSON       `json:"hides"`
}

type optionsJSON struct {
	IgnoreFileName string   `json:"ignore_file_name"`
	WriteDir       string   `json:"write_dir"`
	Lists          []string `json:"lists"`
	// Forced is version 1's agent-config patterns.
	Forced []string `json:"forced,omitempty"`
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
func (h *Set) MarshalJSON() ([]byte, error) {
	lists := make([]string, 0, len(h.opts.Lists))
	for _, l := range h.opts.Lists {
		lists = append(lists, string(l))
	}
	out := setJSON{
		Version:        setVersion,
		Options:        optionsJSON{IgnoreFileName: h.opts.IgnoreFileName, WriteDir: h.opts.WriteDir, Lists: lists},
		IgnoreFiles:    filesJSON(h.ignores),
		GitignoreFiles: filesJSON(h.gitignores),
		Hides:          make([]hideJSON, 0, len(h.hides)),
	}
	for _, e := range h.hides {
		out.Hides = append(out.Hides, hideJSON{Path: e.Path, Rule: e.Rule, Dir: e.Dir})
	}
	return json.Marshal(out)
}

func filesJSON(files map[string]*ignore.File) []ignoreFileJSON {
	dirs := make([]string, 0, len(files))
	for d := range files {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	var out []ignoreFileJSON
	for _, d := range dirs {
		f := files[d]
		fj := ignoreFileJSON{Dir: f.Dir, Source: f.Source, Patterns: make([]patternJSON, 0, len(f.Patterns))}
		for _, p := range f.Patterns {
			fj.Patterns = append(fj.Patterns, patternJSON{Line: p.Line, Text: p.Text})
		}
		out = append(out, fj)
	}
	return out
}

// Unmarshal restores a set persisted with MarshalJSON. It fails
// with errdefs.ErrInvalidArgument on an unknown version or a malformed
// entry; it never reads the repository.
func Unmarshal(data []byte) (*Set, error) {
	var in setJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("decoding hidden set: %w: %v", errdefs.ErrInvalidArgument, err)
	}
	opts := Options{IgnoreFileName: in.Options.IgnoreFileName, WriteDir: in.Options.WriteDir}
	switch in.Version {
	case 1:
		if len(in.Options.Forced) > 0 {
			opts.Lists = []names.List{names.AgentConfig}
		}
	case setVersion:
		for _, l := range in.Options.Lists {
			opts.Lists = append(opts.Lists, names.List(l))
		}
	default:
		return nil, fmt.Errorf("decoding hidden set: %w: version %d, want %d", errdefs.ErrInvalidArgument, in.Version, setVersion)
	}
	h, err := newSet(opts)
	if err != nil {
		return nil, fmt.Errorf("decoding hidden set: %w", err)
	}
	for _, set := range []struct {
		files []ignoreFileJSON
		into  map[string]*ignore.File
	}{{in.IgnoreFiles, h.ignores}, {in.GitignoreFiles, h.gitignores}} {
		for _, fj := range set.files {
			if !canonical(fj.Dir) || !canonical(fj.Source) {
				return nil, fmt.Errorf("decoding hidden set: %w: ignore file %q in %q", errdefs.ErrInvalidArgument, fj.Source, fj.Dir)
			}
			f := &ignore.File{Dir: fj.Dir, Source: fj.Source}
			for _, p := range fj.Patterns {
				f.Patterns = append(f.Patterns, ignore.ParsePattern(p.Text, p.Line))
			}
			set.into[fj.Dir] = f
		}
	}
	for _, e := range in.Hides {
		if !canonical(e.Path) || e.Path == "." {
			return nil, fmt.Errorf("decoding hidden set: %w: path %q", errdefs.ErrInvalidArgument, e.Path)
		}
		h.hides = append(h.hides, Hide{Path: e.Path, Rule: e.Rule, Dir: e.Dir})
	}
	h.sortHides()
	for i := 1; i < len(h.hides); i++ {
		if h.hides[i].Path == h.hides[i-1].Path {
			return nil, fmt.Errorf("decoding hidden set: %w: path %q listed twice", errdefs.ErrInvalidArgument, h.hides[i].Path)
		}
	}
	return h, nil
}
