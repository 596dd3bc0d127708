package export_test

import (
	"context"
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

func next(after int64) string { return "https://api.test/v1/me/export?cursor=" + export.Cursor(after) }

type page struct {
	ExportedAtUtc string `json:"exportedAtUtc"`
	Workouts      []export.WorkoutJSON
	WorkoutCount  int
	Next          string
}

// TestBuildPages: pages stay within the bound counted as Lambda sends them
// (quotes and <>& escaped again), tombstones are left out but move the
// cursor, every workout comes once across pages, and only a full page
// names a next one. Protections: the escaped-size bound, the tombstone
// filter, the cursor of the last workout given.
func TestBuildPages(t *testing.T) {
	t.Parallel()
	var ws []model.Workout
	for id := int64(1); id <= 60; id++ {
		ws = append(ws, model.Workout{ActivityID: id, SportType: "Run", Name: fmt.Sprintf(`"Hill" <%d> & "back"`, id),
			StartDateUtc: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), IsDeleted: id%10 == 0})
	}
	for _, limit := range []int{1500, 4000, 1 << 20} {
		seen, after, pages := map[int64]int{}, int64(0), 0
		for {
			p, err := export.Build(context.Background(), history(ws), "u1", struct {
				ExportedAtUtc string `json:"exportedAtUtc"`
			}{"2026-03-01T00:00:00Z"}, after, limit, next)
			if err != nil {
				t.Fatal(err)
			}
			esc, _ := json.Marshal(p.Body.String())
			if len(esc)-2 > limit {
				t.Fatalf("limit %d: page %d is %d bytes escaped", limit, pages, len(esc)-2)
			}
			var got page
			if err := json.Unmarshal(p.Body.Bytes(), &got); err != nil || got.WorkoutCount != len(got.Workouts) || got.Next != p.Next {
				t.Fatalf("limit %d: page %d: %v %+v", limit, pages, err, got)
			}
			for _, w := range got.Workouts {
				seen[w.ActivityID]++
			}
			pages++
			if p.Next == "" {
				break
			}
			u, _ := url.Parse(p.Next)
			if after, err = export.ParseCursor(u.Query()); err != nil {
				t.Fatal(err)
			}
		}
		for id := int64(1); id <= 60; id++ {
			if want := map[bool]int{true: 0, false: 1}[id%10 == 0]; seen[id] != want {
				t.Errorf("limit %d: activity %d given %d times, want %d", limit, id, seen[id], want)
			}
		}
		if (limit == 1<<20) != (pages == 1) {
			t.Errorf("limit %d: %d pages", limit, pages)
		}
	}
}

// TestBuildFailsCleanly: a failed read is an error, never a partial page.
func TestBuildFailsCleanly(t *testing.T) {
	t.Parallel()
	boom := errors.New("throttled")
	st := store{eachWorkout: func(context.Context, string, int64, int32, func(model.Workout) (bool, error)) error { return boom }}
	if p, err := export.Build(context.Background(), st, "u1", struct{}{}, 0, 1000, next); !errors.Is(err, boom) || p != nil {
		t.Fatalf("got %v, %v; want the read's error and no page", p, err)
	}
}

// TestCursor: a cursor this API gave reads back; anything else is refused
// with a reason.
func TestCursor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, query string
		want        int64
		wantErr     string
	}{
		{"none", "", 0, ""},
		{"given", "cursor=" + export.Cursor(553311997755), 553311997755, ""},
		{"twice", "cursor=a&cursor=b", 0, "more than once"},
		{"not base64", "cursor=!!", 0, "not a cursor"},
		{"another prefix", "cursor=eDE6MTIz", 0, "not a cursor"},
		{"negative", "cursor=dzE6LTE", 0, "not a cursor"},
	}
	for _, tt := range tests {
		q, _ := url.ParseQuery(tt.query)
		got, err := export.ParseCursor(q)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: got %d, %v; want %d, %q", tt.name, got, err, tt.want, tt.wantErr)
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
