package intake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/jsontext"
	"github.com/commitcollect/backend/model"
)

// MaxEventBytes bounds a webhook request body.
const MaxEventBytes = 64 << 10

// wireEvent detects missing fields (nil) apart from zero values.
type wireEvent struct {
	ObjectType     *string        `json:"object_type"`
	ObjectID       *int64         `json:"object_id"`
	AspectType     *string        `json:"aspect_type"`
	Updates        map[string]any `json:"updates"`
	OwnerID        *int64         `json:"owner_id"`
	SubscriptionID *int64         `json:"subscription_id"`
	EventTime      *int64         `json:"event_time"`
}

// DecodeEvent strictly decodes one webhook body: exactly one JSON object,
// no unknown fields, every field of the right type, object_type activity or
// athlete, aspect_type create/update/delete (athlete events are updates
// only), positive ids and event time, updates values that are scalars, and
// text (keys and values, updates included) that is valid UTF-8.
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
	dec.DisallowUnknownFields()
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
	pos := func(field string, p *int64) int64 {
		switch {
		case p == nil:
			v.Add(field, "is required")
			return 0
		case *p <= 0:
			v.Add(field, "must be positive, got %d", *p)
		}
		return *p
	}
	ev := ingest.Event{
		ObjectType: str("object_type", w.ObjectType), ObjectID: pos("object_id", w.ObjectID),
		AspectType: str("aspect_type", w.AspectType), OwnerID: pos("owner_id", w.OwnerID),
		SubscriptionID: pos("subscription_id", w.SubscriptionID), EventTime: pos("event_time", w.EventTime),
	}
	if w.ObjectType != nil && ev.ObjectType != ingest.ObjectActivity && ev.ObjectType != ingest.ObjectAthlete {
		v.Add("object_type", "unknown object type %q", ev.ObjectType)
	}
	if w.AspectType != nil {
		switch ev.AspectType {
		case ingest.AspectCreate, ingest.AspectUpdate, ingest.AspectDelete:
			if ev.ObjectType == ingest.ObjectAthlete && ev.AspectType != ingest.AspectUpdate {
				v.Add("aspect_type", "athlete events are updates only, got %q", ev.AspectType)
			}
		default:
			v.Add("aspect_type", "unknown aspect type %q", ev.AspectType)
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
	// DisallowUnknownFields reports `json: unknown field "x"`.
	return fieldErr("body", err.Error())
}

func fieldErr(field, msg string) error {
	v := &model.ValidationError{}
	v.Add(field, "%s", msg)
	return v
}
