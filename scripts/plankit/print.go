package plankit

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Fits is the overall verdict: the daily and the peak 15-minute read
// budgets, and the overall ones.
func (p Plan) Fits() bool { return p.FitsDaily && p.FitsShort && p.FitsOverall }

// LastLine is the plan's summary line.
func (p Plan) LastLine() string {
	fits := "no"
	if p.Fits() {
		fits = "yes"
	}
	return fmt.Sprintf("capacity: athletes=%d reads_per_day=%.0f webhook_reads=%.0f reconcile_reads=%.0f fits=%s usd_per_athlete_month=%.6f",
		p.A.Athletes, p.ReadsPerDay, p.Reads.Webhook, p.Reads.Reconcile, fits, p.USDPerAthlete)
}

// Print writes the plan, its last line last.
func (p Plan) Print(w io.Writer) {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p.printAssumptions(pf)
	p.printReads(pf)
	p.printUnits(pf)
	p.printDaily(pf)
	p.printCost(pf)
	pf("%s\n", p.LastLine())
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func (p Plan) printAssumptions(pf func(string, ...any)) {
	a := p.A
	pf("Capacity plan for %d athletes\n\n", a.Athletes)
	pf("Assumptions (flags; defaults in `go doc ./scripts/plankit Defaults`):\n")
	pf("  activities %.3g per athlete-day; per activity: pushed edits %.3g, deletes %.3g, unpushed edits %.3g\n",
		a.ActivitiesPerDay, a.PushedEdits, a.Deletes, a.UnpushedEdits)
	pf("  new connects %.3g and deauthorizations %.3g per athlete-day; backfill history %d days (CC_SYNC_MAX_DAYS) = %.0f activities, %.0f page(s) of %d\n",
		a.ConnectsPerDay, a.DeauthsPerDay, a.HistoryDays, float64(a.HistoryDays)*a.ActivitiesPerDay, p.BackfillPagesPerConnect, a.PageSize)
	pf("  athletes with an active milestone overlapping the window: %.0f%%; evening peak %.3g× the mean\n", 100*a.MilestoneShare, a.PeakFactor)
	pf("  reconciliation: own slot every %s (CC_RECONCILE_INTERVAL), window %d days (CC_RECONCILE_DAYS), slow round-robin %s;\n",
		human(a.ReconcileInterval), a.ReconcileDays, human(a.SlowInterval))
	pf("    reconciled at its slot when it has an active milestone and (a webhook since its last reconcile, or that one would be %s old by its next slot)\n", human(a.SlowInterval))
	pf("    P(activity within one interval) = %.3f, mean slots between reconciles %.3f, one page (after=now-%dd) per reconcile\n",
		p.ActiveInInterval, p.SlotsBetween, a.ReconcileDays)
	pf("  Strava limits: read %d/15min %d/day, overall %d/15min %d/day; syncs may spend %.0f%%, webhooks leave %.0f%% unused\n\n",
		a.Limits.ReadShort, a.Limits.ReadDaily, a.Limits.Short, a.Limits.Daily, 100*a.BudgetShare, 100*a.BudgetReserve)

}

func (p Plan) printReads(pf func(string, ...any)) {
	a := p.A
	pf("Strava reads per day by class:\n")
	pf("  webhooks (create + pushed edit fetches)   %12.0f\n", p.Reads.Webhook)
	pf("    creates: %.0f for %.0f reads = %.3f reads per activity, bursts counted (%.0f%% in %.0f bursts of %d: %d fetches + list pages of %d)\n",
		p.Creates, p.CreateReads, p.CreateReads/math.Max(p.Creates, 1), 100*a.BurstShare, p.Bursts, a.BurstSize, a.BurstSingles, a.PageSize)
	pf("  backfill (new connects)                    %12.0f\n", p.Reads.Backfill)
	pf("  reconciliation (%8.0f reconciles)       %12.0f\n", p.Reconciles, p.Reads.Reconcile)
	pf("  deauth/delete confirmations                %12.0f\n", p.Reads.Confirm)
	inBudget := "not counted: POST /oauth/token, see `go doc -u ./scripts/plankit Plan.readBudget`; -refreshes-in-budget counts them"
	if a.RefreshesInBudget {
		inBudget = "counted (-refreshes-in-budget)"
	}
	pf("  token refreshes (/oauth/token)             %12.0f  (%s)\n", p.Reads.Refresh, inBudget)
	pf("  total counted                              %12.0f  (%.3f per athlete-day)\n", p.ReadsPerDay, p.ReadsPerDay/math.Max(float64(a.Athletes), 1))
	pf("Fits the read budget:\n")
	pf("  daily: %s (needs %d/day: all reads within %.0f%% and syncs within %.0f%%; limit %d)\n",
		yes(p.FitsDaily), p.NeedReadDaily, 100*(1-a.BudgetReserve), 100*a.BudgetShare, a.Limits.ReadDaily)
	pf("  peak 15 min: %s (%.0f webhook and confirmation reads in the peak window; needs %d/15min; limit %d)\n",
		yes(p.FitsShort), p.PeakWindowReads, p.NeedReadShort, a.Limits.ReadShort)
	pf("  overall budget: %s (limits %d/15min %d/day)\n\n", yes(p.FitsOverall), a.Limits.Short, a.Limits.Daily)

}

func (p Plan) printUnits(pf func(string, ...any)) {
	m := p.M
	pf("DynamoDB units per unit of work, measured (%s):\n", m.Source)
	pf("  DynamoDB Local's ConsumedCapacity accounting through the product's meter (model/store/metering/meter.go)\n")
	for _, r := range []struct {
		name string
		s    Stages
	}{
		{"webhook create, milestone", m.Create}, {"webhook create, no milestone", m.CreateNoMilestone},
		{"webhook update", m.Update}, {"webhook delete", m.Delete},
		{fmt.Sprintf("deauthorization (%d workouts)", m.DeauthWorkouts), m.Deauth},
		{fmt.Sprintf("backfill page (%d activities)", m.BackfillActivities), m.BackfillPage},
		{"reconcile page, unchanged", m.ReconcilePage},
	} {
		pf("  %-32s %s   (api %s | worker %s | projector %s)\n", r.name, r.s.Total(), brief(r.s.API), brief(r.s.Worker), brief(r.s.Projector))
	}
	if len(m.Reads) > 0 {
		var parts []string
		for _, k := range []string{"create", "update", "delete", "deauth", "backfill", "reconcile"} {
			parts = append(parts, fmt.Sprintf("%s %.3g", k, m.Reads[k]))
		}
		pf("  Strava reads per unit in the measurement: %s\n", strings.Join(parts, ", "))
	}
}

func (p Plan) printDaily(pf func(string, ...any)) {
	a := p.A
	pf("\nDynamoDB per day:\n")
	for _, c := range p.DynamoByClass {
		pf("  %-30s %12.0f × → %s\n", c.Name, c.Count, daily(c.Cost))
	}
	pf("  %-30s %14s %s\n\n", "total", "", daily(p.Dynamo))

	pf("Lambda per day (arm64; memory: Terraform's defaults; durations: assumptions):\n")
	for _, l := range p.Lambdas {
		pf("  %-22s %14.0f invocations %12.1f GB-s\n", l.Name, l.Invocations, l.GBs)
	}
	pf("  webhooks at the evening peak: %.3g requests/s (%.3g× the mean; Terraform var.api throttles the stage)\n", p.PeakWebhooksPerSecond, a.PeakFactor)
	pf("  HTTP API requests %.0f/day; CloudWatch Logs %.3g GB/day; KMS %.0f requests/day; storage %.3g GB\n\n",
		p.HTTPRequests, p.LogGB, p.KMSRequests, p.StorageGB)

}

func (p Plan) printCost(pf func(string, ...any)) {
	a := p.A
	pf("Monthly AWS cost (%d days, on-demand, %s; %s; no free tier):\n", DaysPerMonth, a.Prices.Region, a.Prices.AsOf)
	pf("  prices: DynamoDB $%.3g/M WRU, $%.3g/M RRU, $%.3g/GB-month; Streams reads by Lambda free; Lambda arm64 $%.10g/GB-s, $%.3g/M requests;\n",
		a.Prices.WriteRequestUnitPerMillion, a.Prices.ReadRequestUnitPerMillion, a.Prices.StoragePerGBMonth, a.Prices.LambdaGBs, a.Prices.LambdaRequestsPerMillion)
	pf("          HTTP API $%.3g/M requests; CloudWatch Logs $%.3g/GB ingested; KMS $%.3g/10k requests\n",
		a.Prices.HTTPAPIRequestsPerMillion, a.Prices.LogsIngestionPerGB, a.Prices.KMSRequestsPer10k)
	for _, l := range p.Monthly {
		pf("  %-34s %16s  $%12.2f\n", l.Name, l.Quantity, l.USD)
	}
	pf("  %-34s %16s  $%12.2f  ($%.6f per athlete-month)\n\n", "total", "", p.USDMonth, p.USDPerAthlete)

	scope := "here at the target's scale"
	if a.Athletes != 1_000_000 {
		scope = fmt.Sprintf("shown for %d athletes: the fixed costs weigh more below that scale", a.Athletes)
	}
	pf("Targets (stated for 1,000,000 athletes with the defaults; %s):\n", scope)
	for _, t := range p.Targets {
		verdict := "missed"
		if t.Met {
			verdict = "met"
		}
		pf("  %-40s %.4g (target ≤ %.4g): %s\n", t.Name, t.Got, t.Want, verdict)
	}
}

func brief(c Cost) string { return fmt.Sprintf("%.3g/%.3g/%.3g", c.Requests, c.RCU, c.WCU) }

func daily(c Cost) string {
	return fmt.Sprintf("%14.0f requests %14.0f RCU %14.0f WCU", c.Requests, c.RCU, c.WCU)
}

func human(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	return d.String()
}
