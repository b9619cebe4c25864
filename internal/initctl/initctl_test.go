package initctl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoundTrip(t *testing.T) {
	for _, r := range []Request{
		{Mode: Exec, Argv: []string{"grep", "-rn", "x y", "."}, DeadlineMS: 62_000},
		{Mode: FS, Argv: []string{"read", "--", "a b.md"}, DeadlineMS: 1},
	} {
		data, err := Encode(r)
		require.NoError(t, err)
		got, err := Decode(data)
		require.NoError(t, err)
		r.Version = Version
		require.Equal(t, r, got)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, bad := range []string{
		``,
		`{}`,
		`{"version":2,"mode":"exec","argv":[],"deadline_ms":1000}`,
		// Version 1 had no deadline: a corral-init never runs a tool
		// without one.
		`{"version":1,"mode":"exec","argv":["ls"]}`,
		`{"version":3,"mode":"exec","argv":["ls"],"deadline_ms":1000}`,
		`{"version":2,"mode":"exec","argv":["ls"]}`,
		`{"version":2,"mode":"exec","argv":["ls"],"deadline_ms":0}`,
		`{"version":2,"mode":"exec","argv":["ls"],"deadline_ms":-5}`,
		`{"version":2,"mode":"exec","argv":["ls"],"deadline_ms":90000000000}`,
		`{"version":2,"mode":"shell","argv":["ls"],"deadline_ms":1000}`,
		`{"version":2,"mode":"exec","argv":["/bin/sh"],"deadline_ms":1000}`,
		`{"version":2,"mode":"exec","argv":["ls\u0000x"],"deadline_ms":1000}`,
		`{"version":2,"mode":"exec","argv":["ls"],"deadline_ms":1000,"deadline":1}`,
		`{"version":2,"mode":"exec","argv":["ls"],"deadline_ms":1000}{"version":2,"mode":"exec","argv":["id"],"deadline_ms":1000}`,
	} {
		_, err := Decode([]byte(bad))
		require.Error(t, err, bad)
	}
	_, err := Encode(Request{Mode: Exec, Argv: []string{"../x"}, DeadlineMS: 1000})
	require.Error(t, err)
	_, err = Encode(Request{Mode: Exec, Argv: []string{"ls"}})
	require.Error(t, err, "no deadline")
}

// TestEncodeRefusesMoreThanMaxBytes: a request corral-init would refuse
// (Decode) is refused before it is handed to any container.
func TestEncodeRefusesMoreThanMaxBytes(t *testing.T) {
	argv := []string{"true"}
	for i := 0; i < 48; i++ {
		argv = append(argv, strings.Repeat("b", 100<<10))
	}
	_, err := Encode(Request{Mode: Exec, Argv: argv, DeadlineMS: 1000})
	require.ErrorContains(t, err, "more than")
	_, err = Encode(Request{Mode: Exec, Argv: argv[:30], DeadlineMS: 1000})
	require.NoError(t, err)
}
