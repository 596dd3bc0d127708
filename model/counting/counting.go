// Package counting is the one owner of what counts towards a milestone:
// whether a workout counts, why not, and what it adds (Counter), what
// decides that (Fingerprint, SameDefinition), the workout attributes the
// log must hold for it (LogFields, from which LSI1's projection is built)
// and whether a fresh copy of a workout changes it (Differs). Every other
// place asks it; adding a rule touches this package, model/rules, the
// request and the answer.
//
// Replay sensitivity: changing a verdict changes every projected milestone
// (a rebuild), and the week sums' fingerprint version must move with it.
package counting

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/rules"
)

// Verdict is what a milestone makes of one workout.
type Verdict struct {
	// InPeriod is false for a workout that is not the milestone's to judge:
	// deleted (a tombstone keeps no content), or started outside the period.
	InPeriod bool
	// Counted says the workout counts; Reason, when it does not, says why.
	Counted bool
	Reason  rules.Reason
	// Units is what it adds, in the projection's integer units (0 unless
	// Counted).
	Units int64
	// FlagsUnknown says Strava's flags were not stored with the workout
	// (stored before they were kept) and the milestone excludes a kind of
	// activity: it does not count until a re-read shows what it is, and
	// Reason is the first exclusion the milestone names.
	FlagsUnknown bool
}

// Counter judges workouts for one milestone definition.
type Counter struct {
	def model.MilestoneDefinition
}

// For returns the Counter of def.
func For(def model.MilestoneDefinition) Counter { return Counter{def: def} }

// Judge says whether w counts towards the definition, why not, and what it
// adds. The checks run in order: the period (and the tombstone), the sport
// type, each exclusion (manual, trainer, commute), then the minimums (an
// activity exactly at a minimum counts).
func (c Counter) Judge(w model.Workout) Verdict {
	if w.IsDeleted || !c.def.Period().Holds(w.StartDateUtc, w.LocalDate()) {
		return Verdict{}
	}
	v := Verdict{InPeriod: true}
	if len(c.def.SportTypes) > 0 && !slices.Contains(c.def.SportTypes, w.SportType) {
		v.Reason = rules.ReasonSport
		return v
	}
	r := c.def.Rules
	if r != nil && len(r.Exclude) > 0 {
		if w.Flags == nil {
			v.Reason, v.FlagsUnknown = rules.Reason(r.Exclude[0]), true
			return v
		}
		for _, x := range rules.Exclusions {
			if r.Excludes(x) && w.Flags.Has(x) {
				v.Reason = rules.Reason(x)
				return v
			}
		}
	}
	if r != nil && (w.MovingTimeSeconds < r.MinMovingTimeSeconds || w.DistanceMeters < r.MinDistanceMeters) {
		v.Reason = rules.ReasonBelowMinimum
		return v
	}
	v.Counted, v.Units = true, Units(c.def.Metric, w)
	return v
}

// Units is what w adds to a milestone of metric m when it counts, in the
// projection's integer units.
func Units(m model.Metric, w model.Workout) int64 {
	if s, ok := model.MetricSpecs[m]; ok {
		return m.Units(s.Of(w))
	}
	return 0
}

// fingerprintVersion names the verdicts' and the week sums' shape: move it
// when Judge or Units changes what they give (stored sums then go unused
// until a projection of the whole period writes them again).
const fingerprintVersion = "v2"

// Fingerprint names everything that decides which workouts count towards
// the definition and by how much: its metric, sport types (as a set),
// period and rules. Week sums counted under another fingerprint are not
// used.
func (c Counter) Fingerprint() string {
	sports := slices.Clone(c.def.SportTypes)
	slices.Sort(sports)
	w := c.def.Window()
	to := ""
	if w.To != nil {
		to = w.To.UTC().Format(time.RFC3339Nano)
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%s|%s|%s|%s|%s|%s|%s", fingerprintVersion, c.def.Metric, strings.Join(sports, ","),
		w.From.UTC().Format(time.RFC3339Nano), to, c.def.PeriodStartDate, c.def.PeriodEndDate, c.def.Rules.Key())
	return strconv.FormatUint(h.Sum64(), 36)
}

// SameDefinition reports whether two milestone definitions project the
// same way and read the same: sport types and exclusions compare as sets,
// times as instants.
func SameDefinition(a, b model.MilestoneDefinition) bool {
	sa, sb := slices.Clone(a.SportTypes), slices.Clone(b.SportTypes)
	slices.Sort(sa)
	slices.Sort(sb)
	endEqual := (a.PeriodEndAtUtc == nil) == (b.PeriodEndAtUtc == nil) &&
		(a.PeriodEndAtUtc == nil || a.PeriodEndAtUtc.Equal(*b.PeriodEndAtUtc))
	return a.ModelID == b.ModelID && a.Title == b.Title && a.Metric == b.Metric && a.Target == b.Target &&
		slices.Equal(sa, sb) && a.PeriodStartAtUtc.Equal(b.PeriodStartAtUtc) && endEqual && a.PartCount == b.PartCount &&
		a.PeriodStartDate == b.PeriodStartDate && a.PeriodEndDate == b.PeriodEndDate &&
		rules.Same(a.Rules, b.Rules) && (a.Streak == nil) == (b.Streak == nil) && (a.Streak == nil || *a.Streak == *b.Streak)
}

// LogFields are the workout attributes Judge reads beyond the workout's
// identity: the sport type, each metric's attribute, the start, the
// tombstone mark, and what rules read (Strava's flags, the elapsed time
// kept beside the moving time). The store's log projection and LSI1's
// projected attributes are built from it: a rule that reads a new
// attribute adds it here, and the table's index follows (a migration: an
// LSI is fixed at table creation).
var LogFields = []string{"sportType", "distanceMeters", "totalElevationGain", "movingTimeSeconds", "elapsedTimeSeconds",
	"startDateUtc", "isDeleted", "flags"}

// Differs reports whether fresh (normalized from Strava now) differs from
// stored in anything Judge reads: sport type, each metric's value, start
// instant or local day, elapsed time, or Strava's flags (a stored workout
// without flags differs from any fresh one, so a re-read brings them over).
// The name is not compared: the log does not hold it, and Strava pushes an
// update event for every title change. Sync jobs write only workouts that
// differ, so an unchanged activity costs no write and triggers no
// projection.
func Differs(stored, fresh *model.Workout) bool {
	if stored.SportType != fresh.SportType || !stored.StartDateUtc.Equal(fresh.StartDateUtc) ||
		localDayDiffers(stored, fresh) || stored.ElapsedTimeSeconds != fresh.ElapsedTimeSeconds {
		return true
	}
	if (stored.Flags == nil) != (fresh.Flags == nil) || (stored.Flags != nil && *stored.Flags != *fresh.Flags) {
		return true
	}
	for _, s := range model.MetricSpecs {
		if s.Of(*stored) != s.Of(*fresh) {
			return true
		}
	}
	return false
}

// localDayDiffers reports whether Strava now gives a local day the stored
// workout does not carry (in its date key, which a log read holds): a
// workout stored before local starts were kept is filled by the next list
// page that shows it, within the sync share.
func localDayDiffers(stored, fresh *model.Workout) bool {
	day, ok := calendar.LocalDay(fresh.StartDateLocal)
	if !ok {
		return false
	}
	have, ok := keys.WorkoutLocalDay(stored.DateSK)
	return !ok || have != day
}
