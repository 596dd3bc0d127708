package projections_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/projections"
	"github.com/commitcollect/backend/test/fixture"
)

// TestTouchedSaysWhatToRead: the days and starts of a batch's triggers
// decide what a recompute reads: a milestone whose week sums are used
// reads the touched weeks, any other its whole period; a trigger without
// its days, or a day without its start, reads every period whole.
func TestTouchedSaysWhatToRead(t *testing.T) {
	t.Parallel()
	def := fixture.Definition() // March 2026, UTC
	cur, err := projections.ProjectWith(def, model.Projection{}, projections.Held{}, projections.Log{}, fixture.March)
	if err != nil {
		t.Fatal(err)
	}
	withSums := model.Milestone{MilestoneDefinition: def, Projection: cur.Projection}
	withoutSums := model.Milestone{MilestoneDefinition: def}
	at := fixture.March.AddDate(0, 0, 9).Add(7 * time.Hour)
	k := calendar.WeekOf(at)
	week := calendar.WeekWindows(def.Window(), []int64{k})
	whole := []model.Window{def.Window()}
	tests := []struct {
		name                  string
		add                   func(*projections.Touched)
		withSums, withoutSums []model.Window
		logWeeks              map[int64]bool
		all, wholePeriods     bool
	}{
		{"a workout written", func(t *projections.Touched) { t.Add([]string{"2026-03-10"}, []time.Time{at}, true) },
			week, whole, map[int64]bool{k: true}, false, false},
		{"a tombstone: no day, nothing read", func(t *projections.Touched) { t.Add(nil, nil, true) },
			nil, whole, map[int64]bool{}, false, false},
		{"a milestone written: its days unknown", func(t *projections.Touched) {
			t.Add([]string{"2026-03-10"}, []time.Time{at}, true)
			t.Add(nil, nil, false)
		}, whole, whole, nil, true, false},
		{"a day without its start", func(t *projections.Touched) { t.Add([]string{"2026-03-10"}, nil, true) },
			whole, whole, nil, false, true},
	}
	for _, tt := range tests {
		var got projections.Touched
		tt.add(&got)
		if got.All != tt.all || got.WholePeriods != tt.wholePeriods {
			t.Errorf("%s: all %v whole %v, want %v %v", tt.name, got.All, got.WholePeriods, tt.all, tt.wholePeriods)
		}
		if w := got.Windows(&withSums); !reflect.DeepEqual(w, tt.withSums) {
			t.Errorf("%s: with sums reads %v, want %v", tt.name, w, tt.withSums)
		}
		if w := got.Windows(&withoutSums); !reflect.DeepEqual(w, tt.withoutSums) {
			t.Errorf("%s: without sums reads %v, want %v", tt.name, w, tt.withoutSums)
		}
		if w := got.LogWeeks(); !reflect.DeepEqual(w, tt.logWeeks) {
			t.Errorf("%s: log weeks %v, want %v", tt.name, w, tt.logWeeks)
		}
	}
}
