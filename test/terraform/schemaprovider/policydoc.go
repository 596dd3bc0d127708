package schemaprovider

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

// The aws_iam_policy_document data source as the hashicorp/aws provider
// computes it (internal/service/iam: policy_document_data_source.go and
// policy_model.go): the same document model and JSON field names (key order
// Version, Id, Statement; Sid, Effect, Action, NotAction, Resource,
// NotResource, Principal, NotPrincipal, Condition), a one-element
// action/resource/identifier list rendered as a string and longer ones sorted
// in reverse, condition values in their given order (a single value as a
// string), Effect defaulting to "Allow" and Version to "2012-10-17", "&{"
// written as "${", source documents merged first and override documents last
// (a statement with the same Sid replaces the earlier one), `json` indented
// with two spaces and `minified_json` compact, and the id the provider's
// string hash of `json`.

type policyDoc struct {
	Version    string             `json:",omitempty"`
	ID         string             `json:"Id,omitempty"`
	Statements []*policyStatement `json:"Statement,omitempty"`
}

type policyStatement struct {
	Sid           string       `json:",omitempty"`
	Effect        string       `json:",omitempty"`
	Actions       any          `json:"Action,omitempty"`
	NotActions    any          `json:"NotAction,omitempty"`
	Resources     any          `json:"Resource,omitempty"`
	NotResources  any          `json:"NotResource,omitempty"`
	Principals    principalSet `json:"Principal,omitempty"`
	NotPrincipals principalSet `json:"NotPrincipal,omitempty"`
	Conditions    conditionSet `json:"Condition,omitempty"`
}

type principal struct {
	Type        string
	Identifiers any // string or []string
}

type principalSet []principal

// MarshalJSON renders principals as the provider does: {"*": "*"} becomes
// "*", identifiers of one type are merged.
func (ps principalSet) MarshalJSON() ([]byte, error) {
	if len(ps) == 1 && ps[0].Type == "*" {
		if s, ok := ps[0].Identifiers.(string); ok && s == "*" {
			return []byte(`"*"`), nil
		}
		if l, ok := ps[0].Identifiers.([]string); ok && len(l) == 1 && l[0] == "*" {
			return []byte(`"*"`), nil
		}
	}
	raw := map[string]any{}
	for _, p := range ps {
		switch ids := p.Identifiers.(type) {
		case []string:
			var cur []string
			switch v := raw[p.Type].(type) {
			case string:
				cur = []string{v}
			case []string:
				cur = v
			}
			sorted := slices.Clone(ids)
			slices.Sort(sorted)
			slices.Reverse(sorted)
			raw[p.Type] = append(cur, sorted...)
		case string:
			switch v := raw[p.Type].(type) {
			case nil:
				raw[p.Type] = ids
			case string:
				raw[p.Type] = []string{v, ids}
			case []string:
				raw[p.Type] = append(v, ids)
			}
		}
	}
	return json.Marshal(raw)
}

// UnmarshalJSON reads a source or override document's Principal.
func (ps *principalSet) UnmarshalJSON(b []byte) error {
	var data any
	if err := json.Unmarshal(b, &data); err != nil {
		return err
	}
	var out principalSet
	switch t := data.(type) {
	case string:
		out = append(out, principal{Type: "*", Identifiers: []string{"*"}})
	case map[string]any:
		for k, v := range t {
			switch vt := v.(type) {
			case string:
				out = append(out, principal{Type: k, Identifiers: vt})
			case []any:
				var ids []string
				for _, e := range vt {
					s, ok := e.(string)
					if !ok {
						return fmt.Errorf("principal %s: identifier %v is not a string", k, e)
					}
					ids = append(ids, s)
				}
				slices.Sort(ids)
				out = append(out, principal{Type: k, Identifiers: ids})
			default:
				return fmt.Errorf("principal %s: unsupported identifiers %T", k, v)
			}
		}
		slices.SortFunc(out, func(a, b principal) int { return strings.Compare(a.Type, b.Type) })
	default:
		return fmt.Errorf("principal: unsupported %T", data)
	}
	*ps = out
	return nil
}

type condition struct {
	Test, Variable string
	Values         any // string or []string
}

type conditionSet []condition

// MarshalJSON renders {test: {variable: value(s)}}, a single value as a string.
func (cs conditionSet) MarshalJSON() ([]byte, error) {
	raw := map[string]map[string]any{}
	for _, c := range cs {
		if raw[c.Test] == nil {
			raw[c.Test] = map[string]any{}
		}
		cur, _ := raw[c.Test][c.Variable].([]string)
		switch v := c.Values.(type) {
		case []string:
			cur = append(cur, v...)
		case string:
			cur = append(cur, v)
		}
		raw[c.Test][c.Variable] = cur
	}
	for _, vars := range raw {
		for k, v := range vars {
			if l := v.([]string); len(l) == 1 {
				vars[k] = l[0]
			}
		}
	}
	return json.Marshal(raw)
}

// UnmarshalJSON reads a source or override document's Condition.
func (cs *conditionSet) UnmarshalJSON(b []byte) error {
	var data map[string]map[string]any
	if err := json.Unmarshal(b, &data); err != nil {
		return err
	}
	var out conditionSet
	for _, test := range sortedKeys(data) {
		for _, variable := range sortedKeys(data[test]) {
			switch v := data[test][variable].(type) {
			case string:
				out = append(out, condition{Test: test, Variable: variable, Values: []string{v}})
			case bool:
				out = append(out, condition{Test: test, Variable: variable, Values: strconv.FormatBool(v)})
			case []any:
				var vals []string
				for _, e := range v {
					vals = append(vals, fmt.Sprint(e))
				}
				out = append(out, condition{Test: test, Variable: variable, Values: vals})
			}
		}
	}
	*cs = out
	return nil
}

// merge adds other's statements, a statement with an existing Sid replacing it.
func (d *policyDoc) merge(other *policyDoc) {
	if other.ID != "" {
		d.ID = other.ID
	}
	if other.Version > d.Version {
		d.Version = other.Version
	}
	for _, st := range other.Statements {
		replaced := false
		if st.Sid != "" {
			for i, have := range d.Statements {
				if have.Sid == st.Sid {
					d.Statements[i], replaced = st, true
					break
				}
			}
		}
		if !replaced {
			d.Statements = append(d.Statements, st)
		}
	}
}

// stringsOf returns the known strings of a list or set value.
func stringsOf(v cty.Value) ([]string, error) {
	if v.IsNull() {
		return nil, nil
	}
	if !v.IsWhollyKnown() {
		return nil, fmt.Errorf("value not known")
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			out = append(out, "")
			continue
		}
		out = append(out, e.AsString())
	}
	return out, nil
}

// decodeStrings is the provider's policyDecodeConfigStrings: one element as a
// string, more sorted in reverse.
func decodeStrings(l []string) any {
	if len(l) == 1 {
		return l[0]
	}
	l = slices.Clone(l)
	slices.Sort(l)
	slices.Reverse(l)
	return l
}

var varReplacer = strings.NewReplacer("&{", "${")

func replaceVars(v any, version string) (any, error) {
	check := func(s string) error {
		if version == "2008-10-17" && strings.Contains(s, "&{") {
			return fmt.Errorf("found &{ sequence in (%s), which is not supported in document version 2008-10-17", s)
		}
		return nil
	}
	switch t := v.(type) {
	case string:
		if err := check(t); err != nil {
			return nil, err
		}
		return varReplacer.Replace(t), nil
	case []string:
		out := make([]string, len(t))
		for i, s := range t {
			if err := check(s); err != nil {
				return nil, err
			}
			out[i] = varReplacer.Replace(s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported %T", v)
}

func strAttr(v cty.Value, name string) string {
	a := v.GetAttr(name)
	if a.IsNull() || !a.IsKnown() {
		return ""
	}
	return a.AsString()
}

// PolicyDocument computes the data source's json, minified_json and id from
// its configuration.
func PolicyDocument(cfg cty.Value) (map[string]cty.Value, error) {
	version := strAttr(cfg, "version")
	if version == "" {
		version = "2012-10-17"
	}
	merged := &policyDoc{}
	var sources []string
	if s := strAttr(cfg, "source_json"); s != "" {
		sources = append(sources, s)
	}
	more, err := stringsOf(cfg.GetAttr("source_policy_documents"))
	if err != nil {
		return nil, fmt.Errorf("source_policy_documents: %w", err)
	}
	sources = append(sources, more...)
	seen := map[string]bool{}
	for i, src := range sources {
		d := &policyDoc{}
		if err := json.Unmarshal([]byte(src), d); err != nil {
			return nil, fmt.Errorf("merging source document %d: %w", i, err)
		}
		for _, st := range d.Statements {
			if st.Sid != "" {
				if seen[st.Sid] {
					return nil, fmt.Errorf("merging source document %d: duplicate Sid (%s)", i, st.Sid)
				}
				seen[st.Sid] = true
			}
		}
		merged.merge(d)
	}

	doc := &policyDoc{Version: version, ID: strAttr(cfg, "policy_id")}
	sids := map[string]bool{}
	if stmts := cfg.GetAttr("statement"); !stmts.IsNull() {
		for it := stmts.ElementIterator(); it.Next(); {
			_, s := it.Element()
			st := &policyStatement{Effect: strAttr(s, "effect"), Sid: strAttr(s, "sid")}
			if st.Effect == "" {
				st.Effect = "Allow"
			}
			if st.Sid != "" {
				if sids[st.Sid] {
					return nil, fmt.Errorf("duplicate Sid (%s). Remove the Sid or ensure the Sid is unique", st.Sid)
				}
				sids[st.Sid] = true
			}
			for _, f := range []struct {
				attr string
				dst  *any
				vars bool
			}{
				{"actions", &st.Actions, false}, {"not_actions", &st.NotActions, false},
				{"resources", &st.Resources, true}, {"not_resources", &st.NotResources, true},
			} {
				l, err := stringsOf(s.GetAttr(f.attr))
				if err != nil {
					return nil, fmt.Errorf("statement %q %s: %w", st.Sid, f.attr, err)
				}
				if len(l) == 0 {
					continue
				}
				*f.dst = decodeStrings(l)
				if f.vars {
					if *f.dst, err = replaceVars(*f.dst, version); err != nil {
						return nil, fmt.Errorf("reading %s: %w", f.attr, err)
					}
				}
			}
			for _, p := range []struct {
				attr string
				dst  *principalSet
			}{{"principals", &st.Principals}, {"not_principals", &st.NotPrincipals}} {
				ps := s.GetAttr(p.attr)
				if ps.IsNull() {
					continue
				}
				for pit := ps.ElementIterator(); pit.Next(); {
					_, pv := pit.Element()
					ids, err := stringsOf(pv.GetAttr("identifiers"))
					if err != nil {
						return nil, fmt.Errorf("statement %q %s: %w", st.Sid, p.attr, err)
					}
					v, err := replaceVars(decodeStrings(ids), version)
					if err != nil {
						return nil, fmt.Errorf("reading identifiers: %w", err)
					}
					*p.dst = append(*p.dst, principal{Type: strAttr(pv, "type"), Identifiers: v})
				}
			}
			if cs := s.GetAttr("condition"); !cs.IsNull() {
				for cit := cs.ElementIterator(); cit.Next(); {
					_, cv := cit.Element()
					vals, err := stringsOf(cv.GetAttr("values"))
					if err != nil {
						return nil, fmt.Errorf("statement %q condition: %w", st.Sid, err)
					}
					v, err := replaceVars(vals, version)
					if err != nil {
						return nil, fmt.Errorf("reading values: %w", err)
					}
					if l := v.([]string); len(l) == 1 {
						v = l[0]
					}
					st.Conditions = append(st.Conditions, condition{Test: strAttr(cv, "test"), Variable: strAttr(cv, "variable"), Values: v})
				}
			}
			doc.Statements = append(doc.Statements, st)
		}
	}
	merged.merge(doc)

	var overrides []string
	more, err = stringsOf(cfg.GetAttr("override_policy_documents"))
	if err != nil {
		return nil, fmt.Errorf("override_policy_documents: %w", err)
	}
	overrides = append(overrides, more...)
	if s := strAttr(cfg, "override_json"); s != "" {
		overrides = append(overrides, s)
	}
	for i, o := range overrides {
		d := &policyDoc{}
		if err := json.Unmarshal([]byte(o), d); err != nil {
			return nil, fmt.Errorf("merging override document %d: %w", i, err)
		}
		merged.merge(d)
	}

	indented, err := json.MarshalIndent(merged, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("formatting JSON: %w", err)
	}
	minified, err := json.Marshal(merged)
	if err != nil {
		return nil, fmt.Errorf("formatting JSON: %w", err)
	}
	return map[string]cty.Value{
		"json":          cty.StringVal(string(indented)),
		"minified_json": cty.StringVal(string(minified)),
		"id":            cty.StringVal(strconv.Itoa(stringHashcode(string(indented)))),
		"version":       cty.StringVal(version),
	}, nil
}

// stringHashcode is the provider's create.StringHashcode: crc32 (IEEE) of s
// as a non-negative int.
func stringHashcode(s string) int {
	v := int(crc32.ChecksumIEEE([]byte(s)))
	if v >= 0 {
		return v
	}
	if -v >= 0 {
		return -v
	}
	return 0
}
