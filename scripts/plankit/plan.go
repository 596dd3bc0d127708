package plankit

import (
	"fmt"
	"math"

	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
)

// Limits are Strava's per-application budgets: reads (non-upload
// endpoints) and overall, per 15-minute window and per UTC day.
type Limits struct {
	ReadShort, ReadDaily, Short, Daily int
}

// Function is one Lambda's memory and billed duration per invocation.
type Function struct {
	MemoryMB   float64
	DurationMs float64
}

// GBs is the GB-seconds of one invocation.
func (f Function) GBs() float64 { return f.MemoryMB / 1024 * f.DurationMs / 1000 }

// Prices are the on-demand prices the cost uses, in USD.
type Prices struct {
	Region                      string
	AsOf                        string
	WriteRequestUnitPerMillion  float64
	ReadRequestUnitPerMillion   float64
	StoragePerGBMonth           float64
	LambdaGBs                   float64
	LambdaRequestsPerMillion    float64
	HTTPAPIRequestsPerMillion   float64
	LogsIngestionPerGB          float64
	KMSRequestsPer10k           float64
	StreamsReadsByLambdaPerMill float64
}

// DefaultPrices are the published on-demand prices in us-east-1:
//
// Published prices as of 2025 (DynamoDB after its November 2024 on-demand reduction), looked up on
// 2026-11-25 with the search tool (aws.amazon.com pricing pages and secondary sources quoting them); no
// free tier is subtracted:
//
//	DynamoDB on-demand       $0.625 per million write request units, $0.125 per million read request units,
//	                         $0.25 per GB-month of storage (Standard table class)
//	DynamoDB Streams         GetRecords calls made by Lambda event source mappings are free
//	Lambda (arm64)           $0.0000133334 per GB-second (first tier), $0.20 per million requests
//	API Gateway HTTP API     $1.00 per million requests (first 300 million a month)
//	CloudWatch Logs          $0.50 per GB ingested (Standard class, first tier)
//	KMS                      $0.03 per 10,000 requests: at most one GenerateDataKey per refresh (sealing the
//	                         new pair) and one Decrypt when a cold worker unseals it (model/secrets caches
//	                         data keys, so this is an upper bound)
//
// A month is 30 days. Other regions price differently; the plan uses us-east-1's.
var DefaultPrices = Prices{
	Region: "us-east-1", AsOf: "published prices as of 2025 (DynamoDB after its Nov 2024 on-demand cut); looked up 2026-11-25",
	WriteRequestUnitPerMillion: 0.625, ReadRequestUnitPerMillion: 0.125, StoragePerGBMonth: 0.25,
	LambdaGBs: 0.0000133334, LambdaRequestsPerMillion: 0.20, HTTPAPIRequestsPerMillion: 1.00,
	LogsIngestionPerGB: 0.50, KMSRequestsPer10k: 0.03, StreamsReadsByLambdaPerMill: 0,
}

// Cost is a DynamoDB cost: requests, read and write units (fractional:
// averages per event).
type Cost struct {
	Requests, RCU, WCU float64
}

// Add returns c plus d.
func (c Cost) Add(d Cost) Cost { return Cost{c.Requests + d.Requests, c.RCU + d.RCU, c.WCU + d.WCU} }

// Scale returns c times f.
func (c Cost) Scale(f float64) Cost { return Cost{c.Requests * f, c.RCU * f, c.WCU * f} }

// Zero reports whether c counts nothing.
func (c Cost) Zero() bool { return c.Requests == 0 && c.RCU == 0 && c.WCU == 0 }

func (c Cost) String() string {
	return fmt.Sprintf("%5.2f req %6.2f RCU %6.2f WCU", c.Requests, c.RCU, c.WCU)
}

// Stages is one unit of work's cost by component: the api (webhook
// accept; for a reconcile, the scheduler's enqueue), the worker and the
// projector.
type Stages struct {
	API, Worker, Projector Cost
}

// Total is the sum of the stages.
func (s Stages) Total() Cost { return s.API.Add(s.Worker).Add(s.Projector) }

// Measured are the per-unit DynamoDB costs the measurement found
// (Measure), and the Strava reads each unit made there.
type Measured struct {
	// Webhook events (warm: the athlete's mapping and token cached):
	// create for an athlete with an active milestone and for one without,
	// update (pushed edit), delete.
	Create, CreateNoMilestone, Update, Delete Stages
	// Deauth is one deauthorization of an athlete holding DeauthWorkouts
	// workouts.
	Deauth         Stages
	DeauthWorkouts int
	// BackfillPage is one backfill list page of BackfillActivities new
	// activities, projected.
	BackfillPage       Stages
	BackfillActivities int
	// ReconcilePage is one reconcile of an unchanged athlete (the
	// scheduler's enqueue under API).
	ReconcilePage Stages
	// Reads are the Strava reads the simulator served per unit, by name
	// (create, update, delete, deauth, backfill, reconcile).
	Reads map[string]float64
	// Source says where the figures come from.
	Source string
}

// Reads are Strava reads per day by class.
type Reads struct {
	Webhook, Backfill, Reconcile, Confirm, Refresh float64
}

// Counted is what counts against the read budget.
func (r Reads) Counted(refreshes bool) float64 {
	t := r.Webhook + r.Backfill + r.Reconcile + r.Confirm
	if refreshes {
		t += r.Refresh
	}
	return t
}

// Lambda is one function's daily load.
type Lambda struct {
	Name        string
	Invocations float64
	GBs         float64
}

// Line is one monthly cost line.
type Line struct {
	Name, Quantity string
	USD            float64
}

// Target is one of the targets and whether it is met.
type Target struct {
	Name      string
	Got, Want float64
	Met       bool
}

// Plan is the capacity plan for a.Athletes athletes.
type Plan struct {
	A Assumptions
	M Measured
	// Events per day.
	Activities, Creates, PushedEdits, Deletes, Deauths, Connects, UnpushedCaught float64
	// CreateReads are the reads of the day's creates, bursts served by
	// list pages counted (Bursts of them).
	CreateReads, Bursts float64
	// Reconciliation: the chance an athlete with a milestone had activity
	// within one interval, the mean slots between its reconciles, and
	// reconciles and pages per day.
	ActiveInInterval, SlotsBetween, Reconciles, ReconcilePages float64
	BackfillPagesPerConnect                                    float64
	Reads                                                      Reads
	ReadsPerDay                                                float64
	SyncReadsPerDay                                            float64
	// PeakWindowReads is webhook and confirmation reads in the peak
	// 15-minute window (syncs defer there: they are paced, not urgent).
	PeakWindowReads float64
	// PeakWebhooksPerSecond is the API's webhook rate at the evening peak.
	PeakWebhooksPerSecond        float64
	FitsDaily, FitsShort         bool
	NeedReadDaily, NeedReadShort int
	FitsOverall                  bool
	// DynamoDB per day, by class and in total.
	DynamoByClass []ClassCost
	Dynamo        Cost
	Lambdas       []Lambda
	HTTPRequests  float64
	LogGB         float64
	KMSRequests   float64
	StorageGB     float64
	Monthly       []Line
	USDMonth      float64
	USDPerAthlete float64
	Targets       []Target
}

// ClassCost is one class of work's DynamoDB cost per day.
type ClassCost struct {
	Name  string
	Count float64
	Cost  Cost
}

// DaysPerMonth converts daily figures to a month.
const DaysPerMonth = 30

// createReads is what creates cost in Strava reads: one fetch each, but a
// burst costs its first BurstSingles fetches and list pages for the rest
// (handlers/ingest/fetch/burst.go). It returns the reads and the bursts.
func createReads(creates float64, a Assumptions) (reads, bursts float64) {
	size := float64(max(a.BurstSize, 1))
	if a.BurstShare <= 0 || size <= float64(a.BurstSingles) {
		return creates, 0
	}
	bursts = creates * a.BurstShare / size
	perBurst := float64(a.BurstSingles) + pages(size-float64(a.BurstSingles), a.PageSize)
	return creates*(1-a.BurstShare) + bursts*perBurst, bursts
}

// Compute builds the plan from the assumptions and the measured units.
// It is pure arithmetic (each step's doc states its formulas).
func Compute(a Assumptions, m Measured) Plan {
	n := float64(a.Athletes)
	p := Plan{A: a, M: m}
	p.Activities = n * a.ActivitiesPerDay
	p.Creates = p.Activities
	p.PushedEdits = p.Activities * a.PushedEdits
	p.Deletes = p.Activities * a.Deletes
	p.Deauths = n * a.DeauthsPerDay
	p.Connects = n * a.ConnectsPerDay
	p.reconciliation()
	p.readBudget()
	p.dynamoDB()
	p.lambdas()
	p.monthly()
	p.targets()
	return p
}

// history is how many activities a new connect's backfill imports.
func (a Assumptions) history() float64 { return float64(a.HistoryDays) * a.ActivitiesPerDay }

// reconciliation is the reconciliation the plan assumes (handlers/ingest,
// "Backfill and reconciliation"):
//
//   - Each athlete has its own slot in the reconcile interval (its place in a resumable walk of the users
//     index, paced over the interval), default 7 days (CC_RECONCILE_INTERVAL 168h, was 6h).
//   - At its slot an athlete is reconciled only if it has an active milestone whose period overlaps the
//     reconcile window (CC_RECONCILE_DAYS, 14) AND it uploaded since its last reconcile (a stored workout
//     of the window with a higher activity id than that reconcile listed; an upload arrives as a create
//     webhook), or its last reconcile would be older than a slow round-robin interval (CC_RECONCILE_IDLE,
//     28 days) by its next slot.
//   - One reconcile is one GET /athlete/activities?after=<now-14d>&per_page=200 page for a typical athlete:
//     an unchanged athlete costs one small page and no writes.
//   - Documented bound: an edit Strava never pushes, to an activity started within the last 14 days, of an
//     athlete with an active milestone, is caught within 7 days (+ one rate window) when the athlete
//     uploaded anything in that time, else within 28 days while the activity is still inside the window.
//
// The model: webhook events (creates, pushed edits, deletes) arrive as a Poisson process of rate
// e = activities × (1 + edits + deletes) per athlete-day, so an athlete is active within one interval I
// with probability P = 1 − exp(−e·I). An idle athlete is reconciled at the last slot before its last
// reconcile turns slow old: the (slow/I − 1)th slot after it, or the next when its job ran after that slot
// came; the plan takes the sooner, K = slow/I − 1 slots (3, at least 1). The gap between two reconciles is g
// slots with probability (1−P)^(g−1)·P for g < K and (1−P)^(K−1) for g = K: the mean gap is
// G = (1 − (1−P)^K) / P slots, and reconciles per day = N × milestone-share / (G·I). Pages per reconcile =
// max(1, ⌈reconcile-days × activities / page-size⌉). With the defaults P = 0.955, G = 1.047: 0.068
// reconciles per athlete-day, 15.5 % of the webhook reads.
func (p *Plan) reconciliation() {
	a := p.A
	interval := a.ReconcileInterval.Hours() / 24
	slots := math.Max(1, math.Round(a.SlowInterval.Hours()/a.ReconcileInterval.Hours())-1)
	eventsPerAthleteDay := a.ActivitiesPerDay * (1 + a.PushedEdits + a.Deletes)
	p.ActiveInInterval = 1 - math.Exp(-eventsPerAthleteDay*interval)
	if p.ActiveInInterval > 0 {
		p.SlotsBetween = (1 - math.Pow(1-p.ActiveInInterval, slots)) / p.ActiveInInterval
	} else {
		p.SlotsBetween = slots
	}
	p.Reconciles = float64(a.Athletes) * a.MilestoneShare / (p.SlotsBetween * interval)
	p.ReconcilePages = p.Reconciles * pages(float64(a.ReconcileDays)*a.ActivitiesPerDay, a.PageSize)
	p.UnpushedCaught = p.Activities * a.UnpushedEdits * a.MilestoneShare
	p.BackfillPagesPerConnect = pages(a.history(), a.PageSize)
}

// readBudget is the Strava reads per day by class and whether they fit:
//
//	webhooks        N·activities·(1 + edits)                  one GET /activities/{id} per create or pushed edit
//	backfill        N·connects·max(1, ⌈history-days·activities/page-size⌉)
//	reconciliation  as above
//	confirmations   N·activities·deletes + N·deauths          one read each (a delete is confirmed by a
//	                                                          fetch and a deauthorization by the grant failing;
//	                                                          today's code does neither: the measurement shows 0)
//	token refreshes N / (token-ttl + 1/r) with r the reads per athlete-day: a token lives 6 h and the first
//	                read after it expires refreshes (a renewal process)
//
// Token refreshes go to POST /oauth/token. Strava's rate-limit page
// (developers.strava.com/docs/rate-limits, read through the search tool on 2026-11-25) defines the
// overall and the "non-upload" (read) limits for API requests and reports usage in headers of every API
// request; it does not name the OAuth endpoints either way. The plan follows the usual reading that the
// token exchange is not an API read and leaves refreshes out of the counted total, printing them on their
// own line; -refreshes-in-budget counts them (then they also enter the peak window).
//
// Fit: webhook and confirmation reads may use the budget minus the webhooks' reserve (5 %,
// budget.DefaultReserve) and syncs (backfill, reconciliation) their share (CC_SYNC_BUDGET_SHARE,
// 0.5). Daily: needs max(total/0.95, syncs/share) ≤ the daily read limit. Peak 15 minutes: the urgent
// reads (everything but syncs) of a mean window × the peak factor must fit 95 % of the 15-minute read
// limit, and the syncs' mean per window their share (syncs are paced and defer at the peak, so they are
// not stacked on it). Every pipeline call is a GET, so the overall limits need the same figures.
func (p *Plan) readBudget() {
	a, n := p.A, float64(p.A.Athletes)
	p.CreateReads, p.Bursts = createReads(p.Creates, a)
	p.Reads = Reads{
		Webhook:   p.CreateReads + p.PushedEdits,
		Backfill:  p.Connects * p.BackfillPagesPerConnect,
		Reconcile: p.ReconcilePages,
		Confirm:   p.Deletes + p.Deauths,
	}
	readsPerAthlete := 0.0
	if n > 0 {
		readsPerAthlete = p.Reads.Counted(false) / n
	}
	// A token lives TokenTTL; the first read after it expires refreshes:
	// a renewal process of mean TokenTTL + 1/rate (reads Poisson).
	if readsPerAthlete > 0 {
		p.Reads.Refresh = n / (a.TokenTTL.Hours()/24 + 1/readsPerAthlete)
	}
	p.ReadsPerDay = p.Reads.Counted(a.RefreshesInBudget)
	p.SyncReadsPerDay = p.Reads.Backfill + p.Reads.Reconcile
	windows := 24 * 60 / 15.0
	urgent := p.ReadsPerDay - p.SyncReadsPerDay
	p.PeakWindowReads = urgent / windows * a.PeakFactor
	webShare := 1 - a.BudgetReserve
	needDaily := math.Max(p.ReadsPerDay/webShare, p.SyncReadsPerDay/a.BudgetShare)
	needShort := math.Max(p.PeakWindowReads/webShare, p.SyncReadsPerDay/windows/a.BudgetShare)
	p.NeedReadDaily, p.NeedReadShort = int(math.Ceil(needDaily)), int(math.Ceil(needShort))
	p.FitsDaily = p.NeedReadDaily <= a.Limits.ReadDaily
	p.FitsShort = p.NeedReadShort <= a.Limits.ReadShort
	// Every call the pipeline makes is a read (GET), so the overall budget
	// needs the same; refreshes (POST /oauth/token) are added when counted.
	p.FitsOverall = p.NeedReadDaily <= a.Limits.Daily && p.NeedReadShort <= a.Limits.Short
}

// dynamoDB is the DynamoDB cost per day by class and in total.
// Each class's count × its measured units; a create is the milestone and the
// no-milestone create weighted by -milestone-share; a backfill or a deauthorization is scaled from the
// measured page (history activities) to the modelled history; an unpushed edit caught by a reconcile
// costs the worker and projector part of an update event.
func (p *Plan) dynamoDB() {
	a, m, history := p.A, p.M, p.A.history()
	create := m.Create.Total().Scale(a.MilestoneShare).Add(m.CreateNoMilestone.Total().Scale(1 - a.MilestoneShare))
	caught := m.Update.Worker.Add(m.Update.Projector)
	backfill := Cost{}
	if m.BackfillActivities > 0 {
		backfill = m.BackfillPage.Total().Scale(math.Max(history, 1) / float64(m.BackfillActivities))
	}
	deauth := m.Deauth.Total()
	if m.DeauthWorkouts > 0 {
		deauth = deauth.Scale(math.Max(history, 1) / float64(m.DeauthWorkouts))
	}
	p.DynamoByClass = []ClassCost{
		{"webhook create", p.Creates, create.Scale(p.Creates)},
		{"webhook update (pushed edit)", p.PushedEdits, m.Update.Total().Scale(p.PushedEdits)},
		{"webhook delete", p.Deletes, m.Delete.Total().Scale(p.Deletes)},
		{"deauthorization", p.Deauths, deauth.Scale(p.Deauths)},
		{"backfill (new connect)", p.Connects, backfill.Scale(p.Connects)},
		{"reconcile page (unchanged)", p.ReconcilePages, m.ReconcilePage.Total().Scale(p.ReconcilePages)},
		{"unpushed edit caught", p.UnpushedCaught, caught.Scale(p.UnpushedCaught)},
	}
	for _, c := range p.DynamoByClass {
		p.Dynamo = p.Dynamo.Add(c.Cost)
	}
}

// lambdas is each function's load per day, and what follows from the
// invocations: API requests, logs, KMS requests and storage.
func (p *Plan) lambdas() {
	a, n := p.A, float64(p.A.Athletes)
	webhooks := p.Creates + p.PushedEdits + p.Deletes + p.Deauths
	p.PeakWebhooksPerSecond = webhooks / 86400 * a.PeakFactor
	apiCalls := webhooks + p.Connects + n*a.AppRequestsPerDay
	jobs := webhooks
	syncPages := p.Connects*p.BackfillPagesPerConnect + p.ReconcilePages
	batches := (jobs + syncPages) / math.Max(a.RecordsPerBatch, 1e-9)
	p.Lambdas = []Lambda{
		{"api", apiCalls, apiCalls * a.API.GBs()},
		{"worker (webhook jobs)", jobs, jobs * a.Worker.GBs()},
		{"worker (sync pages)", syncPages, syncPages * a.SyncPage.GBs()},
		{"projector", batches, batches * a.Projector.GBs()},
		{"sweeper", a.SweeperPerDay, a.SweeperPerDay * a.Sweeper.GBs()},
	}
	p.HTTPRequests = apiCalls
	p.LogGB = p.invocations() * a.LogBytesPerInvocation / 1e9
	// A refresh seals the new pair (one GenerateDataKey) and a later cold
	// read unseals it (one Decrypt).
	p.KMSRequests = 2 * p.Reads.Refresh
	p.StorageGB = n * a.StorageKBPerAthlete / 1e6
}

// invocations is the Lambda invocations per day.
func (p *Plan) invocations() (invocations float64) {
	for _, l := range p.Lambdas {
		invocations += l.Invocations
	}
	return invocations
}

// monthly is the monthly cost by line and in total.
func (p *Plan) monthly() {
	pr, d := p.A.Prices, float64(DaysPerMonth)
	var gbs float64
	for _, l := range p.Lambdas {
		gbs += l.GBs
	}
	invocations := p.invocations()
	p.Monthly = []Line{
		{"DynamoDB write request units", fmt.Sprintf("%.3gM WRU", p.Dynamo.WCU*d/1e6), p.Dynamo.WCU * d / 1e6 * pr.WriteRequestUnitPerMillion},
		{"DynamoDB read request units", fmt.Sprintf("%.3gM RRU", p.Dynamo.RCU*d/1e6), p.Dynamo.RCU * d / 1e6 * pr.ReadRequestUnitPerMillion},
		{"DynamoDB storage", fmt.Sprintf("%.3g GB", p.StorageGB), p.StorageGB * pr.StoragePerGBMonth},
		{"DynamoDB Streams reads by Lambda", "free", 0},
		{"Lambda GB-s (arm64)", fmt.Sprintf("%.3g GB-s", gbs*d), gbs * d * pr.LambdaGBs},
		{"Lambda requests", fmt.Sprintf("%.3gM", invocations*d/1e6), invocations * d / 1e6 * pr.LambdaRequestsPerMillion},
		{"HTTP API requests", fmt.Sprintf("%.3gM", p.HTTPRequests*d/1e6), p.HTTPRequests * d / 1e6 * pr.HTTPAPIRequestsPerMillion},
		{"CloudWatch Logs ingestion", fmt.Sprintf("%.3g GB", p.LogGB*d), p.LogGB * d * pr.LogsIngestionPerGB},
		{"KMS requests (token seal/unseal)", fmt.Sprintf("%.3gM", p.KMSRequests*d/1e6), p.KMSRequests * d / 1e4 * pr.KMSRequestsPer10k},
	}
	for _, l := range p.Monthly {
		p.USDMonth += l.USD
	}
	if p.A.Athletes > 0 {
		p.USDPerAthlete = p.USDMonth / float64(p.A.Athletes)
	}
}

// targets are the plan's targets and whether they are met.
func (p *Plan) targets() {
	ratio, perAthlete := 0.0, 0.0
	if p.Reads.Webhook > 0 {
		ratio = p.Reads.Reconcile / p.Reads.Webhook
	}
	if p.A.Athletes > 0 {
		perAthlete = p.ReadsPerDay / float64(p.A.Athletes)
	}
	p.Targets = []Target{
		{"reconciliation reads / webhook reads", ratio, 0.20, ratio <= 0.20},
		{"Strava reads per athlete-day", perAthlete, 1.3, perAthlete <= 1.3},
		{"USD per athlete-month", p.USDPerAthlete, 0.0015, p.USDPerAthlete <= 0.0015},
	}
}

// pages is the list pages needed for n activities (at least one: an empty
// answer is a page too).
func pages(n float64, pageSize int) float64 {
	if pageSize <= 0 {
		pageSize = syncjobs.DefaultSyncPageSize
	}
	return math.Max(1, math.Ceil(n/float64(pageSize)))
}
