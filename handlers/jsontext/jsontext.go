// Package jsontext reads JSON text as the edge must. InvalidUTF8 finds text
// that is not valid Unicode (encoding/json silently replaces invalid UTF-8
// and escaped lone surrogates with U+FFFD, so a title with broken bytes
// would be stored altered instead of refused): the edge (BFF, webhook)
// calls it on the raw body first and answers 400 naming the fields. Strict
// reads the API's own bodies strictly (Strava's are read tolerantly).
package jsontext

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

type frame struct {
	object    bool
	key       string
	expectKey bool
	index     int
}

// InvalidUTF8 returns the paths of the string values (and object keys) of
// body whose text is not valid UTF-8 or holds an escaped lone surrogate, in
// document order: "title", "updates.title", "sportTypes[1]"; a bad key is
// reported as its path with " (key)" appended. It reads only as far as body
// is well-formed JSON: syntax errors are the decoder's to report.
func InvalidUTF8(body []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var (
		out   []string
		stack []frame
		prev  int64
	)
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.object {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
			}
		}
		if b.Len() == 0 {
			return "body"
		}
		return b.String()
	}
	afterValue := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].expectKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		off := dec.InputOffset()
		seg := body[prev:off] // the token and the delimiters before it
		prev = off
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, frame{object: true, expectKey: true})
			case '[':
				stack = append(stack, frame{})
			default:
				stack = stack[:len(stack)-1]
				afterValue()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
				stack[n-1].key, stack[n-1].expectKey = t, false
				if invalid(seg, t) {
					out = append(out, path()+" (key)")
				}
				continue
			}
			if invalid(seg, t) {
				out = append(out, path())
			}
			afterValue()
		default:
			afterValue()
		}
	}
}

// invalid reports whether a string token is not valid text: its raw bytes
// are not UTF-8, or decoding produced U+FFFD that the source did not spell
// (an escaped lone surrogate such as \ud800).
func invalid(raw []byte, decoded string) bool {
	if !utf8.Valid(raw) {
		return true
	}
	if !strings.ContainsRune(decoded, utf8.RuneError) {
		return false
	}
	lower := bytes.ToLower(raw)
	return bytes.Count(lower, []byte(`\ufffd`))+bytes.Count(raw, []byte("\uFFFD")) < strings.Count(decoded, "\uFFFD")
}
