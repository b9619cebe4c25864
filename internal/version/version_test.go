package version

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGet(t *testing.T) {
	const rev = "8e4372d0a1b2c3d4e5f60718293a4b5c6d7e8f90"
	info := func(main string, settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: main}, Settings: settings}, true
		}
	}
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-12-01T11:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name                 string
		ldVersion, ldCommit  string
		read                 func() (*debug.BuildInfo, bool)
		want                 string
		wantCommit, wantDate string
		modified             bool
	}{
		{name: "devel with vcs", read: info("(devel)", vcs...), want: "(devel)+8e4372d0a1b2", wantCommit: rev, wantDate: "2026-12-01T11:00:00Z", modified: true},
		{name: "pseudo-version names the commit", read: info("v0.0.0-20261201110000-8e4372d0a1b2+dirty", vcs...), want: "v0.0.0-20261201110000-8e4372d0a1b2+dirty", wantCommit: rev, wantDate: "2026-12-01T11:00:00Z", modified: true},
		{name: "linked by make", ldVersion: "v0.3.0-4-g8e4372d-dirty", ldCommit: rev, read: info("(devel)"), want: "v0.3.0-4-g8e4372d-dirty", wantCommit: rev, modified: true},
		{name: "no build info", read: func() (*debug.BuildInfo, bool) { return nil, false }, want: "unknown"},
		{name: "no vcs", read: info(""), want: "(devel)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := get(tc.ldVersion, tc.ldCommit, "", tc.read)
			require.Equal(t, tc.want, in.String())
			require.Equal(t, tc.wantCommit, in.Commit)
			require.Equal(t, tc.wantDate, in.Date)
			require.Equal(t, tc.modified, in.Modified)
			require.NotEmpty(t, in.GoVersion)
		})
	}
}
