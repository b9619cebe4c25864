package profiles

import (
	"fmt"
	"sync"

	"github.com/corral-sandbox/corral/allowlist"
)

var (
	grammarsOnce sync.Once
	grammars     map[string]*allowlist.Command
	grammarsErr  error
)

// Grammars returns the built-in tool grammars (profiles/builtin/tools.yaml)
// by command name, parsed and validated once.
func Grammars() (map[string]*allowlist.Command, error) {
	grammarsOnce.Do(func() {
		data, err := builtin.ReadFile("builtin/tools.yaml")
		if err != nil {
			grammarsErr = fmt.Errorf("reading built-in tool grammars: %w", err)
			return
		}
		grammars, grammarsErr = allowlist.ParseCatalog(data)
		if grammarsErr != nil {
			grammarsErr = fmt.Errorf("built-in tool grammars: %w", grammarsErr)
		}
	})
	return grammars, grammarsErr
}
