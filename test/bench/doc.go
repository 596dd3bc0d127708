// Package bench is the end-to-end bench `make bench` runs
// (BenchmarkPipeline; `make bench BENCH=Pipeline` runs it alone): the whole
// pipeline of the local stack (scripts/runkit, what `make run` runs) on
// the same DynamoDB Local as every other benchmark, driven through its API
// as Strava drives it, with the consumed capacity of every DynamoDB call
// counted by the store's meter (model/store/metering/meter.go) per component
// (runkit.Stack.Capacity: api, worker, projector).
//
// What it does, in order, and how to read what it prints:
//
//  1. PutItem baseline: 8 goroutines put workout-sized items into a plain
//     table (no index, no stream) of the same DynamoDB Local. Items/s is the
//     ceiling of this machine and this DynamoDB Local right now; the
//     pipeline's throughput is read as a fraction of it, never as an
//     absolute (the machine is shared: absolute rates move by 2× between
//     runs, the ratio much less).
//  2. U×E run: U users (CC_BENCH_USERS, default 100), each with one monthly
//     (last 30 days) goal of 100 km (the commonest challenge; a part of its
//     10 is minted every 10 km), and E new 5 km runs each (CC_BENCH_EVENTS,
//     default 3: many athletes, a few events each, as an evening's uploads
//     arrive; CC_BENCH_USERS=10 CC_BENCH_EVENTS=30 crowds each athlete, so
//     most creates are gathered) announced by webhook POSTs from S
//     concurrent senders (CC_BENCH_SENDERS, default 8), interleaved across
//     users. A POST answered anything but 200 counts as
//     refused and is re-sent 200 ms later, as Strava re-sends. Printed:
//     events/s (events ÷ time from the first POST to the last milestone
//     update) and its ratio to the baseline; refused answers; lag per event
//     from its POST to the end of the projector batch that recomputed the
//     milestone with its workout (p50, p99, max; the stream is polled every
//     100 ms as in make run, so a lone event's lag carries up to 100 ms of
//     poll wait); requests, RCU and WCU per event for ingestion (api +
//     worker) and projection, next to the design minimum (DesignMinimum,
//     justified in report.go), and the same split by DynamoDB operation.
//     Per-event projection cost can fall below the minimum: one batch
//     recomputes a user once for all of its events in the batch.
//     Then every call the stack's AWS clients made per event, by
//     operation and table (awsrecord.Tally: the stream reader's and retries
//     too), what DynamoDB Local served, and the mean wait for one answer of
//     each: under load, where DynamoDB Local's time goes.
//  3. Growth table: for H in CC_BENCH_HISTORY (default 10,100,1000,2900), a
//     user with H workouts (one a day, backwards from yesterday) and one
//     milestone, monthly, monthly with rules (a tenth of the history manual
//     entries), lifetime (since 2000) or a weekly series, with a target no history
//     reaches (so no award is minted), and once, at the largest H, a long
//     life: a weekly series of 1,040 weeks of a user with 50,000 awards; then CC_BENCH_GROWTH_EVENTS events
//     (default 2) sent one at a time after one unmeasured warm-up event (the
//     worker has seen the athlete; with it, 3 creates: an athlete's 4th
//     create in a rate window would be gathered, and its lag would be the
//     gather grid's, not the history's), each waited for until the stack is
//     idle. Per event: requests, RCU, WCU (total and split), lag p50, batch
//     p50 (how long the projector batch that projected it ran: the part of
//     the lag that can grow with H; the rest is ingestion and stream poll
//     wait), and "read", the workouts the design has to read (those in the
//     period, at most 3000; for the monthly milestone those of the event's
//     UTC week, its week sums holding the others). A cost that grows with H
//     for the monthly milestone means the projector reads outside that.
//  4. Targets beside the figures, each "met (x to spare)" or
//     "MISSED by x (r× the limit)", a missed one followed by "why:" lines
//     (the reasons, with the measured figures they cite). They are printed,
//     not asserted.
//
// The bench fails only when work was not done: an event never projected
// within CC_BENCH_TIMEOUT_S (default 180), a milestone not counting its
// workouts, the stack never idle. Capacity is what DynamoDB Local reports
// through the meter, corrected where Local departs from AWS's billing (a
// transaction's items; the log query asks LSI1 for its projection, which
// Local bills like AWS; see model/store/metering/meter.go).
// Lag and throughput are of this machine; requests and units are what AWS
// would bill for the same calls.
package bench
