package plankit

import (
	"time"

	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
)

// Assumptions are the plan's inputs besides the measured units; every one
// is a flag of scripts/capacity (Defaults lists the defaults and the package
// doc why).
type Assumptions struct {
	Athletes int
	// Per athlete-day.
	ActivitiesPerDay, ConnectsPerDay, DeauthsPerDay float64
	// Per activity.
	PushedEdits, Deletes, UnpushedEdits float64
	// BurstShare is the share of creates that arrive in bursts (a bulk
	// upload, a new device's sync: more than an instance's
	// createsBeforeCheck of one athlete in a window), BurstSize their mean
	// size. A burst costs its first creates' fetches (BurstSingles) and then
	// list pages of PageSize, not a fetch each.
	BurstShare   float64
	BurstSize    int
	BurstSingles int
	// MilestoneShare is the share of athletes with an active milestone whose
	// period overlaps the reconcile window.
	MilestoneShare float64
	// PeakFactor is the evening peak's webhook rate over the day's mean.
	PeakFactor float64
	// HistoryDays is how far back a new connect's backfill lists
	// (CC_SYNC_MAX_DAYS); PageSize is a list page (per_page).
	HistoryDays, PageSize int
	// ReconcileInterval is each athlete's slot period (CC_RECONCILE_INTERVAL),
	// SlowInterval the round-robin bound for athletes without activity,
	// ReconcileDays the window a reconcile lists (CC_RECONCILE_DAYS).
	ReconcileInterval, SlowInterval time.Duration
	ReconcileDays                   int
	// TokenTTL is a Strava access token's life; RefreshesInBudget counts
	// refreshes against the read budget (off: see Plan.readBudget).
	TokenTTL          time.Duration
	RefreshesInBudget bool
	Limits            Limits
	// BudgetShare is what syncs may spend of each budget
	// (CC_SYNC_BUDGET_SHARE); BudgetReserve what webhooks leave unused.
	BudgetShare, BudgetReserve float64
	// Lambda functions (memory from Terraform's defaults, durations assumed).
	API, Worker, SyncPage, Projector, Sweeper Function
	// RecordsPerBatch is the stream records one projector invocation
	// handles on average; SweeperPerDay the sweeper's invocations a day.
	RecordsPerBatch, SweeperPerDay float64
	// AppRequestsPerDay is other API traffic per athlete-day (the app's own
	// pages; 0: the pipeline only).
	AppRequestsPerDay float64
	// LogBytesPerInvocation is what one invocation writes to CloudWatch
	// Logs (JSON lines, EMF, START/END/REPORT).
	LogBytesPerInvocation float64
	// StorageKBPerAthlete is what one athlete keeps in DynamoDB (workouts
	// and their LSI entries, milestones, audit, outbox within its TTL).
	StorageKBPerAthlete float64
	Prices              Prices
}

// Defaults returns the documented defaults for n athletes (flags of
// scripts/capacity; make capacity ARGS=--help):
//
//	-activities 0.4          activities per athlete-day (an active user base: ~3 a week)
//	-edits 0.1               pushed edits (update webhooks) per activity
//	-deletes 0.01            deletes per activity
//	-unpushed-edits 0.05     edits Strava never pushes, per activity (reconciliation writes them)
//	-milestone-share 0.5     athletes with an active milestone overlapping the reconcile window
//	-peak 10                 evening peak over the day's mean rate
//	-connects 0.001          new connects per athlete-day (each backfills -history-days, CC_SYNC_MAX_DAYS 365)
//	-deauths 0.001           deauthorizations per athlete-day (a steady population: as many leave as join)
//	-reconcile-interval 168h -slow-interval 672h -reconcile-days 14 -page-size 200
//	-token-ttl 6h            Strava's access token lifetime
//	-read-limit-15m 100 -read-limit-day 1000 -limit-15m 200 -limit-day 2000   Strava's default limits;
//	                         raise them to what Strava granted
//	-sync-share 0.5          CC_SYNC_BUDGET_SHARE
//	Lambda memory (MB) from Terraform's var.functions defaults: api 256, worker 256, projector 512,
//	sweeper 128. Billed durations are assumptions: api 30 ms, worker 150 ms per webhook job (one Strava
//	round trip and a few DynamoDB calls), 400 ms per sync page, projector 80 ms per batch, sweeper 200 ms.
//	-records-per-batch 1     projector invocations = worker jobs (an upper bound: at scale batches hold more)
//	-sweeper-per-day 2880    the sweep and the reconcile schedule, each once a minute
//	-log-bytes 1500          CloudWatch Logs bytes per invocation (JSON lines, EMF, START/END/REPORT)
//	-storage-kb 150          DynamoDB storage per athlete (a year of workouts with their LSI entries, milestones,
//	                         audit and outbox within their TTLs)
//	-app-requests 0          other API requests per athlete-day (the app's own pages are not in the plan by default)
func Defaults(n int) Assumptions {
	return Assumptions{
		Athletes: n, ActivitiesPerDay: 0.4, ConnectsPerDay: 0.001, DeauthsPerDay: 0.001,
		PushedEdits: 0.1, Deletes: 0.01, UnpushedEdits: 0.05, MilestoneShare: 0.5, PeakFactor: 10,
		BurstShare: 0.1, BurstSize: 50, BurstSingles: 3,
		HistoryDays: syncjobs.DefaultSyncMaxDays, PageSize: syncjobs.DefaultSyncPageSize,
		ReconcileInterval: 7 * 24 * time.Hour, SlowInterval: 28 * 24 * time.Hour, ReconcileDays: syncjobs.DefaultReconcileDays,
		TokenTTL:    6 * time.Hour,
		Limits:      Limits{ReadShort: 100, ReadDaily: 1000, Short: 200, Daily: 2000},
		BudgetShare: syncjobs.DefaultSyncBudgetShare, BudgetReserve: budget.DefaultReserve,
		API: Function{256, 30}, Worker: Function{256, 150}, SyncPage: Function{256, 400},
		Projector: Function{512, 80}, Sweeper: Function{128, 200},
		RecordsPerBatch: 1, SweeperPerDay: 2 * 24 * 60, LogBytesPerInvocation: 1500, StorageKBPerAthlete: 150,
		Prices: DefaultPrices,
	}
}
