package export_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff/export"
	"github.com/commitcollect/backend/model"
)

// store is a function-field fake of export.Store.
type store struct {
	eachWorkout func(ctx context.Context, userID string, after int64, pageSize int32, fn func(model.Workout) (bool, error)) error
}

func (s store) EachWorkout(ctx context.Context, userID string, after int64, pageSize int32, fn func(model.Workout) (bool, error)) error {
	return s.eachWorkout(ctx, userID, after, pageSize, fn)
}

// history serves ws (in key order) after a cursor, as the adapter does.
func history(ws []model.Workout) store {
	return store{eachWorkout: func(_ context.Context, _ string, after int64, _ int32, fn func(model.Workout) (bool, error)) error {
		for _, w := range ws {
			if w.ActivityID <= after {
				continue
			}
			if more, err := fn(w); err != nil || !more {
				return err
			}
		}
		return nil
	}}
}

// numbered is a part of n items keyed k0001… after a cursor, as the
// awards' adapter serves them.
func numbered(n int) export.Part {
	key := func(i int) string { return fmt.Sprintf("k%04d", i) }
	return export.Part{Name: "awards", CountName: "awardCount", Prefix: "a1:",
		Valid: func(k string) bool { return strings.HasPrefix(k, "k") },
		Each: func(_ context.Context, after string, fn func(string, any) (bool, error)) error {
			for i := 1; i <= n; i++ {
				if key(i) <= after {
					continue
				}
				if more, err := fn(key(i), map[string]string{"key": key(i), "name": `"part" <&>`}); err != nil || !more {
					return err
				}
			}
			return nil
		}}
}

type page struct {
	ExportedAtUtc string `json:"exportedAtUtc"`
	Awards        []struct{ Key string }
	AwardCount    int
	Workouts      []export.WorkoutJSON
	WorkoutCount  int
	Next          string
}

// TestBuildPages: pages stay within the bound counted as Lambda sends them
// (quotes and <>& escaped again), tombstones are left out but move the
// cursor, every item of every part comes once across pages (the awards
// first, then the workouts, a page reaching into the next part when it
// has room), and only a full page names a next one. Protections: the
// escaped-size bound, the tombstone filter, the cursor of the last item
// given in its part.
func TestBuildPages(t *testing.T) {
	t.Parallel()
	var ws []model.Workout
	for id := int64(1); id <= 60; id++ {
		ws = append(ws, model.Workout{ActivityID: id, SportType: "Run", Name: fmt.Sprintf(`"Hill" <%d> & "back"`, id),
			StartDateUtc: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), IsDeleted: id%10 == 0})
	}
	tests := []struct {
		awards, limit, minPages, maxPages int
	}{
		{awards: 0, limit: 1 << 20, minPages: 1, maxPages: 1},
		{awards: 0, limit: 1500, minPages: 10, maxPages: 60},
		{awards: 500, limit: 4000, minPages: 10, maxPages: 200},
		{awards: 500, limit: 1 << 20, minPages: 1, maxPages: 1},
	}
	for _, tt := range tests {
		parts := []export.Part{numbered(tt.awards), export.Workouts(history(ws), "u1")}
		next := func(at export.At) string { return "https://api.test/v1/me/export?cursor=" + export.Cursor(parts, at) }
		seen, awards, at, pages := map[int64]int{}, map[string]int{}, export.At{}, 0
		for {
			p, err := export.Build(context.Background(), parts, struct {
				ExportedAtUtc string `json:"exportedAtUtc"`
			}{"2026-03-01T00:00:00Z"}, at, tt.limit, next)
			if err != nil {
				t.Fatal(err)
			}
			esc, _ := json.Marshal(p.Body.String())
			if len(esc)-2 > tt.limit {
				t.Fatalf("%+v: page %d is %d bytes escaped", tt, pages, len(esc)-2)
			}
			var got page
			if err := json.Unmarshal(p.Body.Bytes(), &got); err != nil || got.WorkoutCount != len(got.Workouts) ||
				got.AwardCount != len(got.Awards) || got.Next != p.Next {
				t.Fatalf("%+v: page %d: %v %+v", tt, pages, err, got)
			}
			for _, w := range got.Workouts {
				seen[w.ActivityID]++
			}
			for _, a := range got.Awards {
				awards[a.Key]++
			}
			pages++
			if p.Next == "" {
				break
			}
			u, _ := url.Parse(p.Next)
			if at, err = export.ParseCursor(u.Query(), parts); err != nil {
				t.Fatal(err)
			}
		}
		for id := int64(1); id <= 60; id++ {
			if want := map[bool]int{true: 0, false: 1}[id%10 == 0]; seen[id] != want {
				t.Errorf("%+v: activity %d given %d times, want %d", tt, id, seen[id], want)
			}
		}
		for i := 1; i <= tt.awards; i++ {
			if k := fmt.Sprintf("k%04d", i); awards[k] != 1 {
				t.Errorf("%+v: award %s given %d times, want once", tt, k, awards[k])
			}
		}
		if pages < tt.minPages || pages > tt.maxPages {
			t.Errorf("%+v: %d pages", tt, pages)
		}
	}
}

// TestBuildFailsCleanly: a failed read is an error, never a partial page.
func TestBuildFailsCleanly(t *testing.T) {
	t.Parallel()
	boom := errors.New("throttled")
	st := store{eachWorkout: func(context.Context, string, int64, int32, func(model.Workout) (bool, error)) error { return boom }}
	parts := []export.Part{numbered(3), export.Workouts(st, "u1")}
	next := func(at export.At) string { return export.Cursor(parts, at) }
	if p, err := export.Build(context.Background(), parts, struct{}{}, export.At{}, 1<<20, next); !errors.Is(err, boom) || p != nil {
		t.Fatalf("got %v, %v; want the read's error and no page", p, err)
	}
}

// TestCursor: a cursor this API gave reads back, in its part; anything
// else is refused with a reason. Protection: ParseCursor's checks (a part
// begun from nothing, a key its part never has).
func TestCursor(t *testing.T) {
	t.Parallel()
	parts := []export.Part{numbered(3), export.Workouts(store{}, "u1")}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name, query string
		want        export.At
		wantErr     string
	}{
		{"none", "", export.At{}, ""},
		{"workouts", "cursor=" + export.Cursor(parts, export.At{Part: 1, After: "553311997755"}), export.At{Part: 1, After: "553311997755"}, ""},
		{"workouts from their first", "cursor=" + enc("w1:"), export.At{Part: 1}, ""},
		{"awards", "cursor=" + enc("a1:k0002"), export.At{After: "k0002"}, ""},
		{"awards from nothing", "cursor=" + enc("a1:"), export.At{}, "not a cursor"},
		{"twice", "cursor=a&cursor=b", export.At{}, "more than once"},
		{"not base64", "cursor=!!", export.At{}, "not a cursor"},
		{"another prefix", "cursor=eDE6MTIz", export.At{}, "not a cursor"},
		{"negative", "cursor=dzE6LTE", export.At{}, "not a cursor"},
		{"zero", "cursor=" + enc("w1:0"), export.At{}, "not a cursor"},
		{"no award key", "cursor=" + enc("a1:x"), export.At{}, "not a cursor"},
	}
	for _, tt := range tests {
		q, _ := url.ParseQuery(tt.query)
		got, err := export.ParseCursor(q, parts)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: got %+v, %v; want %+v, %q", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestEnvelopeSize matches encoding/json's escaping of the body inside
// Lambda's answer.
func TestEnvelopeSize(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"a":1}`, `{"name":"\"x\" <y> & z \\ w"}`, "plain ascii", "é ü ✓"} {
		esc, _ := json.Marshal(body)
		if got := export.EnvelopeSize([]byte(body)); got != len(esc)-2 {
			t.Errorf("%q: %d, want %d", body, got, len(esc)-2)
		}
	}
}

// TestAnExportHoldsEveryWorkoutAttribute: every attribute a stored workout
// keeps about the athlete's activity is in its export, under the same name;
// only the pipeline's bookkeeping is left out. A new attribute (Strava's
// marks, the elapsed time) fails here until the export carries it.
// Protection: WorkoutJSON's fields.
func TestAnExportHoldsEveryWorkoutAttribute(t *testing.T) {
	t.Parallel()
	bookkeeping := map[string]bool{"PK": true, "SK": true, "entityType": true, "schemaVersion": true, "userId": true,
		"athleteId": true, "isDeleted": true, "deletedAtUtc": true, "deletedReason": true, "correlationId": true, "expiresAt": true,
		"LSI1SK": true, "fetchStartedAtNs": true, "syncJobKey": true}
	exported := map[string]bool{}
	jt := reflect.TypeFor[export.WorkoutJSON]()
	for i := range jt.NumField() {
		exported[strings.Split(jt.Field(i).Tag.Get("json"), ",")[0]] = true
	}
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		for i := range ty.NumField() {
			f := ty.Field(i)
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			name := strings.Split(f.Tag.Get("dynamodbav"), ",")[0]
			if name != "" && name != "-" && !bookkeeping[name] && !exported[name] {
				t.Errorf("a workout keeps %q, which its export leaves out", name)
			}
		}
	}
	walk(reflect.TypeFor[model.Workout]())
}
