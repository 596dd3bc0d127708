// # Triggers
//
// Classify decodes each stream record once, at the boundary:
//
//	INSERT or MODIFY of USER#…/WORKOUT#STRAVA#… (a 404 is a MODIFY
//	  setting isDeleted, a revival one clearing it)             → recompute the user
//	REMOVE of USER#…/WORKOUT#STRAVA#… (DynamoDB's TTL, principal
//	  dynamodb.amazonaws.com, 30 days after a confirmed
//	  deauthorization; or an account deletion's sweep)          → recompute the user
//	INSERT of a milestone                                       → recompute the user
//	MODIFY of a milestone whose definition changed              → recompute the user
//	MODIFY of a milestone with the same definition (the projector's own
//	  writes, writtenBy = projector), award items, other REMOVEs, anything else → ignore
//	a workout or milestone record that cannot be decoded (bad key, bad
//	  image, newer schemaVersion)                               → park
//
// The Lambda's event source mapping applies a coarser filter on the same
// lines (workout key prefix with INSERT, MODIFY or REMOVE, milestone
// INSERT, milestone MODIFY not writtenBy = projector; terraform/modules/commitcollect, checked by
// test/terraform against model.PrefixWorkoutStrava, model.EntityMilestone
// and model.WriterProjector), so the projector's own writes never invoke it;
// Classify repeats them because a replay or redrive reads the unfiltered
// stream.
//
// # Grouping by user
//
// Streams order records per item, not per user, so a record is never a delta
// to add: it is a reason to recompute that user's milestones from the log. A
// batch is grouped by user; each user is recomputed once however many of their
// records the batch holds, and up to 4 users (Options.Concurrency) run in
// parallel. One recompute is: read the user's milestones and award items (one
// strongly consistent Query, begins_with(SK, "MILESTONE#"); no milestones
// means nothing else is read), then the workout log inside the milestones'
// periods (store.WorkoutLog, the guardrail below), then projections.Project
// per milestone. A milestone whose projection did not change and has no award
// to mint is not written. Milestones are read before the log on purpose: a
// concurrent recompute that wrote after our read makes our write conflict,
// and one that wrote before it saw no newer log than ours, so the last write
// always includes every workout written before it.
//
// # The 3000-workout guardrail
//
// One recompute reads at most model.MaxWorkoutsToInspect (3000) workouts,
// and only those started inside the user's milestone periods (a milestone
// without an end reads to today), from LSI1 newest first, strongly
// consistent (see package store). So a new activity always counts, and
// whatever the guardrail leaves out is older than everything it keeps. A
// milestone whose period reaches back past that cut gets truncated = true and
// exactFromUtc (its value counts the workouts started from then on); the
// consumer logs a warning, writes PROJECTION_TRUNCATED and emits
// MilestonesTruncated, which Terraform alarms on. Example: an athlete with
// 8000 workouts gets exact monthly and yearly totals; a lifetime milestone
// counts the newest 3000 and is marked truncated.
//
// # Optimistic version
//
// Each milestone carries version. The write is conditioned on the version
// that was read and sets version + 1 (store.WriteProjection). On ErrConflict
// (another recompute got there first) or ErrRetryable (transaction conflict,
// throttling) the consumer re-reads and recomputes the whole user, up to 8
// attempts with full-jitter backoff (20 ms … 1 s), then reports the user's
// records failed.
//
// # Awards in one transaction
//
// A write that mints parts is a single TransactWriteItems: the
// version-checked milestone update plus one attribute_not_exists Put per award
// item MILESTONE#{id}#AWARD#{i} and per AWARD_MINTED audit entry. Each award
// copies the part's name and metadata from MODEL#{modelId}/PART#{i} and
// records the activity and correlation id of the workout that tipped it
// (walking the counted workouts in (startDateUtc, activityId) order). Either
// progress and awards land together or nothing does; an award that already
// exists cancels the transaction as a conflict (re-read).
//
//   - Never unaudited. The AWARD_MINTED entry's key is deterministic,
//     AUDIT#{milestone createdAtUtc}#mint-{milestoneId}-{part}
//     (model.AwardMintedAuditKey), so a retry writes the same key and never
//     audits twice; a lost award item is minted again without a second entry.
//     Other audit entries stay best effort.
//   - Over 100 items (≥ 50 parts at once): the mint is split into
//     version-checked transactions; each stores the prefix it completes
//     (Plan), so a crash between them leaves every award audited and counted,
//     and the next recompute mints the rest.
//   - Only what is justified. A part counts when the log earns it, or its
//     award item exists with its AWARD_MINTED entry (or is older than the
//     90-day audit TTL). A shrinking log never takes such an award back; an
//     awardedParts raised with nothing behind it is lowered (never minted up
//     to), status is completed only when every part is justified, and verify
//     reports it as drift. Parts counted and justified whose award item is
//     missing are minted again, so a lost award repairs itself.
//   - Limits: entries written before this scheme (keyed at the mint's second)
//     are still found; an older award whose entry was lost counts only while
//     the log earns it. Hand-edited award and audit items are trusted.
//
// The transaction's ClientRequestToken is Token: 32 hex characters of a
// SHA-256 over user, milestone, expected version, the new projection and each
// award's part and activity, and no timestamp. The same computation retried
// (by the SDK, or by a redelivered batch within DynamoDB's 10-minute
// idempotency window) sends the same token and is applied once; the same
// token with a different request (IdempotentParameterMismatch) is treated as
// a conflict and re-read. Tokens are not scoped to a table (a transaction can
// span tables): one DynamoDB Local shares them across all its tables, which
// matters to tests that reuse ids.
//
// # Partial batch response
//
// Handle never returns an error. When a user's recompute fails, all of that
// user's records are marked failed and the response
// (events.DynamoDBEventResponse) names the sequence number of the first
// failed record in the batch. Lambda checkpoints everything before it and
// redelivers from there (records after it are recomputed again, which is
// harmless); other users in the same batch are still processed. In AWS the
// mapping retries with bisect and bounded record age and then sends the
// failed range to the projector dead-letter queue (`make redrive
// ARGS="--queue-url …"`).
//
// # Poison records are parked, not skipped
//
// A record that can never be processed (undecodable, written by a newer
// schema), and every record of a user whose log the code cannot read
// (ErrUnsupportedSchema, ErrInvalid), is written to the main table under
// PARKED#PROJECTOR#{shard} / {eventId} (model.ParkedKey) with the reason, the full record as JSON and
// its correlation id, and audited (PROJECTOR_RECORD_PARKED). It is then not
// reported failed, so it cannot block the shard. If parking itself fails,
// the record is reported failed instead, so nothing is lost. `make redrive`
// (scripts/rebuildkit) processes parked records again.
//
// # Audit entries
//
// They go to CommitCollectAudit under USER#{userId} (sort key
// AUDIT#{unix seconds}#{requestId}), findable by correlation id (GSI1) and by
// event type and month (GSI2), and expire after 90 days. The consumer writes
// MILESTONE_PROGRESS_UPDATED (details: version, value, workouts counted,
// awarded parts, status), AWARD_MINTED (one per part, in the mint
// transaction, under the correlation id of the workout that tipped it, so an
// athlete's webhook can be followed to the awards it caused),
// MILESTONE_COMPLETED, PROJECTION_TRUNCATED and PROJECTOR_RECORD_PARKED. The
// request id is derived from what happened (event, user, milestone, version,
// part), and entries are conditional puts. A failed audit write is logged and
// never fails the projection, except AWARD_MINTED: it is part of the mint.
//
// # Metrics
//
// One CloudWatch Embedded Metric Format line per batch (namespace
// CommitCollect/Projector): RecordsSeen, RecordsIgnored, RecordsParked,
// RecordsFailed, UsersProjected, ConflictsRetried, AwardsMinted,
// ProjectionLag (age of the oldest record in the batch, ms), BatchDuration
// and MilestonesTruncated (alarmed when above 0).
//
// # Benchmarks
//
// Handle/users=1/records=100: one batch of 100 workout INSERT records read
// from the real stream, all for one new user (one recompute, the milestone
// completed, 10 awards minted in one transaction, audit entries).
// Handle/users=10/records=100: the same batch size over 10 new users (10
// recomputes, 4 at a time, one award each). RecomputeUser3000: re-projecting
// one user at the guardrail (two strongly consistent queries, the
// projection, a version-checked write; one workout changes before each op so
// every op writes). records/s and users/s are what one projector instance
// sustains when batches arrive back to back; workouts/s is the log
// throughput of a guardrail recompute.
package consumer
