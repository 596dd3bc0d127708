package chaos_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/chaos"
)

// StravaDrift sees every field the projection reads, and a workout Strava
// no longer has that is not marked deleted.
func TestStravaDrift(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 1, 6, 0, 0, 0, time.UTC)
	act := chaos.Activity(11, 5, "Run", 5000, start)
	same := model.Workout{ActivityID: 11, SportType: "Run", DistanceMeters: 5000, TotalElevationGain: act.TotalElevationGain,
		MovingTimeSeconds: act.MovingTime, StartDateUtc: start}
	for _, tc := range []struct {
		name  string
		act   *stravasim.Activity
		given func(*model.Workout)
		want  []string // field names that must be reported
	}{
		{"in sync", &act, func(*model.Workout) {}, nil},
		{"below a millimetre", &act, func(w *model.Workout) { w.DistanceMeters += 0.0001 }, nil},
		{"sport", &act, func(w *model.Workout) { w.SportType = "Ride" }, []string{"sportType"}},
		{"distance", &act, func(w *model.Workout) { w.DistanceMeters = 40000 }, []string{"distanceMeters"}},
		{"elevation", &act, func(w *model.Workout) { w.TotalElevationGain++ }, []string{"totalElevationGain"}},
		{"moving time", &act, func(w *model.Workout) { w.MovingTimeSeconds++ }, []string{"movingTimeSeconds"}},
		{"start", &act, func(w *model.Workout) { w.StartDateUtc = start.Add(time.Hour) }, []string{"startDateUtc"}},
		{"deleted here, alive at Strava", &act, func(w *model.Workout) { w.IsDeleted = true }, []string{"isDeleted"}},
		{"stale answer won", &act, func(w *model.Workout) { w.SportType, w.DistanceMeters = "Ride", 40000 }, []string{"sportType", "distanceMeters"}},
		{"gone at Strava, marked deleted", nil, func(w *model.Workout) { w.IsDeleted = true }, nil},
		{"gone at Strava, still counted", nil, func(*model.Workout) {}, []string{"isDeleted"}},
	} {
		w := same
		tc.given(&w)
		got := chaos.StravaDrift(tc.act, w)
		var fields []string
		for _, d := range got {
			f, _, _ := strings.Cut(d, ":")
			fields = append(fields, f)
		}
		if !slices.Equal(fields, tc.want) {
			t.Errorf("%s: got %q, want fields %v", tc.name, got, tc.want)
		}
	}
}

func minted(milestone string, part int) model.AuditEntry {
	return model.AuditEntry{EventType: chaos.EventAwardMinted, Details: map[string]string{"milestoneId": milestone, "partIndex": fmt.Sprint(part)}}
}

// AwardAudit finds awards without their AWARD_MINTED entry and parts minted
// twice or outside the model; a series' periods each have their own parts.
func TestAwardAudit(t *testing.T) {
	t.Parallel()
	ref := func(m string, i int) chaos.AwardRef { return chaos.AwardRef{MilestoneID: m, PartIndex: i} }
	period := func(m, start string, i int) chaos.AwardRef {
		return chaos.AwardRef{MilestoneID: m, PeriodOf: start, PartIndex: i}
	}
	periodMinted := func(m, start string, i int) model.AuditEntry {
		e := minted(m, i)
		e.Details["periodOf"] = start
		return e
	}
	parts := map[string]int{"m1": 3, "m2": 2}
	for _, tc := range []struct {
		name                    string
		awards                  []chaos.AwardRef
		audits                  []model.AuditEntry
		wantUnaudited, wantDups []chaos.AwardRef
	}{
		{"every award audited", []chaos.AwardRef{ref("m1", 0), ref("m2", 1)},
			[]model.AuditEntry{minted("m1", 0), minted("m2", 1), {EventType: "MILESTONE_PROGRESS_UPDATED"}}, nil, nil},
		{"audit of another milestone does not count", []chaos.AwardRef{ref("m1", 1)},
			[]model.AuditEntry{minted("m2", 1)}, []chaos.AwardRef{ref("m1", 1)}, nil},
		{"other event types do not count", []chaos.AwardRef{ref("m1", 0)},
			[]model.AuditEntry{{EventType: "MILESTONE_COMPLETED", Details: map[string]string{"milestoneId": "m1", "partIndex": "0"}}},
			[]chaos.AwardRef{ref("m1", 0)}, nil},
		{"minted twice", []chaos.AwardRef{ref("m1", 2)},
			[]model.AuditEntry{minted("m1", 2), minted("m1", 2), minted("m1", 2)}, nil, []chaos.AwardRef{ref("m1", 2), ref("m1", 2)}},
		{"award outside the model", []chaos.AwardRef{ref("m2", 2)},
			[]model.AuditEntry{minted("m2", 2)}, nil, []chaos.AwardRef{ref("m2", 2)}},
		{"a series' periods each mint their parts once", []chaos.AwardRef{period("m1", "2026-01-01", 0), period("m1", "2025-01-01", 0)},
			[]model.AuditEntry{periodMinted("m1", "2026-01-01", 0), periodMinted("m1", "2025-01-01", 0)}, nil, nil},
		{"a period's audit does not count for another period", []chaos.AwardRef{period("m1", "2026-01-01", 1)},
			[]model.AuditEntry{periodMinted("m1", "2025-01-01", 1)}, []chaos.AwardRef{period("m1", "2026-01-01", 1)}, nil},
	} {
		u, d := chaos.AwardAudit(tc.awards, parts, tc.audits)
		if !slices.Equal(u, tc.wantUnaudited) || !slices.Equal(d, tc.wantDups) {
			t.Errorf("%s: got unaudited %v doubled %v, want %v and %v", tc.name, u, d, tc.wantUnaudited, tc.wantDups)
		}
	}
}

// A scenario fails on any lost event, doubled or unaudited award, or drift;
// the other counts are information.
func TestFiguresOK(t *testing.T) {
	t.Parallel()
	clean := chaos.Figures{Scenario: "s", Accepted: 10, Written: 10, Duplicates: 3, Refused: 2, Parked: 1, Reads: 40, Settled: true}
	if !clean.OK() || !strings.HasSuffix(clean.String(), " ok") {
		t.Errorf("clean figures: got OK=%v %q", clean.OK(), clean)
	}
	for name, spoil := range map[string]func(*chaos.Figures){
		"lost":        func(f *chaos.Figures) { f.Lost = 1 },
		"dupAwards":   func(f *chaos.Figures) { f.DupAwards = 1 },
		"unaudited":   func(f *chaos.Figures) { f.Unaudited = 1 },
		"driftLog":    func(f *chaos.Figures) { f.DriftLog = 1 },
		"driftStrava": func(f *chaos.Figures) { f.DriftStrava = 1 },
		"lifecycle":   func(f *chaos.Figures) { f.Lifecycle = 1 },
	} {
		f := clean
		spoil(&f)
		if f.OK() || !strings.HasSuffix(f.String(), " FAIL") || !strings.Contains(f.String(), name+"=1") {
			t.Errorf("%s: got OK=%v %q, want a FAIL line showing it", name, f.OK(), f)
		}
	}
	total := chaos.Total([]chaos.Figures{clean, {Scenario: "t", Lost: 2, Accepted: 1}})
	if total.Lost != 2 || total.Accepted != 11 || total.OK() || total.Settled {
		t.Errorf("total: got %+v", total)
	}
}
