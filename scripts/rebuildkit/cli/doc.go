// Package cli is the operator commands over rebuildkit: their flags,
// output and exit status. scripts/rebuild calls them, one a subcommand
// (rebuild, verify, replay, redrive), with the wiring of
// scripts/rebuildkit/wire.
//
// # The commands
//
// Each works against DynamoDB Local (DYNAMODB_ENDPOINT=http://localhost:8000)
// or AWS (default credential chain: AWS_PROFILE, AWS_REGION), with
// --table-prefix (default $CC_TABLE_PREFIX). Run them with
// `make <cmd> ARGS="…"` (built to .cache/bin and run directly so the exit
// status survives) or `go run ./scripts/rebuild <cmd>`; ARGS=--help lists
// every flag.
//
//	verify   recompute in memory, write nothing; print every milestone whose stored
//	         progress, workouts counted, awarded parts, status, truncation or award
//	         items differ from the log (--json for machines).
//	         Exit 0 clean · 1 drift · 2 could not verify.
//	rebuild  the same recompute, writing what differs (optimistic version check,
//	         awards minted in one transaction, audited). Exit 0 · 2 if a user failed.
//	replay   read the table's stream (--from trim-horizon|latest, --checkpoint FILE)
//	         and feed the projector in process, or the deployed Lambda
//	         (--invoke-function NAME, partial batch responses honoured); --user ID
//	         keeps one user's records; --dry-run prints what would change.
//	         Exit 0 · 2 on errors or records given up on.
//	redrive  process again what failure paths set aside: locally the records parked
//	         under PARKED#PROJECTOR / PARKED#WORKER (--source); in AWS a dead-letter
//	         queue (--queue-url, with --invoke-worker NAME for the worker's DLQ).
//	         Exit 0 · 2 if anything was kept.
//
// Users are selected with --user ID (repeatable), --users-file FILE (one id
// per line) or --all, which walks the sparse users index (GSI2, 8 shards,
// paginated with a user-id cursor), never a Scan. --concurrency N (default 4)
// and --rps R (users started per second, default 20, 0 = unlimited) bound the
// load. A terminal gets a progress bar with ETA; a pipe gets a plain line
// every 5 s.
//
// # Output and resumption
//
// verify prints one drift line per wrong value, e.g.
// `drift: user=u1 milestone=m1 progressValue: stored=12345 recomputed=56000`;
// missing award items show as `award: stored=missing recomputed=part 0`. Its
// JSON (a scheduled `verify --all --json` is the drift alarm) is
// {"clean":…, "drift":[{userId, milestoneId, field, stored, recomputed}…],
// "summary":{…}}.
//
// rebuild is safe while the live projector runs: every write is
// version-checked and retried on conflict, awards are never taken away. With
// --state FILE a killed or Ctrl-C'd run continues where it stopped: the file
// holds the shard cursors and completed users, a re-run never redoes a
// completed user and retries failed users first. The state is saved at most
// once a second and on Ctrl-C / SIGTERM, so after a kill -9 up to a second of
// users is recomputed again (harmless). Users created after an --all run
// passed their place in the index are the live projector's business. The
// summary says users, milestones changed, awards minted, conflicts retried,
// errors; a second rebuild reports milestonesChanged=0. Milestone items
// written by a newer schema are left alone (fail closed): verify and rebuild
// name the user and exit 2. On a live system verify can show a drift line
// for a workout written seconds ago (the projector has not caught up yet):
// verify that user again before acting.
//
// redrive in AWS: the worker's DLQ holds async-failure records (the Job is
// re-run in the deployed worker, which re-fetches the activity's current
// state); the projector's DLQ holds stream on-failure records naming a shard
// and a sequence-number range, which is re-read from the stream and its users
// recomputed. A range older than the stream's 24 h is gone: the message is
// kept and the command says to `verify --all` and `rebuild --user` the users
// it names. What succeeds is unparked / deleted; what fails again stays, with
// the reason. Locally redrive groups parked records by user, recomputes each
// user once and unparks the records whose user succeeded.
//
// replay: the stream keeps 24 hours; older history is only reachable through
// rebuild. DynamoDB Streams throttles more than two readers per shard and the
// live projector is one of them: run one replay at a time (the reader backs
// off on LimitExceeded). Both warnings are printed at start. Deployed names
// are commitcollect-<environment>-… (`terraform output function_names
// dlq_urls`).
package cli
