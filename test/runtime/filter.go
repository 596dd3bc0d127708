package runtime

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
)

// Filter is one compiled Lambda event filter pattern (an event source
// mapping's filter_criteria.filter.pattern). It implements the subset of
// Lambda's event filtering the projector's patterns use: nested objects,
// arrays of alternatives, exact string/number/bool/null matches,
// {"prefix": "…"} and {"anything-but": [...]}. Any other operator is refused
// when the pattern is compiled, so a pattern this emulation does not
// understand fails the test instead of matching wrongly.
type Filter struct {
	source string
	root   map[string]any
}

// CompileFilter parses one pattern (JSON).
func CompileFilter(pattern string) (Filter, error) {
	var root map[string]any
	if err := json.Unmarshal([]byte(pattern), &root); err != nil {
		return Filter{}, fmt.Errorf("filter pattern %s: %w", pattern, err)
	}
	if err := validatePattern(root, ""); err != nil {
		return Filter{}, fmt.Errorf("filter pattern %s: %w", pattern, err)
	}
	return Filter{source: pattern, root: root}, nil
}

// String returns the pattern as written.
func (f Filter) String() string { return f.source }

func validatePattern(obj map[string]any, path string) error {
	if len(obj) == 0 {
		return fmt.Errorf("%s: empty object", cmp.Or(path, "pattern"))
	}
	for k, v := range obj {
		p := strings.TrimPrefix(path+"."+k, ".")
		switch x := v.(type) {
		case map[string]any:
			if err := validatePattern(x, p); err != nil {
				return err
			}
		case []any:
			if len(x) == 0 {
				return fmt.Errorf("%s: empty list of values", p)
			}
			for _, alt := range x {
				if err := validateMatcher(alt, p); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("%s: a leaf must be a list of values, got %T", p, v)
		}
	}
	return nil
}

func validateMatcher(m any, path string) error {
	op, ok := m.(map[string]any)
	if !ok {
		switch m.(type) {
		case string, float64, bool, nil:
			return nil
		}
		return fmt.Errorf("%s: unsupported value %T", path, m)
	}
	if len(op) != 1 {
		return fmt.Errorf("%s: an operator object holds exactly one operator", path)
	}
	for name, arg := range op {
		switch name {
		case "prefix":
			if _, ok := arg.(string); !ok {
				return fmt.Errorf("%s: prefix wants a string", path)
			}
		case "anything-but":
			switch a := arg.(type) {
			case string, float64:
			case []any:
				for _, x := range a {
					switch x.(type) {
					case string, float64:
					default:
						return fmt.Errorf("%s: anything-but wants strings or numbers", path)
					}
				}
			default:
				return fmt.Errorf("%s: anything-but wants a value or a list", path)
			}
		default:
			return fmt.Errorf("%s: operator %q is not emulated", path, name)
		}
	}
	return nil
}

// Match reports whether the event (as Lambda sees it: the record's JSON)
// matches the pattern. Every field the pattern names must be present.
func (f Filter) Match(event []byte) (bool, error) {
	var ev map[string]any
	if err := json.Unmarshal(event, &ev); err != nil {
		return false, fmt.Errorf("filter: event is not a JSON object: %w", err)
	}
	return matchObject(f.root, ev), nil
}

func matchObject(pattern, ev map[string]any) bool {
	for k, p := range pattern {
		v, present := ev[k]
		if !present {
			return false
		}
		switch x := p.(type) {
		case map[string]any:
			sub, ok := v.(map[string]any)
			if !ok || !matchObject(x, sub) {
				return false
			}
		case []any:
			if !matchLeaf(x, v) {
				return false
			}
		}
	}
	return true
}

// matchLeaf matches a value (or, for an array in the event, any of its
// elements) against a list of alternatives.
func matchLeaf(alts []any, v any) bool {
	vals := []any{v}
	if arr, ok := v.([]any); ok {
		vals = arr
	}
	for _, val := range vals {
		for _, alt := range alts {
			if matchOne(alt, val) {
				return true
			}
		}
	}
	return false
}

func matchOne(alt, v any) bool {
	op, ok := alt.(map[string]any)
	if !ok {
		return alt == v
	}
	if p, ok := op["prefix"]; ok {
		s, isStr := v.(string)
		return isStr && strings.HasPrefix(s, p.(string))
	}
	if ab, ok := op["anything-but"]; ok {
		switch v.(type) {
		case string, float64:
		default:
			return false
		}
		excluded, isList := ab.([]any)
		if !isList {
			excluded = []any{ab}
		}
		for _, x := range excluded {
			if x == v {
				return false
			}
		}
		return true
	}
	return false
}

// Filters is an event source mapping's filter criteria: a record is
// delivered when any filter matches.
type Filters []Filter

// Match reports whether any filter matches event.
func (fs Filters) Match(event []byte) (bool, error) {
	for _, f := range fs {
		ok, err := f.Match(event)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}
