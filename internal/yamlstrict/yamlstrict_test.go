package yamlstrict

import (
	"testing"

	"github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"
)

type inner struct {
	Memory string `yaml:"memory"`
	Pids   int    `yaml:"pids"`
}

type layout struct {
	Min int `yaml:"min"`
}

type item struct {
	Name   string `yaml:"name"`
	layout `yaml:",inline"`
}

type doc struct {
	Name      string   `yaml:"name"`
	Commands  []string `yaml:"commands"`
	Resources inner    `yaml:"resources"`
	Items     []*item  `yaml:"items"`
	Skip      string   `yaml:"-"`
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"ok", "name: x\ncommands: [a]\n", ""},
		{"unknown top", "name: x\nbogus: 1\n", `p.yaml:2: unknown key "bogus" (known: commands, items, name, resources)`},
		{"unknown nested", "name: x\nresources:\n  memry: 1\n", `p.yaml:3: unknown key "resources.memry" (known: memory, pids)`},
		{"unknown in list", "items:\n  - name: a\n  - name: b\n    mni: 1\n", `p.yaml:4: unknown key "items[1].mni" (known: min, name)`},
		{"wrong kind", "name: x\ncommands: cat\n", `p.yaml:2: commands: want a list, got a string "cat"`},
		{"wrong number", "resources:\n  pids: many\n", `p.yaml:2: resources.pids: want a whole number, got a string "many"`},
		{"duplicate", "name: x\ncommands: [a]\nname: y\n", `p.yaml:3: key "name" appears twice in one mapping (first at line 1)`},
		{"flow not closed", "name: x\ncommands: [cat\nresources: {}\n", `p.yaml:2: YAML syntax: did not find expected ',' or ']'`},
		{"flow not closed nested", "name: x\ncommands: [cat]\nresources:\n  memory: [1\n", `p.yaml:4: YAML syntax: did not find expected ',' or ']'`},
		{"scanner", "name: x\n  commands: [cat]\n", `p.yaml:2: YAML syntax: mapping values are not allowed in this context`},
		{"tab", "name: x\ncommands: [cat]\n\tbad: 1\n", `p.yaml:3: YAML syntax: found character that cannot start any token`},
		{"second document", "name: x\n---\nname: y\n", `p.yaml:3: a second YAML document starts here; a file holds one (remove the --- before it)`},
		{"malformed second document", "name: x\n---\nname: [y\n", `p.yaml:3: YAML syntax: did not find expected ',' or ']'`},
		{"empty", "", `p.yaml: empty file; want a YAML mapping`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			err := Decode("p.yaml", []byte(tc.in), &d)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.want)
			require.True(t, errdefs.IsInvalidArgument(err))
		})
	}
}
