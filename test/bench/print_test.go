package bench

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
)

// result is everything one BenchmarkPipeline run measured.
type result struct {
	settings    settings
	baseline    baselineResult
	run         runResult
	growth      []growthRow
	workoutSize int
}

// The targets: the cost floor of one event at a history of costHistory
// workouts, the throughput of the U×E run as a share of raw PutItem, the lag
// growth, and what was measured before.
const (
	costHistory         = 2900
	targetRequests      = 8
	targetRCU           = 2
	targetWCU           = 8
	targetLagRatio      = 1.3
	targetThroughputPct = 10
	todayLifetimeRCU    = 292 // measured at H = 2900 before the log read was bounded
)

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

func (r result) print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	find := func(h int, kind string) (growthRow, bool) {
		for _, g := range r.growth {
			if g.history == h && g.kind == kind {
				return g, true
			}
		}
		return growthRow{}, false
	}
	b, run := r.baseline, r.run
	pct := 100 * run.eventsPerSec / b.perSec
	p("")
	p("== pipeline bench (test/bench; how to read it: go doc ./test/bench; figures: README \"Cost and benchmarks\") ==")
	p("PutItem baseline, same DynamoDB Local: %d workers, %d items in %.1f s = %.0f items/s",
		b.workers, b.items, b.elapsed.Seconds(), b.perSec)
	p("")
	p("U×E run: %d users × %d events = %d events through the API, %d concurrent senders, each user a monthly %d km goal (a part every %d km) and %.0f km runs",
		run.users, run.events/max(run.users, 1), run.events, run.senders, runGoalMetres/1000, runGoalMetres/1000/max(run.parts, 1), runEventMetres/1000.0)
	p("  throughput          %7.1f events/s = %.1f %% of PutItem (%d events in %.1f s, webhook → last milestone update)",
		run.eventsPerSec, pct, run.events, run.elapsed.Seconds())
	p("  webhooks refused    %7d (answers other than 200; each re-sent after 200 ms, as Strava re-sends)", run.refused)
	p("  lag webhook → milestone updated: p50 %s, p99 %s, max %s",
		ms(Percentile(run.lags, 0.5)), ms(Percentile(run.lags, 0.99)), ms(Percentile(run.lags, 1)))
	p("")
	p("  per event                 requests      RCU      WCU  | design minimum: requests   RCU   WCU")
	line := func(name string, got, min PerEvent) {
		p("  %-24s %9.2f %8.2f %8.2f  | %24.0f %5.1f %5.0f", name, got.Requests, got.RCU, got.WCU, min.Requests, min.RCU, min.WCU)
	}
	line("ingestion (api+worker)", run.ingest, run.minIngest)
	line("projection", run.project, run.minProject)
	line("total", run.ingest.Add(run.project), run.minIngest.Add(run.minProject))
	p("  requests per event by operation:")
	p("    ingestion:  %s", OpsPerEvent(run.ingestOps, run.events))
	p("    projection: %s", OpsPerEvent(run.projectOps, run.events))
	p("  every call to DynamoDB Local per event (all clients: stream reads, background sweeps and retries too): %.2f", run.calls)
	p("    %s", run.callsLine)
	p("  mean wait for one answer, by call (under the run's load): %s", run.waitsLine)
	p("")
	p("Growth: a user with H workouts (one a day) and one distance milestone; one warm-up event, then %d measured, sent one at a time",
		r.settings.growthEvents)
	p("  (monthly: the last %d days; rules: the same with rules, a tenth of its history manual entries; lifetime: since 2000; weekly: a weekly series begun %d weeks ago, the event in this week;", monthDays, seriesWeeks)
	p("   \"read\" = workouts the design needs to read, capped at 3000: a monthly event re-reads its UTC week, its other weeks are sums kept with the milestone;")
	p("   a projected workout is %d bytes in LSI1)", r.workoutSize)
	p("  (batch p50: how long the projector's batch ran, the part of the lag that can grow with H)")
	if n := r.settings.growthEvents + 1; n > ingest.CreatesBeforeGather {
		p("  (%d creates of one athlete: those after the %dth in a rate window are gathered, so their lag is the gather grid's phase)",
			n, ingest.CreatesBeforeGather)
	}
	p("  %5s %-9s %5s | %8s %7s %7s %9s %9s | %-17s | %-17s | %s", "H", "milestone", "read", "requests", "RCU", "WCU", "lag p50",
		"batch p50", "ingest req/RCU/WCU", "project req/RCU/WCU", "design min req/RCU/WCU")
	for _, g := range r.growth {
		tot, min := g.ingest.Add(g.project), g.minIngest.Add(g.minProject)
		p("  %5d %-9s %5d | %8.2f %7.2f %7.2f %9s %9s | %4.1f %5.1f %5.1f  | %4.1f %5.1f %5.1f  | %4.0f %5.1f %4.0f",
			g.history, g.kind, g.read, tot.Requests, tot.RCU, tot.WCU, ms(Percentile(g.lags, 0.5)), ms(Percentile(g.batches, 0.5)),
			g.ingest.Requests, g.ingest.RCU, g.ingest.WCU, g.project.Requests, g.project.RCU, g.project.WCU,
			min.Requests, min.RCU, min.WCU)
	}
	if g, ok := find(costHistory, monthly); ok {
		p("  H=%d monthly, requests per event by operation:", costHistory)
		p("    ingestion:  %s", OpsPerEvent(g.ingestOps, g.events))
		p("    projection: %s", OpsPerEvent(g.projectOps, g.events))
	}
	p("")
	p("Targets")
	// why follows a missed target with the reasons below.
	target := func(name string, got float64, unit string, verdict string, why ...string) {
		p("  %-52s %9.2f %-4s %s", name, got, unit, verdict)
		if strings.HasPrefix(verdict, "MISSED") {
			for _, w := range why {
				p("      why: %s", w)
			}
		}
	}
	runTot := run.ingest.Add(run.project)
	if g, ok := find(costHistory, monthly); ok {
		tot := g.ingest.Add(g.project)
		at := fmt.Sprintf("H=%d monthly", costHistory)
		target("requests/event, "+at+" ≤ 8", tot.Requests, "", Verdict(tot.Requests, targetRequests, true), whyRequests)
		// The target is 2: the guard's read and a log that fits one read
		// unit. Each further 4 KB of the period's workouts is the design's
		// own read, so the design floor is printed beside it.
		target("RCU/event, "+at+" ≤ 2", tot.RCU, "", Verdict(tot.RCU, targetRCU, true),
			whyRCU, fmt.Sprintf(whyRCULog, g.read, r.workoutSize, g.minProject.RCU-1))
		target(fmt.Sprintf("RCU/event, %s ≤ its design floor, 1 + its log's %.0f", at, g.minProject.RCU-1), tot.RCU, "",
			Verdict(tot.RCU, targetRCU-1+(g.minProject.RCU-1), true), whyRCU)
		target("WCU/event, "+at+" ≤ 8", tot.WCU, "", Verdict(tot.WCU, targetWCU, true), whyWCU)
	} else {
		p("  H=%d not in CC_BENCH_HISTORY: the per-event targets are not measured", costHistory)
	}
	// perEvent checks one growth row's cost of an event against the targets.
	perEvent := func(kind, at string, whyRCUs ...string) {
		if g, ok := find(costHistory, kind); ok {
			tot := g.ingest.Add(g.project)
			target("requests/event, "+at+" ≤ 8", tot.Requests, "", Verdict(tot.Requests, targetRequests, true), whyRequests)
			target("RCU/event, "+at+" ≤ 2", tot.RCU, "", Verdict(tot.RCU, targetRCU, true), append([]string{whyRCU}, whyRCUs...)...)
			target("WCU/event, "+at+" ≤ 8", tot.WCU, "", Verdict(tot.WCU, targetWCU, true), whyWCU)
		}
	}
	perEvent(withRules, fmt.Sprintf("H=%d monthly with rules", costHistory))
	perEvent(streakKind, fmt.Sprintf("H=%d, a %d-day streak", costHistory, streakDays))
	perEvent(weekly, fmt.Sprintf("H=%d weekly series, %d past periods", costHistory, seriesWeeks), whySeriesRCU)
	target("requests/event, U×E run ≤ 8", runTot.Requests, "", Verdict(runTot.Requests, targetRequests, true),
		whyRequests, whyFlood, whyMint)
	top := 0
	for _, g := range r.growth {
		top = max(top, g.history)
	}
	for _, kind := range []string{monthly, lifetime} {
		g10, ok10 := find(10, kind)
		gTop, okTop := find(top, kind)
		if !ok10 || !okTop || top == 10 {
			continue
		}
		l10, lTop := Percentile(g10.lags, 0.5), Percentile(gTop.lags, 0.5)
		ratio := float64(lTop) / float64(max(l10, time.Millisecond))
		b10, bTop := Percentile(g10.batches, 0.5), Percentile(gTop.batches, 0.5)
		why := whyLag
		if kind == lifetime {
			why = whyLagLifetime
		}
		target(fmt.Sprintf("lag p50 H=%d / H=10, %s ≤ 1.3×", top, kind), ratio, "×",
			Verdict(ratio, targetLagRatio, true)+fmt.Sprintf(" (%s vs %s)", ms(lTop), ms(l10)),
			fmt.Sprintf(why, top, ms(bTop), ms(b10), gTop.read, g10.read, len(gTop.lags)))
	}
	reqs := runTot.Requests * run.eventsPerSec
	target("throughput ≥ 10 % of PutItem", pct, "%", Verdict(pct, targetThroughputPct, false),
		fmt.Sprintf(whyThroughput, reqs, b.perSec, runTot.Requests, 100/max(runTot.Requests, 1)))
	target("webhooks refused = 0", float64(run.refused), "", Verdict(float64(run.refused), 0, true))
	if g, ok := find(costHistory, lifetime); ok {
		tot := g.ingest.Add(g.project)
		target(fmt.Sprintf("RCU/event, H=%d lifetime no worse than before (292)", costHistory), tot.RCU, "",
			Verdict(tot.RCU, todayLifetimeRCU, true))
	}
	p("")
}

// The reasons printed under a missed target (the targets ask by how much
// and why). The figures they cite are the measured ones; the rest is the
// design's accounting (model/store/metering/meter.go, handlers/ingest/cost_test.go).
const (
	whyWCU = "durability costs 7 WCU: the outbox claim and its settle each write the item and its Pending index " +
		"entry (2 + 2; without them an accepted event can be lost), the workout and its LSI1 entry (2; the " +
		"date-ordered key that bounds reads), the progress update (1); the worker's routine audit entry adds 1"
	whyRCU = "the projector reads the guard, milestones and awards in one strongly consistent Query (1 RCU under " +
		"4 KB) and the milestone's period from LSI1 (1 RCU per 4 KB of projected workouts)"
	whyRCULog = "the event's week holds %d workouts of %d bytes each in LSI1: %.0f read units strongly consistent " +
		"(the period's other weeks are sums kept with the milestone)"
	whySeriesRCU = "a series event reads its period's item and awards in one more Query (1 RCU): they are kept " +
		"outside the range every event reads, so that a series' past periods never add to an event's read; " +
		"2 would need the current period inside that range, or reads that are not strongly consistent"
	whyRequests = "a warm event makes 7 requests: claim; workout, audit entry, settle; guard with milestones, " +
		"bounded log, progress. With the per-athlete read cap on (make run; the bench turns it off) an athlete's " +
		"4th and later reads in a window add 1 UpdateItem and 1 WCU each"
	whyFlood = "each U×E user's first event resolves athlete → user, reads its token and the shared rate " +
		"state (GetItem); beyond 3 creates in a window the worker coalesces from its own memory, no request"
	whyMint = "a U×E user mints a part every 10 km: each mint adds a TransactWriteItems of award, " +
		"audit and progress (2 WCU per item) and a Query of the audit entries already written"
	whyLag = "the projector's batch took p50 %[2]s at H=%[1]d vs %[3]s at H=10 (%[4]d vs %[5]d workouts read); the " +
		"rest of the lag is ingestion and the stream poll wait (0–100 ms, random phase), noisy over %[6]d events"
	whyLagLifetime = "a lifetime milestone reads every workout up to the guardrail, so its batch grows with H by " +
		"design (p50 %[2]s at H=%[1]d vs %[3]s at H=10; %[4]d vs %[5]d workouts read; %[6]d events); of lifetime " +
		"milestones only no worse than before is asked (see the RCU line)"
	whyThroughput = "the pipeline made %.0f requests/s against %.0f PutItem/s: its requests are heavier than a " +
		"plain PutItem (index entries, conditions, queries, transactions) and its own Go code (API, worker, " +
		"projector, stream reader, senders) shares the machine's cores with DynamoDB Local; even at PutItem " +
		"weight, %.1f requests per event would cap it near %.0f %%: requests per event are what bound it"
)
