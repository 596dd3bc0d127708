// Package plankit is the capacity plan behind `make capacity` (scripts/capacity):
// for N athletes on one Strava application it prints Strava reads per day by class and whether they fit
// the application's limits, DynamoDB requests/RCU/WCU per day, Lambda invocations and GB-s per day, and
// a monthly AWS cost at published on-demand prices. Its last line is
//
//	capacity: athletes=N reads_per_day=R webhook_reads=W reconcile_reads=C fits=yes|no usd_per_athlete_month=X
//
// followed by nothing; above it, the three targets at 1,000,000 athletes (reconciliation reads
// ≤ 20 % of webhook reads, ≤ 1.3 Strava reads per athlete-day, ≤ $0.0015 per athlete-month) as met/missed
// lines. Nothing asserts them: they are printed.
//
// Where each figure comes from is documented beside the code that makes it: Measure (the
// measured units), Plan.reconciliation and Plan.readBudget (the reads, the
// fit), Plan.dynamoDB, Defaults (the assumptions) and DefaultPrices.
package plankit
