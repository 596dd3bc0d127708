package projections_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/projections"
	"github.com/commitcollect/backend/test/fixture"
)

var (
	march   = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	april   = time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	now     = time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)
	earlier = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
)

func run(id int64, day int, metres float64) model.Workout {
	return model.Workout{
		UserID: "u1", ActivityID: id, SportType: "Run", DistanceMeters: metres,
		TotalElevationGain: metres / 100, MovingTimeSeconds: int64(metres / 3),
		StartDateUtc: march.AddDate(0, 0, day-1).Add(7 * time.Hour), CorrelationID: "corr-" + string(rune('a'+id%26)),
	}
}

func active() model.Projection { return model.Projection{Status: model.StatusActive} }

// heldParts holds award items for parts 0..minted-1 minted at at, the first
// audited of them with their AWARD_MINTED entry.
func heldParts(minted, audited int, at time.Time) projections.Held {
	h := projections.Held{Minted: map[int]time.Time{}, Audited: map[int]bool{}}
	for i := range minted {
		h.Minted[i] = at
		if i < audited {
			h.Audited[i] = true
		}
	}
	return h
}

// mint records parts as the consumer does: each award item with its
// AWARD_MINTED entry, in one transaction.
func mint(h projections.Held, parts []int, at time.Time) projections.Held {
	if h.Minted == nil {
		h.Minted, h.Audited = map[int]time.Time{}, map[int]bool{}
	}
	for _, p := range parts {
		h.Minted[p], h.Audited[p] = at, true
	}
	return h
}

func TestProject(t *testing.T) {
	t.Parallel()
	deleted := run(4, 5, 50000)
	deleted.IsDeleted = true
	ride := run(5, 5, 50000)
	ride.SportType = "Ride"
	before := run(6, 1, 50000)
	before.StartDateUtc = march.Add(-time.Second)
	atEnd := run(7, 1, 50000)
	atEnd.StartDateUtc = april
	atStart := run(8, 1, 1000)
	atStart.StartDateUtc = march
	tests := []struct {
		name       string
		def        func(*model.MilestoneDefinition)
		cur        model.Projection
		held       projections.Held
		log        projections.Log
		wantValue  int64
		wantCount  int
		wantAward  int
		wantNew    []int
		wantStat   model.MilestoneStatus
		wantTrunc  bool
		wantTips   []int64 // activity that tipped each earned part
		wantUnjust []int
	}{
		{
			name: "25+30+50 km earns every part once, tipped in start order",
			log:  projections.Log{Workouts: []model.Workout{run(3, 3, 50000), run(1, 1, 25000), run(2, 2, 30000)}},
			cur:  active(), wantValue: 105000000, wantCount: 3, wantAward: 10,
			wantNew: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, wantStat: model.StatusCompleted,
			wantTips: []int64{1, 1, 2, 2, 2, 3, 3, 3, 3, 3},
		},
		{
			name: "deleted, wrong sport, before start and at end do not count; start is inclusive",
			log:  projections.Log{Workouts: []model.Workout{deleted, ride, before, atEnd, atStart}},
			cur:  active(), wantValue: 1000000, wantCount: 1, wantStat: model.StatusActive,
		},
		{
			name: "exact threshold earns the part",
			log:  projections.Log{Workouts: []model.Workout{run(1, 1, 10000)}},
			cur:  active(), wantValue: 10000000, wantCount: 1, wantAward: 1, wantNew: []int{0}, wantStat: model.StatusActive,
			wantTips: []int64{1},
		},
		{
			name: "one millimetre short does not",
			log:  projections.Log{Workouts: []model.Workout{run(1, 1, 9999.999)}},
			cur:  active(), wantValue: 9999999, wantCount: 1, wantStat: model.StatusActive,
		},
		{
			name:      "awards never go down when workouts disappear",
			log:       projections.Log{Workouts: []model.Workout{run(1, 1, 25000)}},
			cur:       model.Projection{ProgressValue: 105000000, WorkoutsCounted: 3, AwardedParts: 10, Status: model.StatusCompleted},
			held:      heldParts(10, 10, earlier),
			wantValue: 25000000, wantCount: 1, wantAward: 10, wantStat: model.StatusCompleted,
			wantTips: []int64{1, 1},
		},
		{
			name:      "a counter raised by hand is lowered to what the log earns, never completed",
			log:       projections.Log{Workouts: []model.Workout{run(1, 1, 25000)}},
			cur:       model.Projection{ProgressValue: 25000000, WorkoutsCounted: 1, AwardedParts: 10, Status: model.StatusCompleted},
			held:      heldParts(2, 2, earlier),
			wantValue: 25000000, wantCount: 1, wantAward: 2, wantStat: model.StatusActive,
			wantTips: []int64{1, 1}, wantUnjust: []int{2, 3, 4, 5, 6, 7, 8, 9},
		},
		{
			name:      "award items without their AWARD_MINTED entry justify nothing",
			log:       projections.Log{Workouts: []model.Workout{run(1, 1, 25000)}},
			cur:       model.Projection{ProgressValue: 25000000, WorkoutsCounted: 1, AwardedParts: 4, Status: model.StatusActive},
			held:      heldParts(4, 2, earlier),
			wantValue: 25000000, wantCount: 1, wantAward: 2, wantStat: model.StatusActive,
			wantTips: []int64{1, 1}, wantUnjust: []int{2, 3},
		},
		{
			name:      "an award item older than the audit retention justifies itself",
			log:       projections.Log{Workouts: []model.Workout{run(1, 1, 25000)}},
			cur:       model.Projection{ProgressValue: 25000000, WorkoutsCounted: 1, AwardedParts: 4, Status: model.StatusActive},
			held:      heldParts(4, 0, now.Add(-projections.AuditRetention)),
			wantValue: 25000000, wantCount: 1, wantAward: 4, wantStat: model.StatusActive,
			wantTips: []int64{1, 1},
		},
		{
			name:      "an unjustified part ends the run: held parts after it are not counted",
			log:       projections.Log{Workouts: []model.Workout{run(1, 1, 10000)}},
			cur:       model.Projection{ProgressValue: 10000000, WorkoutsCounted: 1, AwardedParts: 3, Status: model.StatusActive},
			held:      projections.Held{Minted: map[int]time.Time{0: earlier, 2: earlier}, Audited: map[int]bool{0: true, 2: true}},
			wantValue: 10000000, wantCount: 1, wantAward: 1, wantStat: model.StatusActive,
			wantTips: []int64{1}, wantUnjust: []int{1},
		},
		{
			name: "empty sport types count every sport",
			def:  func(d *model.MilestoneDefinition) { d.SportTypes = nil },
			log:  projections.Log{Workouts: []model.Workout{ride}},
			cur:  active(), wantValue: 50000000, wantCount: 1, wantAward: 5, wantNew: []int{0, 1, 2, 3, 4}, wantStat: model.StatusActive,
			wantTips: []int64{5, 5, 5, 5, 5},
		},
		{
			name: "count metric",
			def:  func(d *model.MilestoneDefinition) { d.Metric, d.Target, d.PartCount = model.MetricCount, 3, 3 },
			log:  projections.Log{Workouts: []model.Workout{run(1, 1, 1), run(2, 2, 1)}},
			cur:  active(), wantValue: 2, wantCount: 2, wantAward: 2, wantNew: []int{0, 1}, wantStat: model.StatusActive,
			wantTips: []int64{1, 2},
		},
		{
			name: "moving time in seconds, open-ended period",
			def: func(d *model.MilestoneDefinition) {
				d.Metric, d.Target, d.PartCount, d.PeriodEndAtUtc = model.MetricMovingTime, 3600, 2, nil
			},
			log: projections.Log{Workouts: []model.Workout{run(1, 1, 5400), run(2, 200, 5400)}},
			cur: active(), wantValue: 3600, wantCount: 2, wantAward: 2, wantNew: []int{0, 1}, wantStat: model.StatusCompleted,
			wantTips: []int64{1, 2},
		},
		{
			name: "elevation rounds metres to millimetres",
			def:  func(d *model.MilestoneDefinition) { d.Metric, d.Target, d.PartCount = model.MetricElevation, 1, 1 },
			log:  projections.Log{Workouts: []model.Workout{run(1, 1, 99.9996)}},
			cur:  active(), wantValue: 1000, wantCount: 1, wantAward: 1, wantNew: []int{0}, wantStat: model.StatusCompleted,
			wantTips: []int64{1},
		},
		{
			name: "truncated log says so",
			log:  projections.Log{Workouts: []model.Workout{run(1, 1, 1000)}, Truncated: true},
			cur:  active(), wantValue: 1000000, wantCount: 1, wantStat: model.StatusActive, wantTrunc: true,
		},
		{
			name: "huge values saturate instead of overflowing",
			def:  func(d *model.MilestoneDefinition) { d.PartCount = 99 },
			log:  projections.Log{Workouts: []model.Workout{run(1, 1, 1e300), run(2, 2, math.Inf(1)), run(3, 3, math.NaN())}},
			cur:  active(), wantValue: math.MaxInt64, wantCount: 3, wantAward: 99, wantStat: model.StatusCompleted,
			wantNew: seq(99), wantTips: repeat(1, 99),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := fixture.Definition()
			if tt.def != nil {
				tt.def(&d)
			}
			got, err := projections.ProjectWith(d, tt.cur, tt.held, tt.log, now)
			if err != nil {
				t.Fatalf("Project: %v", err)
			}
			if !reflect.DeepEqual(got.Unjustified, tt.wantUnjust) {
				t.Errorf("unjustified: got %v, want %v", got.Unjustified, tt.wantUnjust)
			}
			p := got.Projection
			if p.ProgressValue != tt.wantValue || p.WorkoutsCounted != tt.wantCount || p.AwardedParts != tt.wantAward ||
				p.Status != tt.wantStat || p.Truncated != tt.wantTrunc {
				t.Errorf("projection: got value %d counted %d awarded %d status %s truncated %v, want %d %d %d %s %v",
					p.ProgressValue, p.WorkoutsCounted, p.AwardedParts, p.Status, p.Truncated,
					tt.wantValue, tt.wantCount, tt.wantAward, tt.wantStat, tt.wantTrunc)
			}
			if !reflect.DeepEqual(got.NewParts, tt.wantNew) {
				t.Errorf("new parts: got %v, want %v", got.NewParts, tt.wantNew)
			}
			var tips []int64
			for i, c := range got.Crossings {
				if c.PartIndex != i {
					t.Errorf("crossing %d names part %d", i, c.PartIndex)
				}
				tips = append(tips, c.ActivityID)
			}
			if !reflect.DeepEqual(tips, tt.wantTips) {
				t.Errorf("tipping activities: got %v, want %v", tips, tt.wantTips)
			}
			if got.Changed != (p.ProgressValue != tt.cur.ProgressValue || p.AwardedParts != tt.cur.AwardedParts ||
				p.WorkoutsCounted != tt.cur.WorkoutsCounted || p.Status != tt.cur.Status || p.Truncated != tt.cur.Truncated ||
				(p.Weeks != nil) != (tt.cur.Weeks != nil)) {
				t.Errorf("changed: got %v for %+v from %+v", got.Changed, p, tt.cur)
			}
			if got.Changed && (p.ProjectedAtUtc == nil || !p.ProjectedAtUtc.Equal(now)) {
				t.Errorf("projectedAtUtc: got %v, want %v", p.ProjectedAtUtc, now)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func repeat(id int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = id
	}
	return out
}

func TestProjectRejectsBadDefinitions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given func(*model.MilestoneDefinition)
	}{
		{"zero target", func(d *model.MilestoneDefinition) { d.Target = 0 }},
		{"NaN target", func(d *model.MilestoneDefinition) { d.Target = math.NaN() }},
		{"target below a millimetre", func(d *model.MilestoneDefinition) { d.Target = 0.0001 }},
		{"count rounding to zero", func(d *model.MilestoneDefinition) { d.Metric, d.Target = model.MetricCount, 0.4 }},
		{"no parts", func(d *model.MilestoneDefinition) { d.PartCount = 0 }},
		{"too many parts", func(d *model.MilestoneDefinition) { d.PartCount = model.MaxPartCount + 1 }},
		{"unknown metric", func(d *model.MilestoneDefinition) { d.Metric = "calories" }},
		{"end before start", func(d *model.MilestoneDefinition) { e := march; d.PeriodEndAtUtc = &e }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := fixture.Definition()
			tt.given(&d)
			_, err := project(d, active(), projections.Log{}, now)
			var ve *model.ValidationError
			if !errors.Is(err, model.ErrInvalid) || !errors.As(err, &ve) {
				t.Fatalf("got %v, want a *model.ValidationError", err)
			}
		})
	}
}

func TestEarnedParts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		value, target, want int64
		parts               int
	}{
		{"nothing", 0, 100, 0, 10},
		{"just below first", 9, 100, 0, 10},
		{"exactly first", 10, 100, 1, 10},
		{"exactly all", 100, 100, 10, 10},
		{"beyond all", 1000, 100, 10, 10},
		{"thirds: 1/3 of 100 is not reached by 33", 33, 100, 0, 3},
		{"thirds: 34 reaches it", 34, 100, 1, 3},
		{"no 64-bit overflow", math.MaxInt64, math.MaxInt64, 99, 99},
		{"no 64-bit overflow, one short", math.MaxInt64 - 1, math.MaxInt64, 98, 99},
		{"tiny target", math.MaxInt64, 1, 99, 99},
		{"bad target", 10, 0, 0, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := projections.EarnedParts(tt.value, tt.target, tt.parts); int64(got) != tt.want {
				t.Errorf("EarnedParts(%d, %d, %d): got %d, want %d", tt.value, tt.target, tt.parts, got, tt.want)
			}
		})
	}
}

// TestEarnedPartsMatchesDefinition checks the closed form against the
// definition "part i is earned when value*partCount >= target*(i+1)",
// evaluated with exact arithmetic on small numbers.
func TestEarnedPartsMatchesDefinition(t *testing.T) {
	t.Parallel()
	for parts := 1; parts <= 12; parts++ {
		for target := int64(1); target <= 40; target++ {
			for value := int64(0); value <= 50; value++ {
				want := 0
				for i := 0; i < parts; i++ {
					if value*int64(parts) >= target*int64(i+1) {
						want++
					}
				}
				if got := projections.EarnedParts(value, target, parts); got != want {
					t.Fatalf("EarnedParts(%d, %d, %d): got %d, want %d", value, target, parts, got, want)
				}
			}
		}
	}
}

func randomLog(r *rand.Rand, n int) []model.Workout {
	sports := []string{"Run", "Ride", "Walk"}
	ws := make([]model.Workout, n)
	for i := range ws {
		w := run(int64(i+1), 1+r.IntN(40), float64(r.IntN(30000))+r.Float64())
		w.SportType = sports[r.IntN(len(sports))]
		w.IsDeleted = r.IntN(8) == 0
		if r.IntN(3) == 0 { // share start times so the id tie-break matters
			w.StartDateUtc = march.Add(time.Duration(r.IntN(3)) * time.Hour)
		}
		ws[i] = w
	}
	return ws
}

func randomDef(r *rand.Rand) model.MilestoneDefinition {
	d := fixture.Definition()
	d.Metric = []model.Metric{model.MetricDistance, model.MetricElevation, model.MetricMovingTime, model.MetricCount}[r.IntN(4)]
	d.Target = float64(1 + r.IntN(200000))
	if d.Metric == model.MetricCount {
		d.Target = float64(1 + r.IntN(20))
	}
	d.PartCount = 1 + r.IntN(model.MaxPartCount)
	if r.IntN(2) == 0 {
		d.SportTypes = nil
	}
	return d
}

func TestPropertyPermutationInvariant(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 300; trial++ {
		d, ws := randomDef(r), randomLog(r, r.IntN(60))
		want, err := project(d, active(), projections.Log{Workouts: ws}, now)
		if err != nil {
			t.Fatal(err)
		}
		shuffled := append([]model.Workout(nil), ws...)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got, err := project(d, active(), projections.Log{Workouts: shuffled}, now)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("trial %d: permuted log gave %+v, want %+v", trial, got, want)
		}
	}
}

func TestPropertyIdempotent(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 300; trial++ {
		d, log := randomDef(r), projections.Log{Workouts: randomLog(r, r.IntN(60))}
		first, err := project(d, active(), log, earlier)
		if err != nil {
			t.Fatal(err)
		}
		second, err := project(d, first.Projection, log, now)
		if err != nil {
			t.Fatal(err)
		}
		if second.Changed || len(second.NewParts) > 0 || second.Completed || !reflect.DeepEqual(second.Projection, first.Projection) {
			t.Fatalf("trial %d: second application changed %+v into %+v (new parts %v)", trial, first.Projection, second.Projection, second.NewParts)
		}
	}
}

func TestPropertyRemovingWorkoutsNeverRemovesAwards(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 300; trial++ {
		d, ws := randomDef(r), randomLog(r, 1+r.IntN(60))
		cur, err := project(d, active(), projections.Log{Workouts: ws}, earlier)
		if err != nil {
			t.Fatal(err)
		}
		state, held := cur.Projection, mint(projections.Held{}, cur.NewParts, earlier)
		for len(ws) > 0 {
			i := r.IntN(len(ws))
			if r.IntN(2) == 0 {
				ws = append(ws[:i:i], ws[i+1:]...) // removed from the log
			} else {
				ws = append([]model.Workout(nil), ws...)
				ws[i].IsDeleted = true // marked deleted
				if r.IntN(4) == 0 {
					ws = append(ws[:i:i], ws[i+1:]...)
				}
			}
			next, err := projections.ProjectWith(d, state, held, projections.Log{Workouts: ws}, now)
			if err != nil {
				t.Fatal(err)
			}
			if next.Projection.AwardedParts < state.AwardedParts || next.Projection.ProgressValue > state.ProgressValue ||
				(state.Status == model.StatusCompleted && next.Projection.Status != model.StatusCompleted) || len(next.NewParts) != 0 {
				t.Fatalf("trial %d: removal took %+v to %+v (new parts %v)", trial, state, next.Projection, next.NewParts)
			}
			state = next.Projection
		}
	}
}

func TestPropertyAwardsFollowThreshold(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 300; trial++ {
		d, ws := randomDef(r), randomLog(r, r.IntN(60))
		got, err := project(d, active(), projections.Log{Workouts: ws}, now)
		if err != nil {
			t.Fatal(err)
		}
		value, target := got.Projection.ProgressValue, d.TargetUnits()
		for i := 0; i < d.PartCount; i++ {
			earned := float64(value)*float64(d.PartCount) >= float64(target)*float64(i+1)
			if earned != (i < got.Projection.AwardedParts) {
				t.Fatalf("trial %d: part %d earned=%v but awarded %d (value %d target %d parts %d)",
					trial, i, earned, got.Projection.AwardedParts, value, target, d.PartCount)
			}
		}
		if (got.Projection.AwardedParts == d.PartCount) != (got.Projection.Status == model.StatusCompleted) {
			t.Fatalf("trial %d: awarded %d of %d with status %s", trial, got.Projection.AwardedParts, d.PartCount, got.Projection.Status)
		}
	}
}

// TestPropertyNeverAwardsPastJustified: whatever the stored counter and
// status say, awardedParts is exactly the longest run of parts each earned by
// the log or held with proof (award item plus AWARD_MINTED entry, or an item
// older than the audit retention); a raised counter or status changes
// nothing; completed means every part is justified; every claimed part left
// out is listed as unjustified.
func TestPropertyNeverAwardsPastJustified(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(13, 14))
	for trial := 0; trial < 500; trial++ {
		d, ws := randomDef(r), randomLog(r, r.IntN(60))
		held := projections.Held{Minted: map[int]time.Time{}, Audited: map[int]bool{}}
		for i := range d.PartCount {
			if r.IntN(2) == 0 {
				held.Minted[i] = now.Add(-time.Duration(r.IntN(2*model.AuditRetentionDays)) * 24 * time.Hour)
			}
			if r.IntN(2) == 0 {
				held.Audited[i] = true // an entry without its item (item deleted by hand) proves nothing alone
			}
		}
		cur := model.Projection{AwardedParts: r.IntN(d.PartCount + 5), Status: model.StatusActive}
		if r.IntN(2) == 0 {
			cur.Status = model.StatusCompleted
		}
		log := projections.Log{Workouts: ws}
		got, err := projections.ProjectWith(d, cur, held, log, now)
		if err != nil {
			t.Fatal(err)
		}
		n := got.Projection.AwardedParts
		justified := func(i int) bool {
			at, minted := held.Minted[i]
			return i < got.Earned || (minted && (held.Audited[i] || now.Sub(at) >= projections.AuditRetention))
		}
		for i := range n {
			if !justified(i) {
				t.Fatalf("trial %d: part %d awarded (awardedParts %d) but neither earned (%d) nor held with proof", trial, i, n, got.Earned)
			}
		}
		if n < d.PartCount && justified(n) {
			t.Fatalf("trial %d: awardedParts %d stops before justified part %d", trial, n, n)
		}
		if (n == d.PartCount) != (got.Projection.Status == model.StatusCompleted) {
			t.Fatalf("trial %d: awarded %d of %d with status %s", trial, n, d.PartCount, got.Projection.Status)
		}
		for _, i := range got.Unjustified {
			_, minted := held.Minted[i]
			if i < n || justified(i) || (i >= cur.AwardedParts && !minted) {
				t.Fatalf("trial %d: part %d listed unjustified (awarded %d, counter %d, minted %v)", trial, i, n, cur.AwardedParts, minted)
			}
		}
		for i := n; i < min(cur.AwardedParts, d.PartCount); i++ {
			if !justified(i) && !slices.Contains(got.Unjustified, i) {
				t.Fatalf("trial %d: counter claims part %d without proof and it is not reported (%v)", trial, i, got.Unjustified)
			}
		}
		raised := cur
		raised.AwardedParts, raised.Status = d.PartCount+r.IntN(5), model.StatusCompleted
		again, err := projections.ProjectWith(d, raised, held, log, now)
		if err != nil {
			t.Fatal(err)
		}
		if again.Projection.AwardedParts != n || again.Projection.Status != got.Projection.Status {
			t.Fatalf("trial %d: raising the counter to %d moved the projection from %d %s to %d %s", trial,
				raised.AwardedParts, n, got.Projection.Status, again.Projection.AwardedParts, again.Projection.Status)
		}
	}
}

// TestPropertyIncrementalEqualsBatch: feeding the log one workout at a time
// awards the same parts as computing it at once, and every part is minted
// exactly once along the way.
func TestPropertyIncrementalEqualsBatch(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 10))
	for trial := 0; trial < 200; trial++ {
		d, ws := randomDef(r), randomLog(r, r.IntN(40))
		all, err := project(d, active(), projections.Log{Workouts: ws}, now)
		if err != nil {
			t.Fatal(err)
		}
		state, minted := active(), map[int]int{}
		for i := range ws {
			step, err := project(d, state, projections.Log{Workouts: ws[:i+1]}, now)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range step.NewParts {
				minted[p]++
			}
			state = step.Projection
		}
		if state.AwardedParts != all.Projection.AwardedParts || state.ProgressValue != all.Projection.ProgressValue {
			t.Fatalf("trial %d: incremental %+v, batch %+v", trial, state, all.Projection)
		}
		for p, n := range minted {
			if n != 1 || p >= state.AwardedParts {
				t.Fatalf("trial %d: part %d minted %d times (awarded %d)", trial, p, n, state.AwardedParts)
			}
		}
		if len(minted) != state.AwardedParts {
			t.Fatalf("trial %d: minted %d parts, awarded %d", trial, len(minted), state.AwardedParts)
		}
	}
}

func TestProjectGuardrailKeepsNewest(t *testing.T) {
	t.Parallel()
	d := fixture.Definition()
	d.Metric, d.Target, d.PartCount, d.PeriodEndAtUtc = model.MetricCount, 5000, 1, nil
	ws := make([]model.Workout, model.MaxWorkoutsToInspect+5)
	for i := range ws {
		// Ids descend while dates ascend: the cut must follow dates.
		ws[i] = run(int64(len(ws)-i), 1, 1)
		ws[i].StartDateUtc = march.Add(time.Duration(i) * time.Minute)
	}
	ws[5].StartDateUtc = ws[4].StartDateUtc // the oldest kept shares the newest dropped's date
	got, err := project(d, active(), projections.Log{Workouts: ws}, now)
	if err != nil {
		t.Fatal(err)
	}
	p := got.Projection
	wantFrom := ws[6].StartDateUtc
	if !p.Truncated || !got.BecameTruncated || p.WorkoutsCounted != model.MaxWorkoutsToInspect-1 ||
		p.ExactFromUtc == nil || !p.ExactFromUtc.Equal(wantFrom) {
		t.Fatalf("got %+v, want truncated at %d workouts, exact from %v", p, model.MaxWorkoutsToInspect-1, wantFrom)
	}
}

func TestProjectTruncatedOnlyWherePeriodReachesTheCut(t *testing.T) {
	t.Parallel()
	cut := march.AddDate(0, 0, 10)
	log := projections.Log{Workouts: []model.Workout{run(1, 12, 1000), run(2, 15, 2000)}, Truncated: true, ExactFrom: cut}
	tests := []struct {
		name      string
		start     time.Time
		log       projections.Log
		wantTrunc bool
	}{
		{"period starts before the cut", march, log, true},
		{"period starts at the cut", cut, log, false},
		{"period starts after the cut", cut.Add(time.Hour), log, false},
		{"log not truncated", march, projections.Log{Workouts: log.Workouts}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := fixture.Definition()
			d.PeriodStartAtUtc = tt.start
			got, err := project(d, active(), tt.log, now)
			if err != nil {
				t.Fatal(err)
			}
			p := got.Projection
			if p.Truncated != tt.wantTrunc || (p.ExactFromUtc != nil) != tt.wantTrunc || p.ProgressValue != 3000000 {
				t.Fatalf("got %+v, want truncated=%v (exact from %v), value 3000000", p, tt.wantTrunc, cut)
			}
			if tt.wantTrunc && !p.ExactFromUtc.Equal(cut) {
				t.Fatalf("exactFromUtc = %v, want %v", p.ExactFromUtc, cut)
			}
		})
	}
}

func BenchmarkProject3000(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 12))
	ws := randomLog(r, model.MaxWorkoutsToInspect)
	d := fixture.Definition()
	d.SportTypes, d.PartCount = nil, 99
	for b.Loop() {
		if _, err := project(d, active(), projections.Log{Workouts: ws}, now); err != nil {
			b.Fatal(err)
		}
	}
}

// project is ProjectWith without held awards: only the log justifies awards.
func project(def model.MilestoneDefinition, cur model.Projection, log projections.Log, now time.Time) (projections.Result, error) {
	return projections.ProjectWith(def, cur, projections.Held{}, log, now)
}
