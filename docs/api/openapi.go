// Package openapi embeds corral's daemon API description, openapi.yaml
// (OpenAPI 3.1), which the daemon serves as JSON at GET /v1/openapi.json.
// The YAML file is the one source; tests check it against the routes the
// daemon registers and against real answers.
package openapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"go.yaml.in/yaml/v3"
)

// YAML is the document as written.
//
//go:embed openapi.yaml
var YAML []byte

var (
	once   sync.Once
	doc    []byte
	docErr error
)

// JSON returns the document converted to JSON (computed once).
func JSON() ([]byte, error) {
	once.Do(func() {
		var v any
		if err := yaml.Unmarshal(YAML, &v); err != nil {
			docErr = fmt.Errorf("parsing openapi.yaml: %w", err)
			return
		}
		doc, docErr = json.Marshal(stringKeys(v))
		if docErr != nil {
			docErr = fmt.Errorf("converting openapi.yaml to JSON: %w", docErr)
		}
	})
	return doc, docErr
}

// stringKeys makes every mapping of v keyed by strings (YAML allows
// 200: as an integer key; JSON keys are strings).
func stringKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = stringKeys(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = stringKeys(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = stringKeys(e)
		}
		return x
	}
	return v
}
