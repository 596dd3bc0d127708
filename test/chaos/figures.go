package chaos

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// EventAwardMinted is the audit event type every award must have (the
// projector's consumer.EventAwardMinted, repeated here so the suite reads
// the audit table as an outsider does).
const EventAwardMinted = "AWARD_MINTED"

// Figures are what one scenario measured after the pipeline settled.
type Figures struct {
	Scenario string
	// Accepted counts webhook events acknowledged with 200 (accepted or
	// duplicate: for Strava both end its redelivery); Duplicates counts the
	// answers that said "duplicate"; Refused counts events never answered
	// 200 (Strava gave up after its attempts, or a forged one-shot).
	Accepted, Duplicates, Refused int
	// Written counts the activities owed a workout — an event of theirs
	// was acknowledged, or Strava's sender sent one (it stops after 3
	// attempts, so a refusal is a loss too) — whose workout item exists;
	// Lost counts those without one.
	Written, Lost int
	// Unknown counts acknowledged events of activities Strava never had (a
	// forged create) that left no workout: nothing to keep, not a loss.
	Unknown int
	// DupAwards counts awards minted twice (a second AWARD_MINTED entry for
	// the same part, or an award item outside the model's parts).
	DupAwards int
	// Unaudited counts award items without an AWARD_MINTED audit entry.
	Unaudited int
	// DriftLog counts stored milestone values that differ from a recompute
	// from the stored workout log (what `make verify` reports).
	DriftLog int
	// DriftStrava counts stored workouts that differ from Strava's current
	// activity in a field the projection reads (deleted at Strava: the
	// workout must be isDeleted).
	DriftStrava int
	// Lifecycle counts lifecycle promises broken (the scenario): a
	// forged or late event that destroyed or disconnected, a confirmed
	// deauthorization that did not schedule the data for deletion, a
	// reconnect that made a new user or kept the schedule, anything left
	// of a deleted account.
	Lifecycle int
	// Parked counts worker jobs parked for an operator (not a failure by
	// itself: the jobs also show as lost or drift when they mattered).
	Parked int
	// Reads counts read requests Strava received in the scenario
	// (activities and list pages).
	Reads int64
	// Took is the scenario's wall time, settling included.
	Took time.Duration
	// Settled says the pipeline went quiet before the deadline (with every
	// figure at 0, or after Harness.Patience without a change).
	Settled bool
	// Missed counts a scenario's own targets it missed (the noisy
	// neighbours' latencies and reads), each explained in Notes.
	Missed int
	// Notes explain non-zero figures (a few examples each).
	Notes []string
}

// OK says whether the scenario kept the promises: nothing lost, no award
// doubled or unaudited, no drift against the log or against Strava.
func (f Figures) OK() bool {
	return f.Lost == 0 && f.DupAwards == 0 && f.Unaudited == 0 && f.DriftLog == 0 && f.DriftStrava == 0 && f.Lifecycle == 0 && f.Missed == 0
}

// String is the scenario's one line of figures.
func (f Figures) String() string {
	verdict := "ok"
	if !f.OK() {
		verdict = "FAIL"
	}
	settled := ""
	if !f.Settled {
		settled = " (deadline)"
	}
	return fmt.Sprintf("%-22s accepted=%-4d written=%-4d lost=%-3d dupAwards=%-3d unaudited=%-3d driftLog=%-3d driftStrava=%-3d lifecycle=%-2d | dupAnswers=%d refused=%d parked=%d unknown=%d missed=%d reads=%d took=%s%s %s",
		f.Scenario, f.Accepted, f.Written, f.Lost, f.DupAwards, f.Unaudited, f.DriftLog, f.DriftStrava, f.Lifecycle,
		f.Duplicates, f.Refused, f.Parked, f.Unknown, f.Missed, f.Reads, f.Took.Round(100*time.Millisecond), settled, verdict)
}

// Total sums every scenario's figures into one line named "total".
func Total(all []Figures) Figures {
	t := Figures{Scenario: "total", Settled: true}
	for _, f := range all {
		t.Accepted += f.Accepted
		t.Duplicates += f.Duplicates
		t.Refused += f.Refused
		t.Written += f.Written
		t.Lost += f.Lost
		t.DupAwards += f.DupAwards
		t.Unaudited += f.Unaudited
		t.DriftLog += f.DriftLog
		t.DriftStrava += f.DriftStrava
		t.Lifecycle += f.Lifecycle
		t.Parked += f.Parked
		t.Unknown += f.Unknown
		t.Missed += f.Missed
		t.Reads += f.Reads
		t.Took += f.Took
		t.Settled = t.Settled && f.Settled
	}
	return t
}

// StravaDrift compares a stored workout with Strava's current activity, field
// by field for what the projection reads. act nil means Strava no longer has
// the activity (deleted, or never existed): then the workout must be marked
// deleted. It returns one description per differing field (none: in sync).
func StravaDrift(act *stravasim.Activity, w model.Workout) []string {
	if act == nil {
		if !w.IsDeleted {
			return []string{"isDeleted: stored=false strava=deleted"}
		}
		return nil
	}
	var out []string
	diff := func(field string, stored, strava any) {
		if fmt.Sprint(stored) != fmt.Sprint(strava) {
			out = append(out, fmt.Sprintf("%s: stored=%v strava=%v", field, stored, strava))
		}
	}
	// The projection sums millimetres: compare metres at that resolution.
	metres := func(field string, stored, strava float64) {
		if mm(stored) != mm(strava) {
			out = append(out, fmt.Sprintf("%s: stored=%v strava=%v", field, stored, strava))
		}
	}
	diff("isDeleted", w.IsDeleted, false)
	diff("sportType", w.SportType, act.SportType)
	metres("distanceMeters", w.DistanceMeters, act.Distance)
	metres("totalElevationGain", w.TotalElevationGain, act.TotalElevationGain)
	diff("movingTimeSeconds", w.MovingTimeSeconds, act.MovingTime)
	diff("startDateUtc", w.StartDateUtc.UTC().Format(time.RFC3339), act.StartDate.UTC().Format(time.RFC3339))
	return out
}

func mm(m float64) int64 { return int64(math.Round(m * 1000)) }

// AwardRef names one minted part of one milestone, or of one period of a
// series (PeriodOf, its first day).
type AwardRef struct {
	MilestoneID string
	PeriodOf    string
	PartIndex   int
}

// String names the part as "milestoneId/part i", or
// "milestoneId.period/part i".
func (a AwardRef) String() string {
	owner := a.MilestoneID
	if a.PeriodOf != "" {
		owner += "." + a.PeriodOf
	}
	return owner + "/part " + strconv.Itoa(a.PartIndex)
}

// AwardAudit checks one user's award items against the AWARD_MINTED entries
// of the audit table: unaudited lists award items without an entry; doubled
// lists parts audited as minted more than once and award items outside
// [0, partCount) of their milestone (partCount by milestone id; a milestone
// missing from it is not range-checked).
func AwardAudit(awards []AwardRef, partCount map[string]int, audits []model.AuditEntry) (unaudited, doubled []AwardRef) {
	minted := map[AwardRef]int{}
	for _, a := range audits {
		if a.EventType != EventAwardMinted {
			continue
		}
		i, err := strconv.Atoi(a.Details["partIndex"])
		if err != nil {
			continue
		}
		minted[AwardRef{MilestoneID: a.Details["milestoneId"], PeriodOf: a.Details["periodOf"], PartIndex: i}]++
	}
	for _, a := range awards {
		if minted[a] == 0 {
			unaudited = append(unaudited, a)
		}
		if n, ok := partCount[a.MilestoneID]; ok && (a.PartIndex < 0 || a.PartIndex >= n) {
			doubled = append(doubled, a)
		}
	}
	for ref, n := range minted {
		if n > 1 {
			for range n - 1 {
				doubled = append(doubled, ref)
			}
		}
	}
	sortRefs(unaudited)
	sortRefs(doubled)
	return unaudited, doubled
}

func sortRefs(rs []AwardRef) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].MilestoneID != rs[j].MilestoneID {
			return rs[i].MilestoneID < rs[j].MilestoneID
		}
		if rs[i].PeriodOf != rs[j].PeriodOf {
			return rs[i].PeriodOf < rs[j].PeriodOf
		}
		return rs[i].PartIndex < rs[j].PartIndex
	})
}

// note keeps at most a few examples per kind of problem.
type notes struct {
	per  map[string]int
	list []string
}

func (n *notes) add(kind, format string, args ...any) {
	if n.per == nil {
		n.per = map[string]int{}
	}
	n.per[kind]++
	if n.per[kind] <= 3 {
		n.list = append(n.list, kind+": "+fmt.Sprintf(format, args...))
	}
}

func (n *notes) String() string { return strings.Join(n.list, "; ") }
