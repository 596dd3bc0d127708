// Package capacitykit is the capacity plan behind `make capacity` (scripts/capacity):
// for N athletes on one Strava application it prints Strava reads per day by class and whether they fit
// the application's limits, DynamoDB requests/RCU/WCU per day, Lambda invocations and GB-s per day, and
// a monthly AWS cost at published on-demand prices. Its last line is
//
//	capacity: athletes=N reads_per_day=R webhook_reads=W reconcile_reads=C fits=yes|no usd_per_athlete_month=X
//
// followed by nothing; above it, the three targets at 1,000,000 athletes (reconciliation reads
// ≤ 20 % of webhook reads, ≤ 1.3 Strava reads per athlete-day, ≤ $0.0015 per athlete-month) as met/missed
// lines. Nothing asserts them: they are printed.
//
// # Measured, not copied
//
// The per-event DynamoDB units come from a measurement run at every start (Measure): the local stack
// (scripts/runkit — the api's handler, the worker, the stream reader feeding the projector, the sync
// scheduler: the Lambdas' code) on DynamoDB Local (started like the tests do, test/dynamolocal, or
// -endpoint) against the Strava simulator (test/stravasim), read from the product's capacity meters
// (model/store/capacity/meter.go: Stack.Capacity and capacity.StartMeter per request, job and batch). Each unit
// of work is sent alone and costed from the meters' growth until the stack is quiet again, the method of
// the bench (test/bench; bench.Minus subtracts the snapshots): a warm webhook create for an athlete with
// an active milestone and for one without, a pushed update, a delete (api accept + worker + projector), a
// new connect's backfill page of the default history (enqueue + worker + projection of the imported
// workouts), a reconcile of an unchanged athlete (ReconcileAll's enqueue — the operator's full round, without
// the scheduled step's milestone/sync-state/LSI1 checks of a few RCU — + the worker's page), and a
// deauthorization of the backfilled athlete. The figures are DynamoDB Local's ConsumedCapacity accounting
// (the meter's package doc lists where it differs from AWS: transactions are floored to AWS's 2 units per
// item; a Query that finds nothing reports 0 where AWS charges 0.5 RCU). They measure the code as it is:
// re-run the tool after the reconciliation and hot-key rework, and the plan follows.
//
// # The reconciliation the plan assumes (handlers/ingest, "Backfill and reconciliation")
//
//   - Each athlete has its own slot in the reconcile interval (its place in a resumable walk of the users
//     index, paced over the interval), default 7 days (CC_RECONCILE_INTERVAL 168h, was 6h).
//   - At its slot an athlete is reconciled only if it has an active milestone whose period overlaps the
//     reconcile window (CC_RECONCILE_DAYS, 14) AND it uploaded since its last reconcile (a stored workout
//     of the window with a higher activity id than that reconcile listed; an upload arrives as a create
//     webhook), or its last reconcile is older than a slow round-robin interval (CC_RECONCILE_IDLE, 28 days).
//   - One reconcile is one GET /athlete/activities?after=<now-14d>&per_page=200 page for a typical athlete:
//     an unchanged athlete costs one small page and no writes.
//   - Documented bound: an edit Strava never pushes, to an activity started within the last 14 days, of an
//     athlete with an active milestone, is caught within 7 days (+ one rate window) when the athlete
//     uploaded anything in that time, else within 28 days while the activity is still inside the window.
//
// The model: webhook events (creates, pushed edits, deletes) arrive as a Poisson process of rate
// e = activities × (1 + edits + deletes) per athlete-day, so an athlete is active within one interval I
// with probability P = 1 − exp(−e·I). With K = slow/I slots (4), the gap between two reconciles is g
// slots with probability (1−P)^(g−1)·P for g < K and (1−P)^(K−1) for g = K: the mean gap is
// G = (1 − (1−P)^K) / P slots, and reconciles per day = N × milestone-share / (G·I). Pages per reconcile =
// max(1, ⌈reconcile-days × activities / page-size⌉). With the defaults P = 0.955, G = 1.047: 0.068
// reconciles per athlete-day, 15.5 % of the webhook reads.
//
// # Strava reads by class (per day)
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
//
// # Defaults (flags of scripts/capacity; make capacity ARGS=--help)
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
//
// DynamoDB per day: each class's count × its measured units; a create is the milestone and the
// no-milestone create weighted by -milestone-share; a backfill or a deauthorization is scaled from the
// measured page (history activities) to the modelled history; an unpushed edit caught by a reconcile
// costs the worker and projector part of an update event.
//
// # Prices (USD, on-demand, us-east-1)
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
package capacitykit
