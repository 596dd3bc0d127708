// Package chaos is the project's chaos suite: it drives `make run`'s
// pipeline (the scripts/run binary as a real child process) through crashes,
// races, floods and Strava outages, and measures whether the promises held:
// nothing Strava told us about and we acknowledged is lost, no award is
// doubled or unaudited, and the stored state agrees with its own log and
// with Strava.
//
// It uses only the system's external interfaces, so it keeps working as the
// internals change:
//
//   - the pipeline is scripts/run, built into a temporary folder, started
//     with a CC_DATA_DIR, DYNAMODB_ENDPOINT (a DynamoDB Local the harness
//     runs), STRAVA_BASE_URL (a Strava simulator the harness runs, see
//     scripts/stravasim) and CC_STRAVA_TIMEOUT; kill -9 and Ctrl-C go to that
//     process only, so DynamoDB Local and Strava survive it;
//   - athletes link their Strava account through the API's OAuth login and
//     create milestones through the BFF (/v1/milestones), as users do;
//   - events reach POST /webhooks/strava from the simulator, which behaves
//     like Strava's sender: at most 3 attempts, only while the answer is not
//     200 within 2 s;
//   - Strava's faults (slow and stale answers, 5xx, timeouts, a spent read
//     window) are the simulator's;
//   - figures are read from the tables through model/store and recomputed
//     with the projector's own code (the logic of `make verify`).
//
// Every scenario prints one line of Figures; TestChaos (chaos_test.go) runs
// the reduced set in `make test` and the full set in `make chaos`.
//
// # Scenarios and figures
//
// Scenarios: kill -9 after accepting events, Ctrl-C with a backlog on a slow
// Strava, kill -9 twice while awards are minted (a streak of two days among
// each user's milestones),
// duplicate/reordered/delete-first/slow-stale deliveries, a 429 with the
// read budget spent, 5xx and timeouts, a forged flood, and the unsigned
// lifecycle (a forged delete and a forged deauthorization, an
// activity made private and public again, a revoke whose event arrives after
// the reconnect, a confirmed revoke and a reconnect within the retention
// window, DELETE /v1/me while a slow fetch for the user is in flight; its
// violations are the lifecycle figure, see lifecycle.go), a heavy import of
// old-dated activities beside others' uploads (heavyimport.go; in `make
// chaos` only), and the noisy neighbours (noisy.go). The simulator's
// faults are stravasim.Fault and SpendReadWindow (control API /_sim/faults,
// /_sim/ratelimit/spend).
//
// Each scenario prints one line — accepted written lost dupAwards unaudited
// driftLog driftStrava lifecycle (then informational dupAnswers refused parked reads
// took) — and a total; it fails unless lost, duplicate awards, awards
// without AWARD_MINTED, drift against the log (`make verify`'s recompute),
// drift against Strava and broken lifecycle promises are all 0. `make test` runs the reduced sizes
// side by side (CC_CHAOS=reduced, about a minute and a half); `make chaos`
// the full set one at a time (CC_CHAOS=full); CHAOS_ONLY=<scenario> picks one.
//
// The child runs on its own table prefix and CC_DATA_DIR and gets
// CC_STRAVA_TIMEOUT=4s, CC_STRAVA_WINDOW=10s, CC_OUTBOX_LEASE=2s and
// CC_RETRY_BASE=500ms so deferred work settles in seconds; a scenario counts
// as settled after nothing changed for a lease plus a sweep (a window for the
// budget and flood scenarios), bounded by 2 minutes. Each child's log is
// run.log in its data dir.
//
// Figures of a full run (make chaos, one run, 2 cores): every counter above
// 0; honest uploads beside a forged flood counted within 15.6 s (target 150
// s), a bulk upload of 250 in 12–13 s with 6 reads, forged creates 0.045
// reads each and forged edits 0.030, nothing pending 43 s after the flood
// (a recheck per forger aside); 2,000 old-dated imports behind 1,000
// activities in 3.6 windows with 22 reads; 640 awards of 640 through two
// kill -9s while minting (that scenario alone, since streaks: 840 of 840,
// each audited).
package chaos
