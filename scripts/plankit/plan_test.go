package plankit

import (
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
)

// small is a hand-checkable setting: no edits, deletes, connects or
// deauthorizations, no budget reserve, a token living a day, one price.
func small(n int) Assumptions {
	a := Defaults(n)
	a.ActivitiesPerDay, a.PushedEdits, a.Deletes, a.UnpushedEdits = 0.5, 0, 0, 0
	a.ConnectsPerDay, a.DeauthsPerDay, a.MilestoneShare, a.PeakFactor = 0, 0, 0.5, 9.6
	a.ReconcileInterval, a.SlowInterval, a.ReconcileDays = 24*time.Hour, 24*time.Hour, 10
	a.TokenTTL, a.BudgetReserve, a.BudgetShare = 24*time.Hour, 0, 0.5
	a.Limits = Limits{ReadShort: 5, ReadDaily: 100, Short: 5, Daily: 100}
	a.API, a.Worker, a.SyncPage, a.Projector, a.Sweeper = Function{1024, 1000}, Function{1024, 2000}, Function{2048, 1000}, Function{1024, 500}, Function{}
	a.RecordsPerBatch, a.SweeperPerDay, a.LogBytesPerInvocation, a.StorageKBPerAthlete = 1, 0, 0, 0
	a.BurstShare = 0                                   // a fetch per create; TestBurstsAreServedByListPages counts bursts
	a.Prices = Prices{WriteRequestUnitPerMillion: 1e6} // $1 per write unit, nothing else
	return a
}

// measured are round per-unit costs (not a measurement: the arithmetic's input).
var measured = Measured{
	Create:            Stages{API: Cost{1, 0, 2}, Worker: Cost{4, 1, 5}, Projector: Cost{4, 2, 3}}, // 9 req, 3 RCU, 10 WCU
	CreateNoMilestone: Stages{API: Cost{1, 0, 2}, Worker: Cost{4, 1, 2}},                           // 5 req, 1 RCU, 4 WCU
	Update:            Stages{API: Cost{1, 0, 2}, Worker: Cost{5, 2, 5}, Projector: Cost{4, 2, 2}},
	Delete:            Stages{API: Cost{1, 0, 2}, Worker: Cost{5, 2, 5}, Projector: Cost{4, 2, 2}},
	Deauth:            Stages{Worker: Cost{100, 10, 100}}, DeauthWorkouts: 100,
	BackfillPage: Stages{Worker: Cost{200, 100, 200}}, BackfillActivities: 100,
	ReconcilePage: Stages{API: Cost{1, 0, 1}, Worker: Cost{2, 1, 1}}, // 3 req, 1 RCU, 2 WCU
}

// w7 is the webhook reads of 1050 athletes at ln2/7 activities a day.
const w7 = 1050 * math.Ln2 / 7

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want)) }

// TestComputeSmall checks the arithmetic on cases worked by hand.
func TestComputeSmall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Assumptions)
		// Reads per day by class, reconciles, the limits needed, the verdict,
		// write units per day, the month's USD (writes only, $1 each).
		webhook, backfill, reconcile, confirm, refresh, reconciles float64
		needDaily, needShort                                       int
		fits                                                       bool
		wcu, usd, apiGBs                                           float64
	}{
		{
			// 100 athletes, 0.5 activities/day: 50 webhook reads. Slot = slow
			// = 1 day: the 50 milestone athletes reconcile daily, one page
			// (10 days × 0.5 = 5 activities): 50 reads. r = 1 read per
			// athlete-day, a token lives a day: 100/(1+1) = 50 refreshes.
			// Daily need max(100/1, 50/0.5) = 100; peak 50/96 × 9.6 = 5.
			// WCU: 50 creates × (10+4)/2 + 50 pages × 2 = 450/day, 13500 a month.
			// api: 50 requests × 1 GB × 1 s.
			name: "daily slots", change: func(*Assumptions) {},
			webhook: 50, reconcile: 50, refresh: 50, reconciles: 50,
			needDaily: 100, needShort: 5, fits: true, wcu: 450, usd: 13500, apiGBs: 50,
		},
		{
			name: "limits one short", change: func(a *Assumptions) { a.Limits.ReadShort, a.Limits.Short = 4, 4 },
			webhook: 50, reconcile: 50, refresh: 50, reconciles: 50,
			needDaily: 100, needShort: 5, fits: false, wcu: 450, usd: 13500, apiGBs: 50,
		},
		{
			// Events at ln2/7 a day: P(active within 7 days) = 1/2. An idle
			// athlete is reconciled at the last slot before the 28-day bound,
			// the third: mean gap (1 − 1/8)/(1/2) = 1.75 slots = 12.25 days;
			// 1050 athletes all with milestones: 85.7 reconciles.
			name: "weekly slots, half active", change: func(a *Assumptions) {
				a.Athletes, a.ActivitiesPerDay, a.MilestoneShare = 1050, math.Ln2/7, 1
				a.ReconcileInterval, a.SlowInterval = 7*24*time.Hour, 28*24*time.Hour
				a.Limits = Limits{ReadShort: 1000, ReadDaily: 1000, Short: 1000, Daily: 1000}
			},
			webhook: w7, reconcile: 1050 / 12.25, reconciles: 1050 / 12.25,
			refresh:   1050 / (1 + 1050/(w7+1050/12.25)),
			needDaily: 190, needShort: 11, fits: true, // ⌈103.97 + 85.71⌉, ⌈103.97/96 × 9.6⌉
			wcu: w7*10 + 1050/12.25*2, usd: (w7*10 + 1050/12.25*2) * 30, apiGBs: w7,
		},
		{
			// Connects backfill 400 activities (2 pages of 200; units scaled
			// from the 100-activity measured page: ×4); deauthorizations one
			// confirmation read and the 100-workout measurement ×4; deletes
			// one confirmation read each.
			name: "connects, deauths and deletes", change: func(a *Assumptions) {
				a.ConnectsPerDay, a.DeauthsPerDay, a.Deletes, a.HistoryDays = 0.01, 0.01, 0.1, 800
				a.Limits = Limits{ReadShort: 1000, ReadDaily: 1000, Short: 1000, Daily: 1000}
			},
			webhook: 50, backfill: 2, reconcile: 50, confirm: 5 + 1, reconciles: 50,
			refresh:   100 / (1 + 100/108.0),
			needDaily: 108, needShort: 6, fits: true,
			// creates 350 + reconcile 100 + deletes 5×9 + deauth 1×400 + backfill 1×800
			wcu: 350 + 100 + 45 + 400 + 800, usd: (350 + 100 + 45 + 400 + 800) * 30, apiGBs: 50 + 5 + 1 + 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := small(100)
			tc.change(&a)
			if err := a.Validate(); err != nil {
				t.Fatal(err)
			}
			p := Compute(a, measured)
			for _, c := range []struct {
				what      string
				got, want float64
			}{
				{"webhook reads", p.Reads.Webhook, tc.webhook}, {"backfill reads", p.Reads.Backfill, tc.backfill},
				{"reconcile reads", p.Reads.Reconcile, tc.reconcile}, {"confirm reads", p.Reads.Confirm, tc.confirm},
				{"refreshes", p.Reads.Refresh, tc.refresh}, {"reconciles", p.Reconciles, tc.reconciles},
				{"reads per day", p.ReadsPerDay, tc.webhook + tc.backfill + tc.reconcile + tc.confirm},
				{"need daily", float64(p.NeedReadDaily), float64(tc.needDaily)}, {"need 15 min", float64(p.NeedReadShort), float64(tc.needShort)},
				{"WCU per day", p.Dynamo.WCU, tc.wcu}, {"USD per month", p.USDMonth, tc.usd},
				{"USD per athlete-month", p.USDPerAthlete, tc.usd / float64(a.Athletes)}, {"api GB-s", p.Lambdas[0].GBs, tc.apiGBs},
			} {
				if !near(c.got, c.want) {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
			if p.Fits() != tc.fits {
				t.Errorf("fits = %v, want %v (daily %v, 15 min %v, overall %v)", p.Fits(), tc.fits, p.FitsDaily, p.FitsShort, p.FitsOverall)
			}
		})
	}
}

// TestRefreshesInBudget: counted refreshes enter the total and the peak.
func TestRefreshesInBudget(t *testing.T) {
	a := small(100)
	a.RefreshesInBudget = true
	p := Compute(a, measured)
	if !near(p.ReadsPerDay, 150) || p.NeedReadShort != 10 {
		t.Errorf("reads %v, need 15 min %d; want 150 and 10 (50 webhook + 50 refresh urgent reads: 100/96 × 9.6)", p.ReadsPerDay, p.NeedReadShort)
	}
}

// lastLine is the summary format.
var lastLine = regexp.MustCompile(`^capacity: athletes=\d+ reads_per_day=\d+ webhook_reads=\d+ reconcile_reads=\d+ fits=(yes|no) usd_per_athlete_month=\d+\.\d+$`)

// TestDefaultsMillion runs the model on its documented defaults at a
// million athletes (the measured units are fixed here): reconciliation
// stays within the read targets, the targets are printed, and the
// output ends with the summary line.
func TestDefaultsMillion(t *testing.T) {
	a := Defaults(1_000_000)
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	p := Compute(a, measured)
	if r := p.Reads.Reconcile / p.Reads.Webhook; r > 0.20 {
		t.Errorf("reconciliation reads are %.1f%% of webhook reads, want ≤ 20%%", 100*r)
	}
	if r := p.ReadsPerDay / 1e6; r > 1.3 {
		t.Errorf("%.3f Strava reads per athlete-day, want ≤ 1.3", r)
	}
	if p.Fits() {
		t.Error("a million athletes fit Strava's default limits: the fit check is broken")
	}
	var b strings.Builder
	p.Print(&b)
	out := strings.TrimSuffix(b.String(), "\n")
	lines := strings.Split(out, "\n")
	if last := lines[len(lines)-1]; !lastLine.MatchString(last) {
		t.Errorf("last line %q does not match %s", last, lastLine)
	}
	for _, want := range []string{"reconciliation reads / webhook reads", "Strava reads per athlete-day", "USD per athlete-month",
		"token refreshes (/oauth/token)", "us-east-1", "DynamoDB Local's ConsumedCapacity"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Assumptions)
	}{
		{"no athletes", func(a *Assumptions) { a.Athletes = 0 }},
		{"negative activities", func(a *Assumptions) { a.ActivitiesPerDay = -1 }},
		{"share above one", func(a *Assumptions) { a.MilestoneShare = 1.5 }},
		{"slow below slot", func(a *Assumptions) { a.SlowInterval = time.Hour }},
		{"no sync share", func(a *Assumptions) { a.BudgetShare = 0 }},
		{"zero limit", func(a *Assumptions) { a.Limits.ReadDaily = 0 }},
	} {
		a := Defaults(10)
		tc.change(&a)
		if a.Validate() == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if err := Defaults(10).Validate(); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}

// TestBurstsAreServedByListPages: creates in bursts cost their first fetches
// and list pages, not a fetch each.
func TestBurstsAreServedByListPages(t *testing.T) {
	a := small(100) // 50 creates a day
	a.BurstShare, a.BurstSize, a.BurstSingles, a.PageSize = 0.5, 25, 3, 200
	p := Compute(a, measured)
	// 25 alone + one burst of 25: 3 fetches and one page of 22.
	if !near(p.Bursts, 1) || !near(p.CreateReads, 25+4) || !near(p.Reads.Webhook, 29) {
		t.Errorf("bursts %v, create reads %v, webhook reads %v; want 1, 29, 29", p.Bursts, p.CreateReads, p.Reads.Webhook)
	}
}
