package actions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Action is a block read and checked against its type's fields.
type Action struct {
	Spec *Spec
	args map[string]any
}

// String returns a string field ("" when absent).
func (a Action) String(name string) string { s, _ := a.args[name].(string); return s }

// Int returns an integer field and whether it was given.
func (a Action) Int(name string) (int64, bool) { n, ok := a.args[name].(int64); return n, ok }

// Bool returns a boolean field (false when absent).
func (a Action) Bool(name string) bool { b, _ := a.args[name].(bool); return b }

// Strings returns a list field.
func (a Action) Strings(name string) []string { l, _ := a.args[name].([]string); return l }

// Has reports whether a field was given.
func (a Action) Has(name string) bool { _, ok := a.args[name]; return ok }

// maxString bounds one string field: a Discord message is 2,000
// characters, a memory line or a prompt a few thousand.
const maxString = 8000

// Decode reads a block into an Action: a JSON object with a known "type"
// and the fields that type takes, each of the right kind. The error names
// the type and the field, in words for the report line. Fields the type
// does not take are refused too: a misspelt optional field would otherwise
// be silently ignored. Decode is pure.
func Decode(b Block) (Action, error) {
	if b.Err != nil {
		return Action{}, fmt.Errorf("could not read action: %w", b.Err)
	}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(b.Raw))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return Action{}, fmt.Errorf("could not read action: %w", ErrNotJSON)
	}
	var typ string
	if raw, ok := obj["type"]; !ok || json.Unmarshal(raw, &typ) != nil || typ == "" {
		return Action{}, fmt.Errorf("could not read action: it has no \"type\"")
	}
	spec, ok := Lookup(typ)
	if !ok {
		return Action{}, fmt.Errorf("unknown action type %q", clip(typ, 40))
	}
	a := Action{Spec: spec, args: map[string]any{}}
	known := map[string]bool{"type": true}
	for _, f := range spec.Fields {
		known[f.Name] = true
		raw, given := obj[f.Name]
		if !given || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			if f.Required {
				return Action{}, fmt.Errorf("%s: missing %s", typ, f.Name)
			}
			continue
		}
		v, err := value(f, raw)
		if err != nil {
			return Action{}, fmt.Errorf("%s: %s %w", typ, f.Name, err)
		}
		a.args[f.Name] = v
	}
	for name := range obj {
		if !known[name] {
			return Action{}, fmt.Errorf("%s: unknown field %q", typ, clip(name, 40))
		}
	}
	return a, nil
}

// value reads one field's JSON as its kind.
func value(f Field, raw json.RawMessage) (any, error) {
	switch f.Kind {
	case String:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			// Ids are strings in Discord's API; a model may write a
			// number, which JSON cannot hold exactly: refuse it.
			return nil, fmt.Errorf("must be a string")
		}
		if len(s) > maxString {
			return nil, fmt.Errorf("is longer than %d bytes", maxString)
		}
		return s, nil
	case Int:
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return nil, fmt.Errorf("must be a whole number")
			}
			n = json.Number(strings.TrimSpace(s))
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("must be a whole number")
		}
		return i, nil
	case Bool:
		var v bool
		if json.Unmarshal(raw, &v) != nil {
			return nil, fmt.Errorf("must be true or false")
		}
		return v, nil
	case Strings:
		var l []string
		if json.Unmarshal(raw, &l) != nil {
			return nil, fmt.Errorf("must be a list of strings")
		}
		for _, s := range l {
			if len(s) > maxString {
				return nil, fmt.Errorf("has an entry longer than %d bytes", maxString)
			}
		}
		return l, nil
	}
	return nil, fmt.Errorf("has an unknown kind")
}

// clip cuts s to n bytes at a rune boundary, for error messages.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
