package counting

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/rules"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// outdoorRuns is a March distance goal for runs that leaves out manual
// entries, trainer sessions and commutes, and activities under 20 minutes
// or 1 km.
func outdoorRuns() model.MilestoneDefinition {
	return model.MilestoneDefinition{Metric: model.MetricDistance, Target: 100_000, SportTypes: []string{"Run"},
		PeriodStartDate: "2026-03-01", PeriodEndDate: "2026-03-31", PartCount: 10,
		Rules: &rules.Rules{MinMovingTimeSeconds: 1200, MinDistanceMeters: 1000,
			Exclude: []string{rules.ExcludeManual, rules.ExcludeTrainer, rules.ExcludeCommute}}}
}

func run(edit func(*model.Workout)) model.Workout {
	w := model.Workout{ActivityID: 1, SportType: "Run", DistanceMeters: 5000, MovingTimeSeconds: 1500,
		StartDateUtc: t0, StartDateLocal: "2026-03-10T13:00:00", Flags: &rules.Flags{}}
	if edit != nil {
		edit(&w)
	}
	return w
}

// TestJudge: each rule leaves out what it names, in order (sport, then
// each exclusion, then the minimums), an activity exactly at a minimum
// counts, and only a counted workout adds. Protections: each check of
// Judge, the >= of the minimums, the order, the unknown flags' decision.
func TestJudge(t *testing.T) {
	t.Parallel()
	def := outdoorRuns()
	tests := []struct {
		name string
		def  model.MilestoneDefinition
		w    model.Workout
		want Verdict
	}{
		{"an outdoor 5 km run counts its metres", def, run(nil), Verdict{InPeriod: true, Counted: true, Units: 5_000_000}},
		{"a ride is the wrong sport", def, run(func(w *model.Workout) { w.SportType = "Ride" }), Verdict{InPeriod: true, Reason: rules.ReasonSport}},
		{"a manual entry", def, run(func(w *model.Workout) { w.Flags.Manual = true }), Verdict{InPeriod: true, Reason: rules.ReasonManual}},
		{"a treadmill run", def, run(func(w *model.Workout) { w.Flags.Trainer = true }), Verdict{InPeriod: true, Reason: rules.ReasonTrainer}},
		{"a commute", def, run(func(w *model.Workout) { w.Flags.Commute = true }), Verdict{InPeriod: true, Reason: rules.ReasonCommute}},
		{"manual wins over commute (checked first)", def, run(func(w *model.Workout) { w.Flags.Manual, w.Flags.Commute = true, true }),
			Verdict{InPeriod: true, Reason: rules.ReasonManual}},
		{"the sport wins over a flag", def, run(func(w *model.Workout) { w.SportType, w.Flags.Manual = "Ride", true }),
			Verdict{InPeriod: true, Reason: rules.ReasonSport}},
		{"one second short", def, run(func(w *model.Workout) { w.MovingTimeSeconds = 1199 }), Verdict{InPeriod: true, Reason: rules.ReasonBelowMinimum}},
		{"exactly 20 minutes counts", def, run(func(w *model.Workout) { w.MovingTimeSeconds = 1200 }), Verdict{InPeriod: true, Counted: true, Units: 5_000_000}},
		{"a metre short", def, run(func(w *model.Workout) { w.DistanceMeters = 999.9 }), Verdict{InPeriod: true, Reason: rules.ReasonBelowMinimum}},
		{"exactly 1 km counts", def, run(func(w *model.Workout) { w.DistanceMeters = 1000 }), Verdict{InPeriod: true, Counted: true, Units: 1_000_000}},
		{"flags not yet known, exclusions named: not counted until re-read", def, run(func(w *model.Workout) { w.Flags = nil }),
			Verdict{InPeriod: true, Reason: rules.ReasonManual, FlagsUnknown: true}},
		{"flags not yet known, no exclusion named: counts", model.MilestoneDefinition{Metric: model.MetricCount, Target: 1,
			PeriodStartDate: "2026-03-01", Rules: &rules.Rules{MinDistanceMeters: 1000}}, run(func(w *model.Workout) { w.Flags = nil }),
			Verdict{InPeriod: true, Counted: true, Units: 1}},
		{"no rules: a manual treadmill commute counts", model.MilestoneDefinition{Metric: model.MetricCount, Target: 1, PeriodStartDate: "2026-03-01"},
			run(func(w *model.Workout) { *w.Flags = rules.Flags{Manual: true, Trainer: true, Commute: true} }), Verdict{InPeriod: true, Counted: true, Units: 1}},
		{"a tombstone is not judged", def, run(func(w *model.Workout) { w.IsDeleted = true }), Verdict{}},
		{"April is not judged", def, run(func(w *model.Workout) { w.StartDateLocal = "2026-04-01T06:00:00" }), Verdict{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := For(tt.def).Judge(tt.w); got != tt.want {
				t.Fatalf("Judge = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestFingerprintAndIdentityFollowTheRules: a change of rules changes the
// fingerprint and the definition's identity; the same rules written in
// another order do not. Protections: Rules.Key in Fingerprint, rules.Same
// in SameDefinition.
func TestFingerprintAndIdentityFollowTheRules(t *testing.T) {
	t.Parallel()
	a, b := outdoorRuns(), outdoorRuns()
	b.Rules.Exclude = []string{rules.ExcludeCommute, rules.ExcludeTrainer, rules.ExcludeManual}
	if For(a).Fingerprint() != For(b).Fingerprint() || !SameDefinition(a, b) {
		t.Fatal("the same rules in another order read as different")
	}
	for name, edit := range map[string]func(*model.MilestoneDefinition){
		"a minimum moved":     func(d *model.MilestoneDefinition) { d.Rules.MinMovingTimeSeconds++ },
		"a distance moved":    func(d *model.MilestoneDefinition) { d.Rules.MinDistanceMeters++ },
		"an exclusion left":   func(d *model.MilestoneDefinition) { d.Rules.Exclude = d.Rules.Exclude[1:] },
		"no rules at all":     func(d *model.MilestoneDefinition) { d.Rules = nil },
		"another sport":       func(d *model.MilestoneDefinition) { d.SportTypes = []string{"Ride"} },
		"another metric":      func(d *model.MilestoneDefinition) { d.Metric = model.MetricCount },
		"another last day":    func(d *model.MilestoneDefinition) { d.PeriodEndDate = "2026-03-30" },
		"another first day":   func(d *model.MilestoneDefinition) { d.PeriodStartDate = "2026-03-02" },
		"the title (no sums)": nil,
	} {
		c := outdoorRuns()
		if edit == nil {
			c.Title = "renamed"
			if For(c).Fingerprint() != For(a).Fingerprint() || SameDefinition(a, c) {
				t.Errorf("%s: the fingerprint moved, or the identity did not", name)
			}
			continue
		}
		edit(&c)
		if For(c).Fingerprint() == For(a).Fingerprint() || SameDefinition(a, c) {
			t.Errorf("%s: not seen", name)
		}
	}
	if !SameDefinition(model.MilestoneDefinition{Rules: &rules.Rules{}}, model.MilestoneDefinition{}) {
		t.Error("empty rules and none read as different")
	}
}

// TestLogFieldsHoldWhatJudgeReads: every name in LogFields is a stored
// workout attribute, and every metric's field and the flags are in it, so
// the log projection (and LSI1, built from it) cannot miss one. Protection:
// the field list.
func TestLogFieldsHoldWhatJudgeReads(t *testing.T) {
	t.Parallel()
	stored := map[string]bool{}
	ty := reflect.TypeFor[model.Workout]()
	for i := range ty.NumField() {
		stored[strings.Split(ty.Field(i).Tag.Get("dynamodbav"), ",")[0]] = true
	}
	for _, f := range LogFields {
		if !stored[f] {
			t.Errorf("LogFields names %q, not a workout attribute", f)
		}
	}
	for _, m := range model.Metrics {
		if f := model.MetricSpecs[m].Field; f != "" && !slices.Contains(LogFields, f) {
			t.Errorf("%s reads %s, missing from LogFields", m, f)
		}
	}
	for _, f := range []string{"flags", "elapsedTimeSeconds", "sportType", "startDateUtc", "isDeleted"} {
		if !slices.Contains(LogFields, f) {
			t.Errorf("rules read %s, missing from LogFields", f)
		}
	}
}

// TestDiffers: a sync writes a listed activity only when something Judge
// reads changed (the name is not one). Protection: each field Differs
// compares.
func TestDiffers(t *testing.T) {
	t.Parallel()
	base := model.Workout{SportType: "Run", DistanceMeters: 5000, TotalElevationGain: 40, MovingTimeSeconds: 1500, ElapsedTimeSeconds: 1600,
		StartDateUtc: t0, Name: "a", Flags: &rules.Flags{}}
	for name, edit := range map[string]func(*model.Workout){
		"sport type":    func(w *model.Workout) { w.SportType = "Ride" },
		"distance":      func(w *model.Workout) { w.DistanceMeters++ },
		"elevation":     func(w *model.Workout) { w.TotalElevationGain++ },
		"time":          func(w *model.Workout) { w.MovingTimeSeconds++ },
		"elapsed time":  func(w *model.Workout) { w.ElapsedTimeSeconds++ },
		"start":         func(w *model.Workout) { w.StartDateUtc = w.StartDateUtc.Add(time.Second) },
		"manual":        func(w *model.Workout) { w.Flags = &rules.Flags{Manual: true} },
		"trainer":       func(w *model.Workout) { w.Flags = &rules.Flags{Trainer: true} },
		"commute":       func(w *model.Workout) { w.Flags = &rules.Flags{Commute: true} },
		"flags learned": func(w *model.Workout) { w.Flags = nil },
	} {
		stored := base
		stored.Flags = &rules.Flags{}
		fresh := base
		fresh.Flags = &rules.Flags{}
		edit(&fresh)
		if name == "flags learned" { // stored without flags, Strava gives them
			stored, fresh = fresh, stored
		}
		if !Differs(&stored, &fresh) {
			t.Errorf("%s changed: not seen", name)
		}
	}
	renamed := base
	renamed.Name, renamed.Flags = "b", &rules.Flags{}
	if Differs(&base, &renamed) {
		t.Error("a new name alone is written: milestones never read it")
	}
}

// TestDiffersFillsLocalDays: a workout stored before local starts were
// kept (its date key carries no local day) differs from Strava's version
// that gives one, so the next list page rewrites it (the migration); once
// filled it does not; a page that gives no local start rewrites nothing.
// Protection: localDayDiffers.
func TestDiffersFillsLocalDays(t *testing.T) {
	t.Parallel()
	stored := func(local string) *model.Workout {
		w := &model.Workout{UserID: "u", ActivityID: 7, SportType: "Run", DistanceMeters: 5000, StartDateUtc: t0, StartDateLocal: local}
		w.Stamp() // as the log reads it: the local day is in the date key
		w.StartDateLocal = ""
		return w
	}
	fresh := func(local string) *model.Workout {
		return &model.Workout{SportType: "Run", DistanceMeters: 5000, StartDateUtc: t0, StartDateLocal: local}
	}
	day := t0.Format(time.DateOnly)
	tests := []struct {
		name          string
		stored, fresh *model.Workout
		want          bool
	}{
		{"stored without a local day, Strava gives one", stored(""), fresh(day + "T07:00:00"), true},
		{"filled and the same", stored(day + "T07:00:00"), fresh(day + "T07:00:00"), false},
		{"filled, Strava's zone moved the day", stored(day + "T07:00:00"), fresh(t0.AddDate(0, 0, 1).Format(time.DateOnly) + "T01:00:00"), true},
		{"Strava gives none", stored(""), fresh(""), false},
	}
	for _, tt := range tests {
		if got := Differs(tt.stored, tt.fresh); got != tt.want {
			t.Errorf("%s: Differs = %v, want %v", tt.name, got, tt.want)
		}
	}
}
