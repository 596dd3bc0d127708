// Package ingest is the vocabulary Strava ingestion shares: the webhook
// Event, the Job handed to the worker (an event's, or a SyncJob's), the
// DeferError a job returns to wait, the Dispatcher that hands a job off, the
// classes of Strava reads, the audit event types and MapActivity (a Strava
// activity as a workout item). Each concern is a package of its own behind
// the small ports it declares, with its design notes in its doc;
// handlers/app wires them and checks that the adapters fit:
//
//	intake    the webhook (api Lambda): the handshake, decoding, the claim in the outbox, the hand-off
//	handoff   the dispatchers (Lambda async invoke, the local Queue) and the outbox sweeper
//	outbox    the runner: process a job, then settle, defer, retry or park its outbox item
//	fetch     an event's job: athlete → user, budget, token, GET, the ordered workout write;
//	          deletes and deauthorizations confirmed at Strava
//	budget    Strava's application-wide budget: the shared rate cache, the reserve,
//	          the sync jobs' pacing, reads counted by class
//	syncjobs  backfill and reconciliation: one list page per run, the reconciliation schedule
//
// Testing: scripts/stravasim plays Strava (webhooks, OAuth, the REST API,
// rate limits, faults); the tests in this directory run the whole pipeline
// on it and DynamoDB Local.
//
// # Configuration and logs
//
// api: STRAVA_VERIFY_TOKEN, STRAVA_SUBSCRIPTION_ID, CC_WORKER_FUNCTION,
// CC_OUTBOX_LEASE; worker: STRAVA_CLIENT_ID, STRAVA_CLIENT_SECRET,
// STRAVA_BASE_URL, CC_TOKEN_KMS_KEY or CC_TOKEN_KEY,
// CC_ATHLETE_READS_PER_WINDOW, CC_ATHLETE_READS_PER_DAY, CC_STRAVA_WINDOW, CC_RETRY_BASE,
// CC_SYNC_BUDGET_SHARE, CC_SYNC_DAY_HEAD_START, CC_RECONCILE_INTERVAL, CC_RECONCILE_IDLE; api:
// CC_SYNC_MAX_DAYS; sweeper: CC_RECONCILE_DAYS, CC_RECONCILE_INTERVAL,
// CC_RECONCILE_IDLE; api, worker and sweeper alike: CC_OUTBOX_SHARDS; all:
// DYNAMODB_ENDPOINT, CC_TABLE_PREFIX, CC_LOG_LEVEL (handlers/config). Logs are
// JSON with correlationId, eventType, athleteId, userId, activityId,
// idempotency, writeStatus; never tokens. Each job's "job finished" line
// carries its DynamoDB capacity and stravaReads; the worker Lambda also
// writes the job's Strava reads as the EMF metric StravaReads
// (budget.WorkerMetricsNamespace) with dimension Class = ReadClass(job): webhook,
// backfill, reconcile or confirm (runner.Runner; the capacity dashboard's
// "Strava budget by class" widget). Token refreshes are not reads there.
package ingest
