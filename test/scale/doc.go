// Package scale is the scale simulation `make scale` runs,
// with a reduced run in `make test`: the local stack (scripts/runkit, in
// this process so its capacity meters can be read) on DynamoDB Local,
// against the Strava simulator (scripts/stravasim) enforcing app-wide read
// limits with Strava's X-RateLimit/X-ReadRateLimit headers and 429s on a
// shortened window, through a compressed day.
//
// What it plays (Settings; Full for make scale, Reduced for make test):
//
//   - Athletes (2,000; 200 reduced) seeded directly through model/store
//     (CreateUser with tokens the simulator issued, CreateMilestone for
//     MilestoneShare of them: an active monthly distance milestone);
//     seeding is neither timed nor metered.
//   - A day compressed to Day (6 min; 60 s) in Strava windows of Window
//     (10 s; 5 s): less compressed than the day (36 windows instead of 96)
//     so that one window is longer than the local pipeline's own lag.
//     ActivitiesPerDay activities per athlete, each announced by a create
//     webhook at a time drawn from a daily curve (a night floor, a morning
//     bump, an evening peak PeakFactor× the floor around 19:00); the
//     realised peak factor (busiest window ÷ mean window) is printed.
//   - Edits later the same day: PushedEdits of the activities get an
//     update webhook, UnpushedEdits are changed at the simulator without
//     one (only reconciliation can catch those): the distance, or for every
//     other one the commute mark toggled on, which Strava never pushes.
//   - Connects athletes connect during the day through the API's OAuth
//     login with HistoryDays days of activities, which the backfill imports.
//
// The simulator allows ReadLimit reads per window (twice the peak window's
// webhook fetches, with headroom: webhooks alone never need to wait), the
// daily limits do not bind. The product is given CC_STRAVA_WINDOW=Window,
// CC_RECONCILE_INTERVAL=Interval (90 s; 15 s: a quarter of the day, six
// hours of it), CC_RECONCILE_IDLE=4×Interval (read only by builds that
// know it; configuration ignores unknown variables), CC_RECONCILE_DAYS=3,
// CC_OUTBOX_LEASE=2×Window, CC_RETRY_BASE=1s; CC_SCALE_ENV="NAME=value …"
// overrides any of them.
//
// What it reports (Report.Print):
//
//   - webhook lag p50/p99/max, from the POST to the projector being handed
//     the workout's stream record with the announced state (each webhook
//     counts: a create until the created state, an update until the edited
//     one; an unpushed edit is an expectation of its own, so a create that
//     was written and later edited silently is never counted as lost);
//     late = lag over one window; the slowest webhooks (every late one,
//     and at least five) are counted by kind, their lag split into the
//     harness's sender queue and POST, the worker (from the acknowledgement
//     to its "workout written" log) and the stream, and the slowest ten
//     are spelled out with what the stack logged about their activity
//     (trail.go);
//   - webhook jobs deferred (the worker's "job deferred" log), and those
//     deferred in a window where sync list reads had already been spent;
//   - Strava reads per window: by endpoint as the simulator served them
//     (and its 429s), and by class from the worker's StravaReads EMF lines
//     (webhook, backfill, reconcile, confirm; booked when the job ends);
//     a window whose list reads (the syncs') exceed the syncs' share
//     (CC_SYNC_BUDGET_SHARE of the limit) counts as exceeded;
//   - unpushed edits of athletes with an active milestone caught within the
//     README's bound: the idle round-robin (CC_RECONCILE_IDLE) + one window
//     after the edit (the run waits it out after the day), and, printed
//     only, within reconcile interval + one window (the bound when the
//     athlete uploads again before their next slot);
//   - writes per table and index and the hottest partition key's share,
//     from the capacity meters' WriteKeys (model/store/metering/writekeys.go) over
//     the day's traffic; only tables and indexes with at least
//     MinWritesForHotKey writes count toward hottest_key_share;
//   - the targets, met or MISSED, and a last line:
//     scale: athletes=N webhooks_late=L share_exceeded=S edits_caught=P% hottest_key_share=H%
//
// TestScale fails only when work was lost (an announced or backfilled
// activity never written, an event never acknowledged) or the last line is
// malformed; timing targets are never asserted. It is skipped unless
// CC_SCALE is reduced or full, so `go test ./...` does not run it.
package scale
