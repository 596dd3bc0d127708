// Command capacity prints the capacity plan for N athletes on one Strava
// application: Strava reads per day by class against the limits, DynamoDB,
// Lambda and the monthly AWS cost, from per-event DynamoDB units it measures
// first on DynamoDB Local.
//
// Flags: make capacity ARGS=--help. Wiring only; the logic and every
// assumption are documented in scripts/plankit.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/commitcollect/backend/scripts/plankit"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := plankit.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
