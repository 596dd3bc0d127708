package plankit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// Main is scripts/capacity: it parses the flags, measures the per-unit
// DynamoDB costs on DynamoDB Local (Measure), computes the plan (Compute)
// and prints it to out, its summary line last. It returns 0, or 2 on bad
// flags or a failed measurement (printed to errW).
func Main(ctx context.Context, args []string, out, errW io.Writer) int {
	a, mo, err := ParseFlags(args, errW)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(errW, "capacity:", err)
		return 2
	}
	fmt.Fprintln(errW, "capacity: measuring the per-event DynamoDB units on DynamoDB Local (about a minute)…")
	m, err := Measure(ctx, mo)
	if err != nil {
		fmt.Fprintln(errW, "capacity:", err)
		return 2
	}
	Compute(a, m).Print(out)
	return 0
}

// ParseFlags reads the assumptions and the measurement's options from
// args; every default is Defaults' (documented there).
func ParseFlags(args []string, errW io.Writer) (Assumptions, MeasureOptions, error) {
	a := Defaults(1000)
	fs := flag.NewFlagSet("capacity", flag.ContinueOnError)
	fs.SetOutput(errW)
	fs.Usage = func() {
		fmt.Fprintf(errW, "usage: make capacity ARGS=\"-athletes N [flags]\"\n\n"+
			"Prints the capacity plan for N athletes: Strava reads per day by class and whether they fit the limits,\n"+
			"DynamoDB requests/RCU/WCU, Lambda invocations and GB-s, and the monthly AWS cost. The per-event DynamoDB\n"+
			"units are measured first on DynamoDB Local (go doc -all ./scripts/plankit).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&a.Athletes, "athletes", a.Athletes, "connected athletes")
	fs.Float64Var(&a.ActivitiesPerDay, "activities", a.ActivitiesPerDay, "activities uploaded per athlete-day")
	fs.Float64Var(&a.PushedEdits, "edits", a.PushedEdits, "edits Strava pushes (update webhooks) per activity")
	fs.Float64Var(&a.Deletes, "deletes", a.Deletes, "deletes per activity")
	fs.Float64Var(&a.UnpushedEdits, "unpushed-edits", a.UnpushedEdits, "edits Strava never pushes, per activity (caught by reconciliation)")
	fs.Float64Var(&a.BurstShare, "burst-share", a.BurstShare, "share of creates arriving in bursts (bulk uploads, device syncs), served by list pages")
	fs.IntVar(&a.BurstSize, "burst-size", a.BurstSize, "mean creates per burst")
	fs.Float64Var(&a.MilestoneShare, "milestone-share", a.MilestoneShare, "share of athletes with an active milestone overlapping the reconcile window")
	fs.Float64Var(&a.PeakFactor, "peak", a.PeakFactor, "evening peak webhook rate over the day's mean")
	fs.Float64Var(&a.ConnectsPerDay, "connects", a.ConnectsPerDay, "new connects (each backfills its history) per athlete-day")
	fs.Float64Var(&a.DeauthsPerDay, "deauths", a.DeauthsPerDay, "deauthorizations per athlete-day")
	fs.IntVar(&a.HistoryDays, "history-days", a.HistoryDays, "backfill depth in days (CC_SYNC_MAX_DAYS)")
	fs.IntVar(&a.PageSize, "page-size", a.PageSize, "activities per list page (per_page)")
	fs.DurationVar(&a.ReconcileInterval, "reconcile-interval", a.ReconcileInterval, "each athlete's reconcile slot period (CC_RECONCILE_INTERVAL)")
	fs.DurationVar(&a.SlowInterval, "slow-interval", a.SlowInterval, "round-robin bound: an athlete with a milestone but no activity is reconciled this often")
	fs.IntVar(&a.ReconcileDays, "reconcile-days", a.ReconcileDays, "days a reconcile lists (CC_RECONCILE_DAYS)")
	fs.DurationVar(&a.TokenTTL, "token-ttl", a.TokenTTL, "Strava access token lifetime")
	fs.BoolVar(&a.RefreshesInBudget, "refreshes-in-budget", a.RefreshesInBudget, "count token refreshes (POST /oauth/token) against the read budget")
	fs.IntVar(&a.Limits.ReadShort, "read-limit-15m", a.Limits.ReadShort, "Strava read limit per 15 minutes")
	fs.IntVar(&a.Limits.ReadDaily, "read-limit-day", a.Limits.ReadDaily, "Strava read limit per day")
	fs.IntVar(&a.Limits.Short, "limit-15m", a.Limits.Short, "Strava overall limit per 15 minutes")
	fs.IntVar(&a.Limits.Daily, "limit-day", a.Limits.Daily, "Strava overall limit per day")
	fs.Float64Var(&a.BudgetShare, "sync-share", a.BudgetShare, "share of each budget syncs may spend (CC_SYNC_BUDGET_SHARE)")
	fs.Float64Var(&a.API.DurationMs, "api-ms", a.API.DurationMs, "api Lambda billed ms per request")
	fs.Float64Var(&a.Worker.DurationMs, "worker-ms", a.Worker.DurationMs, "worker Lambda billed ms per webhook job")
	fs.Float64Var(&a.SyncPage.DurationMs, "sync-page-ms", a.SyncPage.DurationMs, "worker Lambda billed ms per sync page")
	fs.Float64Var(&a.Projector.DurationMs, "projector-ms", a.Projector.DurationMs, "projector Lambda billed ms per batch")
	fs.Float64Var(&a.Sweeper.DurationMs, "sweeper-ms", a.Sweeper.DurationMs, "sweeper Lambda billed ms per invocation")
	fs.Float64Var(&a.API.MemoryMB, "api-mb", a.API.MemoryMB, "api Lambda memory (Terraform functions.api.memory_mb)")
	fs.Float64Var(&a.Worker.MemoryMB, "worker-mb", a.Worker.MemoryMB, "worker Lambda memory (functions.worker.memory_mb)")
	fs.Float64Var(&a.Projector.MemoryMB, "projector-mb", a.Projector.MemoryMB, "projector Lambda memory (functions.projector.memory_mb)")
	fs.Float64Var(&a.Sweeper.MemoryMB, "sweeper-mb", a.Sweeper.MemoryMB, "sweeper Lambda memory (functions.sweeper.memory_mb)")
	fs.Float64Var(&a.RecordsPerBatch, "records-per-batch", a.RecordsPerBatch, "stream records per projector invocation (1: one batch per job, an upper bound)")
	fs.Float64Var(&a.SweeperPerDay, "sweeper-per-day", a.SweeperPerDay, "sweeper invocations per day (the sweep and the reconcile schedule, each a minute)")
	fs.Float64Var(&a.AppRequestsPerDay, "app-requests", a.AppRequestsPerDay, "other API requests per athlete-day (the app's pages; 0: the pipeline only)")
	fs.Float64Var(&a.LogBytesPerInvocation, "log-bytes", a.LogBytesPerInvocation, "CloudWatch Logs bytes per invocation")
	fs.Float64Var(&a.StorageKBPerAthlete, "storage-kb", a.StorageKBPerAthlete, "DynamoDB storage per athlete, KB")
	mo := MeasureOptions{Events: 3, Timeout: time.Minute}
	fs.StringVar(&mo.Endpoint, "endpoint", "", "measure on this running DynamoDB endpoint (default: start DynamoDB Local)")
	fs.IntVar(&mo.Events, "measure-events", mo.Events, "warm events measured per class")
	if err := fs.Parse(args); err != nil {
		return a, mo, err
	}
	if fs.NArg() > 0 {
		return a, mo, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if err := a.Validate(); err != nil {
		return a, mo, err
	}
	mo.HistoryDays, mo.ReconcileDays = a.HistoryDays, a.ReconcileDays
	mo.BackfillActivities = int(min(float64(a.PageSize), max(1, float64(a.HistoryDays)*a.ActivitiesPerDay+0.5)))
	return a, mo, nil
}

// Validate rejects assumptions the arithmetic cannot use.
func (a Assumptions) Validate() error {
	var errs []error
	if a.Athletes <= 0 {
		errs = append(errs, errors.New("-athletes must be positive"))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"-activities", a.ActivitiesPerDay}, {"-edits", a.PushedEdits}, {"-deletes", a.Deletes}, {"-unpushed-edits", a.UnpushedEdits},
		{"-connects", a.ConnectsPerDay}, {"-deauths", a.DeauthsPerDay}, {"-app-requests", a.AppRequestsPerDay}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", f.name))
		}
	}
	if a.BurstShare < 0 || a.BurstShare > 1 || a.BurstSize < 1 {
		errs = append(errs, errors.New("-burst-share must be in [0, 1] and -burst-size at least 1"))
	}
	if a.MilestoneShare < 0 || a.MilestoneShare > 1 {
		errs = append(errs, errors.New("-milestone-share must be in [0, 1]"))
	}
	if a.BudgetShare <= 0 || a.BudgetShare > 1 {
		errs = append(errs, errors.New("-sync-share must be in (0, 1]"))
	}
	if a.PeakFactor < 1 {
		errs = append(errs, errors.New("-peak must be at least 1"))
	}
	if a.ReconcileInterval <= 0 || a.SlowInterval < a.ReconcileInterval || a.TokenTTL <= 0 {
		errs = append(errs, errors.New("-reconcile-interval and -token-ttl must be positive and -slow-interval at least -reconcile-interval"))
	}
	if a.HistoryDays < 1 || a.ReconcileDays < 1 || a.PageSize < 1 {
		errs = append(errs, errors.New("-history-days, -reconcile-days and -page-size must be positive"))
	}
	if a.Limits.ReadShort < 1 || a.Limits.ReadDaily < 1 || a.Limits.Short < 1 || a.Limits.Daily < 1 {
		errs = append(errs, errors.New("the Strava limits must be positive"))
	}
	return errors.Join(errs...)
}
