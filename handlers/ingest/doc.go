// Package ingest is the Strava ingestion pipeline shared by the api, worker
// and sweeper Lambdas (and the local stack): the webhook http.Handler, the
// Job handed to the worker, the dispatchers that hand it off (Lambda async
// invoke, in-process queue), the worker service that turns an event into a
// normalized workout item, and the outbox sweeper.
//
// # Where each concern lives
//
// Five concerns, each a file set behind the small interface its consumer
// declares, so one can be changed without reading the others:
//
//	webhook intake     webhook.go, event.go        IdempotencyStore, Dispatcher
//	worker             worker.go, cache.go         WorkerStore, TokenProvider, ActivityFetcher
//	outbox hand-off    dispatch.go, sweep.go       LambdaInvoker, OutboxStore
//	sync scheduling    sync.go, syncschedule.go    SyncStore, ActivityLister, SyncSchedulerStore
//	capacity, metrics  capacity.go, readmetric.go  (the store's meter; EMF lines to an io.Writer)
//
// They share only the Job, DeferError and the instance's rate cache
// (cache.go); wiring.go builds the Strava-backed worker and syncer.
//
// The outbox. The idempotency item of an event (model.IdempotencyRecord) is
// the durable hand-off. Its life:
//
//	(none) ──claim──▶ received ──worker: written / nothing to do──▶ done
//	                  │  ▲     ──worker: poison, or MaxFailures──▶ parked (+ PARKED#WORKER)
//	                  │  └── worker: deferred (429, spent budget, athlete cap: until the
//	                  │      window reset) or failed (backoff) → notBefore
//	                  └── lease lapsed / notBefore passed → sweeper or a redelivery
//	                      claims it again (conditional) and dispatches the stored job
//
// While received the item carries PendingPK/PendingSK (the sparse Pending
// index, keyed by due instant, spread over CC_OUTBOX_SHARDS partitions,
// default 32, by a hash of the key; the index projects only the keys, the
// correlation id and the creation instant, and the lease returns the whole
// item), so the sweeper finds due work with one Query per shard. A redelivered event is a duplicate while its item is done,
// parked, leased or deferred. Delivery to the worker is at least once: a job
// may run twice (lease lapse, concurrent sweepers are excluded by the
// conditional lease, but a slow worker is not), so the worker coalesces (a
// stored fetch that started after the job's receipt answers it) and orders
// its writes by fetch start (model.Workout.FetchStartedAtNs).
//
// Lifetime: the item's TTL (expiresAt) lies IdempotencyTTL (7 days) after
// its last activity: every claim, lease and deferral puts it after the new
// due time, the settle 7 days after the settle, so a received item never
// expires while pending however long it is deferred (model/store outbox.go).
//
// Parked records: a PARKED#WORKER record (PARKED#{source}#{shard} /
// {idempotency key}, model.ParkedShards shards by a hash of the key; records
// parked before the shards stay under PARKED#{source} and are still read
// until they expire; userId and athleteId when known, expiresAt 30 days after parking,
// model.ParkedRetentionDays) is written by the worker's park (poison,
// MaxFailures) and by a local queue's on-failure destination (the outcome
// could not be recorded; the item stays received). A job done on a later
// dispatch than its first removes its record, and a redriven job whose item
// is done is not run again, so `make redrive` never re-runs done work. An
// account deletion deletes the user's parked records.
//
// # Webhook contract (/webhooks/strava, api Lambda)
//
//	GET  ?hub.mode=subscribe&hub.verify_token=$STRAVA_VERIFY_TOKEN&hub.challenge=X
//	     → 200 {"hub.challenge":"X"}; any other GET → 403
//	POST valid event, new (or received earlier but its lease lapsed)
//	     → 200 {"status":"accepted","correlationId":…}, recorded in the outbox and handed
//	       to the worker (also 200 when the hand-off fails: the sweeper dispatches it)
//	POST valid event seen before (done, parked, or still leased/deferred)
//	     → 200 {"status":"duplicate"}, no hand-off
//	POST malformed (bad JSON, unknown field, wrong type, missing field, unknown
//	     object_type/aspect_type, non-positive ids, invalid UTF-8)
//	     → 400 {"error":"invalid_event","reason":…,"fields":[…]}
//	POST with another subscription_id → 403 {"error":"unknown_subscription"}
//	     (until STRAVA_SUBSCRIPTION_ID is set, every event is refused)
//	POST body over 64 KiB → 413 {"error":"body_too_large"}
//	POST when the event cannot be recorded → 503 (nothing recorded, so Strava's
//	     redelivery is accepted)
//
// Decoding is strict (DisallowUnknownFields, exactly one object, updates
// values must be scalars); FuzzDecodeWebhook fuzzes it (`make fuzz`,
// FUZZTIME, default 60s; `make test` runs it for 5s). The idempotency key is
// model.WebhookIdempotencyKey(object_type, object_id, aspect_type, owner_id,
// event_time, updates) — the event's identity, not the HTTP request's — claimed with
// one conditional UpdateItem in CommitCollectIdempotency (TTL 7 days after
// its last activity, see Lifetime); that
// item is the outbox above. Every request gets a correlation id
// (X-Correlation-Id header) that travels in the job to the worker, onto the
// workout item (correlationId) and into audit entries (audit GSI1 CORR#…).
// The webhook routes mount on a shared *http.ServeMux (Webhook.Mount); in AWS
// the mux is served through aws-lambda-go-api-proxy (httpadapter.NewV2, HTTP
// API payload v2).
//
// Hand-off: Dispatcher. In AWS LambdaDispatcher invokes CC_WORKER_FUNCTION
// with InvocationType=Event. Locally Queue is a bounded channel with worker
// goroutines (a key already queued is not queued twice); a full queue leaves
// the event to the sweeper. The sweeper (Sweeper: every 2 s in `make run` and
// at its start, the sweeper Lambda every minute in AWS) re-dispatches items
// whose lease lapsed or whose not-before passed, and reports OutboxDue per
// sweep (SweeperMetricsNamespace), which Terraform alarms on. Ctrl-C locally:
// running jobs finish within 15 s, queued ones stay received.
//
// # Worker (handlers/worker, input = the Job JSON)
//
//  1. Resolve athlete → user: STRAVA#ATHLETE#{id}/OWNER, falling back to the
//     connection via GSI1. Not linked → audit STRAVA_ATHLETE_NOT_LINKED (on
//     the athlete's partition) and drop.
//  2. Deauthorization (object_type athlete, updates.authorized "false"). The
//     webhook is unsigned, so the event is a reason to ask, never proof:
//     an event whose event_time (second resolution) is before the
//     connection's grant (grantedAtUtc, set by every login and left by
//     refreshes; updatedAtUtc for items written before it) is stale: audit
//     STRAVA_DEAUTH_STALE, dropped, no Strava call. Otherwise the grant must
//     fail at Strava, through the shared budget and the athlete's read cap
//     like a fetch: a refresh refused (invalid grant, or needsReauth already
//     set by Strava's refusal) or GET /api/v3/athlete answering 401 confirms;
//     200 → audit STRAVA_DEAUTH_UNCONFIRMED, dropped, nothing removed; 429,
//     spent budget, cap → deferred; 5xx, transport, any other status →
//     retried, then parked: an unconfirmable deauthorization waits, it never
//     destroys. Confirmed → one transaction deletes the connection (only if
//     its tokenVersion and grant have not moved: a reconnect racing in wins;
//     a refused condition is retried and judged again) and sets the user
//     guard's revocation (stravaRevokedAtUtc = event time,
//     stravaDataExpiresAt = now + 30 days); the owner mapping stays, so a
//     reconnect reattaches the same user (handlers/bff). Audit
//     STRAVA_ATHLETE_DEAUTHORIZED. Then every WORKOUT#STRAVA#… item gets that
//     expiresAt (DynamoDB TTL deletes them, per Strava's terms; the REMOVE
//     records re-project the milestones). The job fails, and its outbox item
//     stays pending, until that loop has finished: a retry finds the
//     connection gone and the guard holding the same event time, and resumes.
//     A workout written after the revocation (a fetch or sync page in
//     flight) gets the expiry from its guard check, and no write removes a
//     pending expiry. When a reconnect cleared the revocation during the
//     loop, the loop removes the expiry again.
//  3. delete events are confirmed by a fetch, never applied as they come
//     (a webhook is unsigned, and athlete and activity ids are public): they
//     take step 4 like create and update events (budget, athlete cap,
//     token, GET, ordering), and Strava's answer decides. 200 → the
//     activity is alive; what Strava says is written (audit
//     STRAVA_ACTIVITY_UPDATE with reason "delete event not confirmed:
//     strava serves the activity"). 404 → the workout is marked (step 5).
//     Any other answer cannot confirm it, so it destroys nothing: 401 →
//     needsReauth, 429 / spent budget / athlete cap → deferred, 5xx /
//     transport → retried and eventually parked; an unconfirmable delete
//     waits (or is parked for `make redrive`) and the workout stays as it
//     is. A forged delete thus costs one read of the athlete's cap.
//  4. Fetch: check the shared rate-limit item, get a valid token, GET
//     /api/v3/activities/{id}, map (sport_type → sportType, distance,
//     total_elevation_gain, moving_time, start_date, name only — never the raw
//     payload) and upsert the full item with createdAtUtc kept via
//     if_not_exists. The item carries fetchStartedAtNs and the upsert is
//     conditioned on it being newer than the stored one (and on nothing
//     else): an older answer is dropped (logged writeStatus=stale), a newer
//     one also revives a tombstone (isDeleted false, deletedAtUtc and
//     deletedReason removed), including a legacy tombstone that has no
//     fetchStartedAtNs. Before fetching, a job whose workout was fetched
//     after the job's receipt is done without a fetch (a stored tombstone
//     alone never stops a fetch: the activity may be public again), and the
//     athlete's read counter (STRAVA#ATHLETE#{id}/READS#{window}) must have
//     room (CC_ATHLETE_READS_PER_WINDOW). A workout beyond physical bounds
//     (model/bounds.go) is rejected at normalization. Audit
//     STRAVA_ACTIVITY_CREATE / _UPDATE.
//  5. Errors: 404 (to any event) → the workout is marked isDeleted with
//     deletedReason "hidden-or-deleted" (Strava answers 404 for a deleted
//     activity and for one made private alike) and the fetch's
//     fetchStartedAtNs, a tombstone when it was never written; the write
//     is ordered like the upsert (refused when an answer fetched later is
//     stored), so the newest fetch wins both ways and a 404 that overtook
//     its create's write still wins over that older fetch; audit
//     STRAVA_ACTIVITY_DELETE with that reason. 401 → connection
//     needsReauth = true, audit STRAVA_CONNECTION_NEEDS_REAUTH, dropped
//     (no retry storm; a flagged
//     connection makes no more Strava calls until the athlete reconnects);
//     429, spent budget, athlete cap → deferred to the window reset (not a
//     failure); 5xx / transport / DynamoDB failures → retried through the
//     outbox with backoff (CC_RETRY_BASE first), parked after DefaultMaxFailures (6);
//     invalid data (model.ErrInvalid) → audit STRAVA_EVENT_REJECTED, parked.
//     Parked jobs are PARKED#WORKER records (`make redrive`). Audit writes
//     never fail ingestion.
//
// Tokens (strava.Refresher, golang.org/x/oauth2 with credentials in the form
// body): a token expiring within 5 minutes is refreshed. One worker takes a
// short lease on the connection (conditional update on tokenVersion),
// refreshes and persists the rotated pair with tokenVersion = v → v+1; the
// others wait and re-read, so a race refreshes once. A worker that still
// loses the conditional write re-reads and uses the winner's token. A refresh
// token Strava refuses flags the connection needsReauth. Tokens are stored
// sealed (model/secrets; see the README's Security section).
//
// # Rate limits
//
// Strava's budget is per application: 200 / 15 min and 2000 / day overall,
// 100 / 15 min and 1000 / day for reads. Every Strava answer (including 429s)
// updates the shared item RATELIMIT#STRAVA / STATE from X-RateLimit-* and
// X-ReadRateLimit-* (only a newer window or a higher usage in the same window
// overwrites it). Before a fetch the worker defers the job (outbox not-before
// = the next :00/:15/:30/:45 UTC, or midnight UTC for a daily budget) when
// usage has reached the limit minus 5 % (DefaultBudgetReserve), instead of
// collecting 429s. CC_STRAVA_WINDOW shortens the assumed window (only
// against a simulator that runs shorter windows, as the chaos suite does).
//
// # Backfill and reconciliation (Syncer, SyncScheduler)
//
// Sync jobs travel the outbox like webhook events: a Job whose Sync field
// (SyncJob: user, athlete, mode, FromUtc, MilestoneEndUtc) is set, claimed
// under a deterministic key (model.SyncJobKey: backfill per user and
// horizon, reconciliation per user and enumeration cycle), so enqueueing
// twice claims once. The worker hands them to its Syncer, which runs ONE
// page per run:
//
//  1. decide (conditional write of USER#{id}/SYNC#STRAVA, model.SyncState):
//     resume its own unfinished job; a backfill reaching further back than
//     a running one takes it over keeping its cursor; a new backfill lists
//     only what is older than what earlier backfills imported
//     (ImportedFromUtc); a reconciliation runs only when no job does; a job
//     whose key is no longer the state's (superseded) or that finished is
//     done without a Strava call.
//  2. budget: sync jobs keep 1-CC_SYNC_BUDGET_SHARE of every budget of the
//     shared rate-limit item free (webhooks keep DefaultBudgetReserve), and
//     they are paced: a sync read is taken (one conditional write of the
//     window's SyncReads counter, model.SyncReadsKey, for the 15-minute
//     window and for the UTC day, whose count is split over
//     model.SyncReadsShardsFor(the day's sync cap) counters, up to 8 at
//     raised limits, so a day of sync reads is not one partition's:
//     Store.TakeSyncRead) only while the reads taken so far are
//     under PacedAllowance = the share's cap × (elapsed part of the window
//     + a head start of DefaultSyncHeadStart short windows). A job refused
//     waits (DeferError, state deferred with the reason, never failed)
//     for the instant the allowance grows past what is taken, spread by
//     its priority; a job that finds the share spent, or a Strava 429,
//     waits for the window's reset plus SyncResetDelay of the short window
//     (plus as much again by priority): webhook jobs deferred to a reset
//     are due AT it, so at every reset they run before any sync job.
//     Priority is the job's MilestoneEndUtc (the soonest-ending active
//     milestone when enqueued): sooner ends are due earlier, so when the
//     share cannot cover every due job the most valuable go first. Each
//     waiting job writes a SyncsWaiting EMF line (WorkerMetricsNamespace,
//     dimension Mode; SyncWaitSeconds: how far ahead); `make syncs` lists
//     who waits, why, the next attempt and the milestone end.
//  3. GET /api/v3/athlete/activities?before={cursor}&per_page=200, newest
//     first; a reconciliation also sends after={FromUtc} (and before= now
//     + 48 h on its first page: Strava lists oldest first when only after
//     is given), so an unchanged athlete costs one small page. Activities
//     older than FromUtc are ignored; each other one is
//     normalized (MapActivity, the same as a webhook fetch: a summary and
//     a detailed activity map to the same item) and compared
//     (WorkoutDiffers: sport type, distance, elevation, moving time, start)
//     with the stored workouts of the page's date range, read with ONE
//     strongly consistent LSI1 query. Only differing ones are written,
//     through UpsertWorkout with the list's fetchStartedAtNs (newest fetch
//     wins). A listed activity whose stored workout is a tombstone counts
//     as changed and is written: a workout hidden by a 404 counts again
//     once a list newer than that 404 shows it. Absence from a list never
//     deletes.
//  4. the cursor (the oldest start listed, plus one second so activities
//     sharing it are listed again and found unchanged) and the counts are
//     saved with a version check; an audit STRAVA_SYNC_PAGE (routine: no
//     index keys, so parallel syncs write no hot audit GSI2 partition) lists the
//     written ids. A crash between the writes and this save re-lists the
//     page, which writes nothing (and counts the workouts this job wrote
//     before as recovered). The job then defers to now (the sweeper runs
//     the next page) or, on a short page or one reaching FromUtc, ends:
//     state idle, lastSyncAtUtc, and for a backfill importedFromUtc =
//     horizonUtc = FromUtc; a reconciliation, or the first backfill (it
//     listed from now), also records reconciledAtUtc and
//     reconciledActivityId (the highest activity id it listed); audit
//     STRAVA_SYNC_COMPLETED.
//
// A failure is retried through the outbox (state keeps the reason); the
// one that parks the job marks the sync failed, as does a revoked token.
// Triggers: the BFF's OAuth callback and milestone creation call
// SyncScheduler.EnsureBackfill (horizon: the earliest active milestone's
// period start, at most CC_SYNC_MAX_DAYS days, by UTC day; nothing when the
// imported history already reaches it); scripts/syncs lists failed,
// waiting and stuck syncs and restarts one (Restart: a unique key, Resume
// takes over the unfinished job and its cursor).
//
// Reconciliation scheduling (SyncScheduler.ReconcileStep; the sweeper
// Lambda invoked with {"task":"reconcile"} every minute by Terraform's
// reconcile rule, the local stack's loop every ReconcileTick). Each user
// has a slot once per CC_RECONCILE_INTERVAL (default 168 h): a cycle walks
// the sparse users index (ListUsers over model.UserListShards, never a
// Scan) in user id order at the pace ceil(users × elapsed / interval),
// users counted once per cycle (CountUsers). A step comes only to the
// users whose slot came since the last step (at most
// DefaultReconcileBatch, stopping before its deadline) and saves the
// cursor (model.ReconcileCursor, RECONCILE#STRAVA / CURSOR, version-checked)
// after every page: a step that dies resumes from its last saved page, a
// page redone claims the same keys (at most one job per user per cycle), a
// concurrent step that saved first wins. A cycle that ends early waits
// for the interval; one that lags catches up a batch per step. At its slot
// a user costs its checks, cheapest first, and nothing is written unless
// it is reconciled:
//
//   - no active milestone whose period overlaps [now − CC_RECONCILE_DAYS,
//     now] (one Query of the user's milestones): skipped; such athletes are
//     never reconciled (nothing a reconciliation changes counts);
//   - its sync job runs or waits (the sync state): skipped, it lists anyway;
//   - its last reconciliation (reconciledAtUtc) is CC_RECONCILE_IDLE
//     (default 672 h) old, or it never had one: reconciled (the slow
//     round-robin);
//   - else reconciled only when a stored workout of the window (one LSI1
//     Query) that is not a tombstone has an activity id above
//     reconciledActivityId: Strava's ids grow with uploads, so the athlete
//     uploaded since (no per-webhook write is needed to know it);
//   - then a usable connection (GetItem), and the job is claimed.
//
// Bound: an edit Strava never pushes, to an activity started within the
// last CC_RECONCILE_DAYS (14) days, of an athlete with an active milestone
// overlapping that window, is caught within CC_RECONCILE_INTERVAL (7 days)
// plus one rate window when the athlete uploaded anything in that time,
// otherwise within CC_RECONCILE_IDLE (28 days) while the activity is still
// inside the window (an edit to an activity that leaves the window first
// is not caught); athletes without an active milestone are not reconciled.
// When the sync share cannot cover every reconciliation due, the jobs wait
// in priority order (above) and the bound stretches by the wait, which
// SyncsWaiting and `make syncs` show. ReconcileAll is an operator's and the
// tools' full round: every connected user at once, without the cursor and
// without the milestone and upload checks, keyed per interval slot.
//
// # Configuration and logs
//
// api: STRAVA_VERIFY_TOKEN, STRAVA_SUBSCRIPTION_ID, CC_WORKER_FUNCTION,
// CC_OUTBOX_LEASE; worker: STRAVA_CLIENT_ID, STRAVA_CLIENT_SECRET,
// STRAVA_BASE_URL, CC_TOKEN_KMS_KEY or CC_TOKEN_KEY,
// CC_ATHLETE_READS_PER_WINDOW, CC_STRAVA_WINDOW, CC_RETRY_BASE,
// CC_SYNC_BUDGET_SHARE, CC_RECONCILE_INTERVAL, CC_RECONCILE_IDLE; api:
// CC_SYNC_MAX_DAYS; sweeper: CC_RECONCILE_DAYS, CC_RECONCILE_INTERVAL,
// CC_RECONCILE_IDLE; api, worker and sweeper alike: CC_OUTBOX_SHARDS; all:
// DYNAMODB_ENDPOINT, CC_TABLE_PREFIX, CC_LOG_LEVEL (handlers/config). Logs are
// JSON with correlationId, eventType, athleteId, userId, activityId,
// idempotency, writeStatus; never tokens. Each job's "job finished" line
// carries its DynamoDB capacity and stravaReads; the worker Lambda also
// writes the job's Strava reads as the EMF metric StravaReads
// (WorkerMetricsNamespace) with dimension Class = ReadClass(job): webhook,
// backfill, reconcile or confirm (readmetric.go; the capacity dashboard's
// "Strava budget by class" widget). Token refreshes are not reads there.
//
// # Testing against the Strava simulator (test/stravasim)
//
// stravasim.New(Options{SubscriptionID: …}) (httptest, free port) or
// stravasim.Start(addr, …); Server.URL plays STRAVA_BASE_URL. Choose the
// granted scope or a denial with SetAuthorization; drive it with AddAthlete,
// PutActivity, UpdateActivity, DeleteActivity, SetPrivate (404 and unlisted
// while private, as for an activity:read grant), IssueTokens, RevokeAthlete,
// FailNext(endpoint, status, n), SetUsage; register the callback with
// Subscribe(ctx, callbackURL, verifyToken); send webhooks with Publish(ctx,
// ev) to the registered callback or Deliver(ctx, callbackURL, ev) where ev is
// ActivityEvent(…) / DeauthorizationEvent(…) (redelivers until 200, up to 3
// attempts); check a callback with VerifyCallback; assert on Stats()
// (refreshes, fetches, deliveries, …).
package ingest
