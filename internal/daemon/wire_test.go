package daemon

import (
	"reflect"
	"testing"

	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/fsop"
	"github.com/stretchr/testify/require"
)

// TestFileToolTypesMatchTheProtocol pins that the /v1 file-tool results
// carry every field, under the same JSON name, that the in-container
// protocol (sandbox/fsop) returns. The two are kept apart on purpose (the
// versioned wire types must not move when the protocol does), so a field
// added on one side only must fail here instead of being dropped by the
// backend's copies.
func TestFileToolTypesMatchTheProtocol(t *testing.T) {
	pairs := []struct{ wire, proto any }{
		{api.ReadResult{}, fsop.ReadResult{}},
		{api.Entry{}, fsop.Entry{}},
		{api.ListResult{}, fsop.ListResult{}},
		{api.GlobResult{}, fsop.GlobResult{}},
		{api.Match{}, fsop.Match{}},
		{api.SearchResult{}, fsop.SearchResult{}},
		{api.WriteResult{}, fsop.WriteResult{}},
	}
	for _, p := range pairs {
		w, f := reflect.TypeOf(p.wire), reflect.TypeOf(p.proto)
		t.Run(w.Name(), func(t *testing.T) {
			require.Equal(t, shape(f), shape(w), "api.%s and fsop.%s differ", w.Name(), f.Name())
		})
	}
}

// shape lists a struct's fields as "Name json-tag kind", nested element
// structs by name, so two packages' types compare field by field.
func shape(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		ft := f.Type
		kind := ft.Kind().String()
		if ft.Kind() == reflect.Slice {
			kind = "[]" + ft.Elem().Kind().String()
			if ft.Elem().Kind() == reflect.Struct {
				kind = "[]" + ft.Elem().Name()
			}
		}
		out = append(out, f.Name+" "+f.Tag.Get("json")+" "+kind)
	}
	return out
}
