package runtime

import (
	"strings"
	"testing"
)

func TestFilterMatch(t *testing.T) {
	t.Parallel()
	const workout = `{"eventName":["INSERT","MODIFY"],"dynamodb":{"Keys":{"SK":{"S":[{"prefix":"WORKOUT#STRAVA#"}]}}}}`
	const notProjector = `{"eventName":["MODIFY"],"dynamodb":{"NewImage":{"entityType":{"S":["MILESTONE"]},"writtenBy":{"S":[{"anything-but":["projector"]}]}}}}`
	tests := []struct {
		name    string
		pattern string
		event   string
		want    bool
	}{
		{"prefix matches", workout, `{"eventName":"INSERT","dynamodb":{"Keys":{"SK":{"S":"WORKOUT#STRAVA#7"}}}}`, true},
		{"second alternative", workout, `{"eventName":"MODIFY","dynamodb":{"Keys":{"SK":{"S":"WORKOUT#STRAVA#7"}}}}`, true},
		{"event name not listed", workout, `{"eventName":"REMOVE","dynamodb":{"Keys":{"SK":{"S":"WORKOUT#STRAVA#7"}}}}`, false},
		{"prefix differs", workout, `{"eventName":"INSERT","dynamodb":{"Keys":{"SK":{"S":"MILESTONE#m1"}}}}`, false},
		{"prefix on a number", workout, `{"eventName":"INSERT","dynamodb":{"Keys":{"SK":{"N":"1"}}}}`, false},
		{"field missing", workout, `{"eventName":"INSERT","dynamodb":{"Keys":{}}}`, false},
		{"object expected", workout, `{"eventName":"INSERT","dynamodb":"x"}`, false},
		{"anything-but other writer", notProjector, `{"eventName":"MODIFY","dynamodb":{"NewImage":{"entityType":{"S":"MILESTONE"},"writtenBy":{"S":"api"}}}}`, true},
		{"anything-but excluded writer", notProjector, `{"eventName":"MODIFY","dynamodb":{"NewImage":{"entityType":{"S":"MILESTONE"},"writtenBy":{"S":"projector"}}}}`, false},
		{"anything-but needs the field", notProjector, `{"eventName":"MODIFY","dynamodb":{"NewImage":{"entityType":{"S":"MILESTONE"}}}}`, false},
		{"exact value differs", notProjector, `{"eventName":"MODIFY","dynamodb":{"NewImage":{"entityType":{"S":"AWARD"},"writtenBy":{"S":"api"}}}}`, false},
		{"event array: any element", `{"tags":["a"]}`, `{"tags":["b","a"]}`, true},
		{"number equality", `{"n":[3]}`, `{"n":3}`, true},
		{"null matches null", `{"n":[null]}`, `{"n":null}`, true},
		{"anything-but single value", `{"s":[{"anything-but":"x"}]}`, `{"s":"y"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := CompileFilter(tt.pattern)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			got, err := f.Match([]byte(tt.event))
			if err != nil {
				t.Fatalf("match: %v", err)
			}
			if got != tt.want {
				t.Fatalf("Match(%s) on %s = %v, want %v", tt.event, tt.pattern, got, tt.want)
			}
		})
	}
}

func TestCompileFilterRefusesWhatItDoesNotEmulate(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, pattern, want string }{
		{"unknown operator", `{"a":[{"numeric":[">",1]}]}`, `operator "numeric"`},
		{"exists", `{"a":[{"exists":true}]}`, `operator "exists"`},
		{"leaf not a list", `{"a":"x"}`, "must be a list"},
		{"empty list", `{"a":[]}`, "empty list"},
		{"two operators", `{"a":[{"prefix":"x","anything-but":"y"}]}`, "exactly one operator"},
		{"prefix not a string", `{"a":[{"prefix":1}]}`, "prefix wants a string"},
		{"not JSON", `{`, "filter pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := CompileFilter(tt.pattern)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CompileFilter(%s) = %v, want an error containing %q", tt.pattern, err, tt.want)
			}
		})
	}
}

func TestFiltersMatchAny(t *testing.T) {
	t.Parallel()
	a, _ := CompileFilter(`{"k":["a"]}`)
	b, _ := CompileFilter(`{"k":["b"]}`)
	for _, tt := range []struct {
		event string
		want  bool
	}{{`{"k":"a"}`, true}, {`{"k":"b"}`, true}, {`{"k":"c"}`, false}} {
		if got, err := (Filters{a, b}).Match([]byte(tt.event)); err != nil || got != tt.want {
			t.Fatalf("Filters.Match(%s) = %v, %v; want %v", tt.event, got, err, tt.want)
		}
	}
}
