package jsontext

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	jsontextv2 "github.com/go-json-experiment/json/jsontext"

	"github.com/commitcollect/backend/model"
)

// Strict reads body, one JSON object, into v as the API reads its own
// bodies: JSON v2 semantics (github.com/go-json-experiment/json), member
// names matched exactly, case included, and unknown members refused. It
// returns nil, or a *model.ValidationError naming every text field that is
// not valid UTF-8 (never silently replaced), an unknown field (a known one
// spelled in another case included), a field given twice, a wrong type,
// data after the JSON value, an empty or malformed body.
func Strict(body []byte, v any) *model.ValidationError {
	if bad := InvalidUTF8(body); len(bad) > 0 {
		ve := &model.ValidationError{}
		for _, f := range bad {
			ve.Add(f, "is not valid UTF-8 text")
		}
		return ve
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return &model.ValidationError{Fields: []model.FieldError{{Field: "body", Message: "is empty"}}}
	}
	if err := jsonv2.Unmarshal(body, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return bodyError(err)
	}
	return nil
}

// bodyError names what made a body unreadable, as a validation error.
func bodyError(err error) *model.ValidationError {
	ve := &model.ValidationError{}
	var se *jsonv2.SemanticError
	var sy *jsontextv2.SyntacticError
	switch {
	case errors.As(err, &sy) && errors.Is(sy.Err, jsontextv2.ErrDuplicateName):
		ve.Add(pointerField(sy.JSONPointer), "is given more than once")
	case errors.As(err, &sy) && sy.JSONPointer == "" && strings.Contains(sy.Err.Error(), "after top-level value"):
		ve.Add("body", "holds data after the JSON value")
	case errors.As(err, &se) && errors.Is(se.Err, jsonv2.ErrUnknownName):
		ve.Add(pointerField(se.JSONPointer), "is not a known field (names are case-sensitive)")
	case errors.As(err, &se) && se.GoType != nil && se.JSONPointer != "":
		ve.Add(pointerField(se.JSONPointer), "must be a %s", jsonKind(se.GoType.Kind().String()))
	default:
		ve.Add("body", "is not valid JSON")
	}
	return ve
}

// pointerField writes a JSON pointer as the field paths of validation
// errors: /sportTypes/1 is sportTypes[1].
func pointerField(p jsontextv2.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

func jsonKind(k string) string {
	switch k {
	case "float64", "int", "int64", "ptr":
		return "number"
	case "slice":
		return "list"
	}
	return k
}
