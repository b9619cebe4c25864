// Package yamlstrict is corral's one strict YAML decoder, shared by the
// profiles, the tool catalog and the configuration file: exactly one
// document, no unknown keys, no duplicate keys, and every failure one line
// that names the file, the line and the key (never a Go type name).
package yamlstrict

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	"go.yaml.in/yaml/v3"
)

// Error is a decoding failure at File:Line (Line 0: the file as a whole).
// It unwraps to errdefs.ErrInvalidArgument; its text does not repeat the
// category.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Unwrap returns errdefs.ErrInvalidArgument.
func (e *Error) Unwrap() error { return errdefs.ErrInvalidArgument }

// Decode decodes data, the contents of the file name (used in messages
// only), into v, a pointer to a struct with yaml tags. It fails with an
// *Error when data is not exactly one YAML document, when a key is not a
// field of v (the message names the key's path, e.g.
// "resources.memry", and the keys that are known there), when a key
// appears twice in one mapping, or when a value has the wrong kind.
func Decode(name string, data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return &Error{File: name, Msg: "empty file; want a YAML mapping"}
		}
		return translate(name, data, v, err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return translate(name, data, v, err)
	default:
		line := extra.Line
		if len(extra.Content) > 0 {
			line = extra.Content[0].Line
		}
		return &Error{File: name, Line: line, Msg: "a second YAML document starts here; a file holds one (remove the --- before it)"}
	}
}

var (
	syntaxRE   = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)
	typeLineRE = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownRE  = regexp.MustCompile(`^field (.+) not found in type .*$`)
	wrongRE    = regexp.MustCompile(`^cannot unmarshal (!!\w+)(?: ` + "`" + `(.*)` + "`" + `)? into (.+)$`)
	dupRE      = regexp.MustCompile(`^mapping key "(.*)" already defined at line (\d+)$`)
)

// parserProblems are the messages of yaml's parser (as opposed to its
// scanner). For these, yaml.v3 reports a 0-based line (its decode.go
// adds 1 for scanner errors only), so the line is one too low.
var parserProblems = []string{
	"did not find expected <stream-start>",
	"did not find expected <document start>",
	"found undefined tag handle",
	"did not find expected node content",
	"did not find expected '-' indicator",
	"did not find expected key",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
}

func translate(name string, data []byte, v any, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		e := typeError(name, data, v, te.Errors[0])
		if n := len(te.Errors) - 1; n > 0 {
			e.Msg += fmt.Sprintf(" (and %d more)", n)
		}
		return e
	}
	m := syntaxRE.FindStringSubmatch(err.Error())
	if m == nil {
		return &Error{File: name, Msg: err.Error()}
	}
	line, _ := strconv.Atoi(m[1])
	msg := m[2]
	for _, p := range parserProblems {
		if msg == p {
			line++
			break
		}
	}
	return &Error{File: name, Line: line, Msg: "YAML syntax: " + msg}
}

func typeError(name string, data []byte, v any, text string) *Error {
	m := typeLineRE.FindStringSubmatch(text)
	if m == nil {
		return &Error{File: name, Msg: text}
	}
	line, _ := strconv.Atoi(m[1])
	msg := m[2]
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root)
	switch {
	case unknownRE.MatchString(msg):
		key := unknownRE.FindStringSubmatch(msg)[1]
		path, ok := keyPath(&root, line, key)
		if !ok {
			path = []string{key}
		}
		e := &Error{File: name, Line: line, Msg: fmt.Sprintf("unknown key %q", strings.Join(path, "."))}
		if known := knownKeys(reflect.TypeOf(v), path[:len(path)-1]); len(known) > 0 {
			e.Msg += " (known: " + strings.Join(known, ", ") + ")"
		}
		return e
	case wrongRE.MatchString(msg):
		w := wrongRE.FindStringSubmatch(msg)
		got := describeTag(w[1])
		if w[2] != "" {
			got += " " + strconv.Quote(w[2])
		}
		where := ""
		if path, ok := valuePath(&root, line); ok && len(path) > 0 {
			where = strings.Join(path, ".") + ": "
		}
		return &Error{File: name, Line: line, Msg: fmt.Sprintf("%swant %s, got %s", where, describeType(w[3]), got)}
	case dupRE.MatchString(msg):
		d := dupRE.FindStringSubmatch(msg)
		return &Error{File: name, Line: line, Msg: fmt.Sprintf("key %q appears twice in one mapping (first at line %s)", d[1], d[2])}
	}
	return &Error{File: name, Line: line, Msg: msg}
}

func describeTag(tag string) string {
	switch tag {
	case "!!str":
		return "a string"
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "true/false"
	case "!!null":
		return "nothing"
	}
	return tag
}

// describeType names the kind of value a Go type (as yaml prints it)
// wants, in YAML's words.
func describeType(t string) string {
	t = strings.TrimLeft(t, "*")
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	}
	return "a mapping"
}

// keyPath returns the path of the mapping key spelled key on line.
func keyPath(n *yaml.Node, line int, key string) ([]string, bool) {
	var walk func(n *yaml.Node, path []string) ([]string, bool)
	walk = func(n *yaml.Node, path []string) ([]string, bool) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if p, ok := walk(c, path); ok {
					return p, true
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				p := append(append([]string(nil), path...), k.Value)
				if k.Line == line && k.Value == key {
					return p, true
				}
				if r, ok := walk(n.Content[i+1], p); ok {
					return r, true
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := append([]string(nil), path...)
				if len(p) > 0 {
					p[len(p)-1] += "[" + strconv.Itoa(i) + "]"
				}
				if r, ok := walk(c, p); ok {
					return r, true
				}
			}
		}
		return nil, false
	}
	return walk(n, nil)
}

// valuePath returns the path of the first value that starts on line.
func valuePath(n *yaml.Node, line int) ([]string, bool) {
	var walk func(n *yaml.Node, path []string) ([]string, bool)
	walk = func(n *yaml.Node, path []string) ([]string, bool) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if p, ok := walk(c, path); ok {
					return p, true
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := append(append([]string(nil), path...), n.Content[i].Value)
				if r, ok := walk(n.Content[i+1], p); ok {
					return r, true
				}
			}
			return nil, false
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := append([]string(nil), path...)
				if len(p) > 0 {
					p[len(p)-1] += "[" + strconv.Itoa(i) + "]"
				}
				if r, ok := walk(c, p); ok {
					return r, true
				}
			}
		}
		if n.Line == line {
			return path, true
		}
		return nil, false
	}
	return walk(n, nil)
}

// knownKeys returns the yaml keys of the struct found at path below t.
func knownKeys(t reflect.Type, path []string) []string {
	for _, seg := range path {
		name := seg
		if i := strings.IndexByte(seg, '['); i >= 0 {
			name = seg[:i]
		}
		ft, ok := fields(t)[name]
		if !ok {
			return nil
		}
		t = ft
		for range strings.Count(seg, "[") {
			t = elem(t)
			if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
				t = t.Elem()
			}
		}
	}
	var keys []string
	for k := range fields(t) {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func elem(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// fields maps the yaml keys of struct type t (inline fields flattened)
// to their types.
func fields(t reflect.Type) map[string]reflect.Type {
	t = elem(t)
	out := map[string]reflect.Type{}
	if t == nil || t.Kind() != reflect.Struct {
		return out
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			for k, v := range fields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = elem(f.Type)
	}
	return out
}
