package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// result is everything one BenchmarkPipeline run measured.
type result struct {
	settings    settings
	baseline    baselineResult
	run         runResult
	growth      []growthRow
	workoutSize int
}

// The targets and what was measured before.
const (
	targetRCUMonthly3000 = 10
	targetWCU            = 5
	targetRequests       = 7
	targetLagRatio       = 1.3
	targetThroughputPct  = 15
	todayLifetimeRCU     = 292 // measured at H = 2900 before the change
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
	p("== pipeline bench (test/bench; how to read it: README \"Reading make bench\", package doc) ==")
	p("PutItem baseline, same DynamoDB Local: %d workers, %d items in %.1f s = %.0f items/s",
		b.workers, b.items, b.elapsed.Seconds(), b.perSec)
	p("")
	p("U×E run: %d users × %d events = %d events through the API, %d concurrent senders, one monthly milestone each",
		run.users, run.events/max(run.users, 1), run.events, run.senders)
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
	p("")
	p("Growth: a user with H workouts (one a day) and one distance milestone; %d events each, sent one at a time",
		r.settings.growthEvents)
	p("  (monthly: the last %d days; lifetime: since 2000; \"read\" = workouts the design needs to read, capped at 3000;", monthDays)
	p("   a projected workout is %d bytes in LSI1)", r.workoutSize)
	p("  (batch p50: how long the projector's batch ran, the part of the lag that can grow with H)")
	p("  %5s %-9s %5s | %8s %7s %7s %9s %9s | %-17s | %-17s | %s", "H", "milestone", "read", "requests", "RCU", "WCU", "lag p50",
		"batch p50", "ingest req/RCU/WCU", "project req/RCU/WCU", "design min req/RCU/WCU")
	for _, g := range r.growth {
		tot, min := g.ingest.Add(g.project), g.minIngest.Add(g.minProject)
		p("  %5d %-9s %5d | %8.2f %7.2f %7.2f %9s %9s | %4.1f %5.1f %5.1f  | %4.1f %5.1f %5.1f  | %4.0f %5.1f %4.0f",
			g.history, g.kind, g.read, tot.Requests, tot.RCU, tot.WCU, ms(Percentile(g.lags, 0.5)), ms(Percentile(g.batches, 0.5)),
			g.ingest.Requests, g.ingest.RCU, g.ingest.WCU, g.project.Requests, g.project.RCU, g.project.WCU,
			min.Requests, min.RCU, min.WCU)
	}
	if g, ok := find(3000, monthly); ok {
		p("  H=3000 monthly, requests per event by operation:")
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
	if g, ok := find(3000, monthly); ok {
		tot := g.ingest.Add(g.project)
		target("RCU/event, H=3000 monthly ≤ 10", tot.RCU, "", Verdict(tot.RCU, targetRCUMonthly3000, true))
		target("WCU/event, H=3000 monthly ≤ 5", tot.WCU, "", Verdict(tot.WCU, targetWCU, true), whyWCU)
		target("requests/event, H=3000 monthly ≤ 7", tot.Requests, "", Verdict(tot.Requests, targetRequests, true),
			whyRequests, fmt.Sprintf(whyCold, r.settings.growthEvents))
	} else {
		p("  H=3000 not in CC_BENCH_HISTORY: RCU/WCU/requests targets at H=3000 not measured")
	}
	target("WCU/event, U×E run ≤ 5", runTot.WCU, "", Verdict(runTot.WCU, targetWCU, true), whyWCU, whyMint)
	target("requests/event, U×E run ≤ 7", runTot.Requests, "", Verdict(runTot.Requests, targetRequests, true),
		whyRequests, whyFlood, whyMint)
	for _, kind := range []string{monthly, lifetime} {
		g10, ok10 := find(10, kind)
		g3000, ok3000 := find(3000, kind)
		if !ok10 || !ok3000 {
			continue
		}
		l10, l3000 := Percentile(g10.lags, 0.5), Percentile(g3000.lags, 0.5)
		ratio := float64(l3000) / float64(max(l10, time.Millisecond))
		b10, b3000 := Percentile(g10.batches, 0.5), Percentile(g3000.batches, 0.5)
		why := whyLag
		if kind == lifetime {
			why = whyLagLifetime
		}
		target(fmt.Sprintf("lag p50 H=3000 / H=10, %s ≤ 1.3×", kind), ratio, "×",
			Verdict(ratio, targetLagRatio, true)+fmt.Sprintf(" (%s vs %s)", ms(l3000), ms(l10)),
			fmt.Sprintf(why, ms(b3000), ms(b10), g3000.read, g10.read, len(g3000.lags)))
	}
	reqs := runTot.Requests * run.eventsPerSec
	target("throughput ≥ 15 % of PutItem", pct, "%", Verdict(pct, targetThroughputPct, false),
		fmt.Sprintf(whyThroughput, reqs, b.perSec, runTot.Requests, 100/max(runTot.Requests, 1)))
	target("webhooks refused = 0", float64(run.refused), "", Verdict(float64(run.refused), 0, true))
	if g, ok := find(3000, lifetime); ok {
		tot := g.ingest.Add(g.project)
		target("RCU/event, H=3000 lifetime no worse than today (292)", tot.RCU, "", Verdict(tot.RCU, todayLifetimeRCU, true))
	}
	p("")
}

// The reasons printed under a missed target (the targets ask by how much
// and why). The figures they cite are the measured ones; the rest is the
// design's accounting (model/store/capacity/meter.go, handlers/ingest/cost_test.go).
const (
	whyWCU = "durability costs 7 WCU before any audit: the outbox claim and its settle each write the item and " +
		"its Pending index entry (2 + 2; without them an accepted event can be lost), the workout and its LSI1 entry " +
		"(2; the date-ordered key that bounds reads), the progress update (1); the worker's and the projector's " +
		"routine audit entries add 1 each (no index keys left to drop)"
	whyRequests = "a warm event makes 8 requests: claim; workout, audit entry, settle; milestones, bounded log, " +
		"progress, audit entry. Folding the worker's three writes (or the projector's two) into one " +
		"TransactWriteItems would save requests but bill 2 WCU per item in it, so it was not done. With the " +
		"per-athlete read cap on (make run; the bench turns it off) the worker adds 1 UpdateItem and 1 WCU"
	whyCold = "each growth user is new: its first event resolves athlete → user, reads its token and the " +
		"shared rate state (GetItem); over %d events that is about 1 request per event more than warm"
	whyFlood = "the U×E run sends 30 creates per athlete within one 15-minute window: beyond 3 the worker takes " +
		"it for a flood and checks each create for an earlier fetch (about 1 GetItem per event)"
	whyMint = "U×E milestones mint 10 parts over 30 events: each mint adds a TransactWriteItems of award, " +
		"audit and progress (2 WCU per item) and a Query of the audit entries already written"
	whyLag = "the projector's batch took p50 %s at H=3000 vs %s at H=10 (%d vs %d workouts read); the rest of " +
		"the lag is ingestion and the stream poll wait (0–100 ms, random phase), noisy over %d events"
	whyLagLifetime = "a lifetime milestone reads every workout up to the guardrail, so its batch grows with H by " +
		"design (p50 %s at H=3000 vs %s at H=10; %d vs %d workouts read; %d events); the issue asks of lifetime " +
		"milestones only to be no worse than before (see the RCU line)"
	whyThroughput = "the pipeline made %.0f requests/s against %.0f PutItem/s: its requests are heavier than a " +
		"plain PutItem (index entries, conditions, queries, transactions) and its own Go code (API, worker, " +
		"projector, stream reader, senders) shares the 2 cores with DynamoDB Local; even at PutItem weight, " +
		"%.1f requests per event would cap it near %.0f %%: requests per event are what bound it (the local " +
		"queue's 4 workers and its room for a whole burst took it from 3.1 %% to 9.0 %% in one run; 8 workers " +
		"did no better, 8.2 %%)"
)
