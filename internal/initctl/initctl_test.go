package initctl

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoundTrip(t *testing.T) {
	for _, r := range []Request{
		{Mode: Exec, Argv: []string{"grep", "-rn", "x y", "."}},
		{Mode: FS, Argv: []string{"read", "--", "a b.md"}},
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
		`{"version":1,"mode":"exec","argv":[]}`,
		`{"version":2,"mode":"exec","argv":["ls"]}`,
		`{"version":1,"mode":"shell","argv":["ls"]}`,
		`{"version":1,"mode":"exec","argv":["/bin/sh"]}`,
		`{"version":1,"mode":"exec","argv":["ls\u0000x"]}`,
		`{"version":1,"mode":"exec","argv":["ls"],"deadline":1}`,
		`{"version":1,"mode":"exec","argv":["ls"]}{"version":1,"mode":"exec","argv":["id"]}`,
	} {
		_, err := Decode([]byte(bad))
		require.Error(t, err, bad)
	}
	_, err := Encode(Request{Mode: Exec, Argv: []string{"../x"}})
	require.Error(t, err)
}
