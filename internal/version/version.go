// Package version is corral's build identity, in one place: the CLI's
// `corral version`, the MCP server's serverInfo and every session record
// report String().
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time by the Makefile's build target:
//
//	-X github.com/corral-sandbox/corral/internal/version.version=$(git describe --always --dirty)
//	-X github.com/corral-sandbox/corral/internal/version.commit=$(git rev-parse HEAD)
//	-X github.com/corral-sandbox/corral/internal/version.date=<commit time, RFC 3339>
//
// Empty means: take it from the build information Go records.
var (
	version string
	commit  string
	date    string
)

// Info is the build identity. Version is `git describe --always --dirty`
// when linked by the Makefile, else the module version Go recorded
// ("(devel)" for a plain `go build` without VCS data, a pseudo-version
// such as "v0.0.0-20261201110000-8e4372d0a1b2+dirty" with it); Commit the
// full VCS revision and Date its commit time (RFC 3339), "" when unknown;
// Modified whether the work tree had uncommitted changes.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
}

// Get returns the build identity of this binary.
func Get() Info {
	return get(version, commit, date, debug.ReadBuildInfo)
}

func get(ldVersion, ldCommit, ldDate string, read func() (*debug.BuildInfo, bool)) Info {
	in := Info{Version: ldVersion, Commit: ldCommit, Date: ldDate, GoVersion: runtime.Version()}
	if ldVersion != "" {
		in.Modified = strings.HasSuffix(ldVersion, "-dirty")
	}
	bi, ok := read()
	if !ok {
		if in.Version == "" {
			in.Version = "unknown"
		}
		return in
	}
	if bi.GoVersion != "" {
		in.GoVersion = bi.GoVersion
	}
	if in.Version == "" {
		in.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if in.Commit == "" {
				in.Commit = s.Value
			}
		case "vcs.time":
			if in.Date == "" {
				in.Date = s.Value
			}
		case "vcs.modified":
			if ldVersion == "" {
				in.Modified = s.Value == "true"
			}
		}
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	return in
}

// String returns the one-word version every surface reports: Version,
// followed by "+" and the first 12 digits of Commit when Version does not
// already name that commit (a "(devel)" build with VCS data).
func String() string { return Get().String() }

// String formats in as the package-level String does.
func (in Info) String() string {
	v := in.Version
	if len(in.Commit) >= 12 {
		short := in.Commit[:12]
		if !strings.Contains(v, short) && !strings.Contains(v, in.Commit[:7]) {
			v += "+" + short
		}
	}
	return v
}
