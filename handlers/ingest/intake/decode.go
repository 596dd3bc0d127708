package intake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/jsontext"
	"github.com/commitcollect/backend/model"
)

// MaxEventBytes bounds a webhook request body.
const MaxEventBytes = 64 << 10

// wireEvent holds a body's known fields as they came; the ids stay raw so
// that a number and a numeric string both read, and a missing field (nil)
// differs from a zero one. Fields Strava may add later are not in it and
// are ignored.
type wireEvent struct {
	ObjectType     *string         `json:"object_type"`
	ObjectID       json.RawMessage `json:"object_id"`
	AspectType     *string         `json:"aspect_type"`
	Updates        map[string]any  `json:"updates"`
	OwnerID        json.RawMessage `json:"owner_id"`
	SubscriptionID json.RawMessage `json:"subscription_id"`
	EventTime      json.RawMessage `json:"event_time"`
}

// DecodeEvent decodes one webhook body as a tolerant reader of what Strava
// sends: exactly one JSON object; fields it does not know are ignored; ids,
// subscription_id and event_time are positive integers given as JSON numbers
// or numeric strings (Strava's own examples carry "subscription_id":"1") and
// read exactly as int64; updates may be missing. What it still refuses is a
// body that is not a Strava event: not JSON, a required field missing or
// ill-typed, object_type other than activity or athlete, aspect_type other
// than create/update/delete (athlete events are updates only), updates values
// that are not scalars, text that is not valid UTF-8.
// Every failure is a *model.ValidationError (errors.Is model.ErrInvalid)
// whose fields say what was wrong.
func DecodeEvent(body []byte) (ingest.Event, error) {
	if bad := jsontext.InvalidUTF8(body); len(bad) > 0 {
		var v model.ValidationError
		for _, f := range bad {
			v.Add(f, "is not valid UTF-8 text")
		}
		return ingest.Event{}, v.Err()
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var w wireEvent
	if err := dec.Decode(&w); err != nil {
		return ingest.Event{}, decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ingest.Event{}, fieldErr("body", "trailing data after the event object")
	}
	var v model.ValidationError
	str := func(field string, p *string) string {
		if p == nil {
			v.Add(field, "is required")
			return ""
		}
		return *p
	}
	pos := func(field string, raw json.RawMessage) int64 {
		n, err := PositiveID(raw)
		if err != nil {
			v.Add(field, "%s", err.Error())
		}
		return n
	}
	ev := ingest.Event{
		ObjectType: str("object_type", w.ObjectType), ObjectID: pos("object_id", w.ObjectID),
		AspectType: str("aspect_type", w.AspectType), OwnerID: pos("owner_id", w.OwnerID),
		SubscriptionID: pos("subscription_id", w.SubscriptionID), EventTime: pos("event_time", w.EventTime),
	}
	if w.ObjectType != nil && w.AspectType != nil {
		if field, reason := ingest.KindProblem(ev.ObjectType, ev.AspectType); field != "" {
			v.Add(field, "%s", reason)
		}
	}
	if len(w.Updates) > 0 {
		ev.Updates = make(map[string]any, len(w.Updates))
		for k, val := range w.Updates {
			switch x := val.(type) {
			case string, bool:
				ev.Updates[k] = x
			case json.Number:
				ev.Updates[k] = x.String()
			default:
				v.Add("updates."+k, "must be a string, number or boolean")
			}
		}
	}
	if err := v.Err(); err != nil {
		return ingest.Event{}, err
	}
	return ev, nil
}

func decodeError(err error) error {
	var ute *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			field = "body"
		}
		return fieldErr(field, fmt.Sprintf("must be %s, got JSON %s", ute.Type, ute.Value))
	case errors.As(err, &se):
		return fieldErr("body", fmt.Sprintf("malformed JSON at offset %d", se.Offset))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fieldErr("body", "empty or truncated JSON")
	}
	return fieldErr("body", err.Error())
}

// PositiveID reads one id of a Strava payload exactly: a JSON integer or a
// string holding one, in 1..2^63-1. Fractions, exponents, overflow and
// null are refused with the reason (the int64 is never read through float64,
// where ids above 2^53 would lose their last digits).
func PositiveID(raw json.RawMessage) (int64, error) {
	text := string(bytes.TrimSpace(raw))
	if text == "" || text == "null" {
		return 0, errors.New("is required")
	}
	if strings.HasPrefix(text, `"`) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("must be an integer, got %s", text)
		}
		text = strings.TrimSpace(s)
	}
	n, err := strconv.ParseInt(text, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("must fit in 64 bits, got %s", text)
	case err != nil:
		return 0, fmt.Errorf("must be an integer, got %s", string(raw))
	case n <= 0:
		return 0, fmt.Errorf("must be positive, got %d", n)
	}
	return n, nil
}

func fieldErr(field, msg string) error {
	v := &model.ValidationError{}
	v.Add(field, "%s", msg)
	return v
}
