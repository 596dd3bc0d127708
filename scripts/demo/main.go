// Command demo is `make demo`: against a running `make run`, a simulated
// athlete logs in, creates a milestone and a month of activities arrives
// through the webhook; it prints the progress bar, the awards as they are
// minted and the end-to-end lag of each step (scripts/demokit.Demo).
//
// It adds an athlete to the simulator, logs in through the real OAuth
// redirects (/auth/strava/login → simulator → /auth/strava/callback), creates
// "Run 100 km this month" on a model from the catalog, then sends a month of
// activities as Strava webhooks: runs that count, rides and walks that don't,
// one webhook delivered twice (the second answered duplicate), a GPS
// correction, a deleted run (progress drops, awards stay) and a ride
// re-labelled as a run. After each webhook it waits on GET
// /v1/milestones/{id}; the lag is webhook sent → milestone updated. Then a
// second athlete with 120 days of activities on Strava (never sent as
// webhooks) connects: the connect's backfill imports them and a "Run 300 km
// in 60 days" milestone fills from the history, shown as it grows with the
// imported count (GET /v1/me's sync state) at the end.
// `make demo ARGS="-seed 7"` plays another month; ARGS=-help lists the flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/scripts/demokit"
)

func main() {
	o := demokit.DemoOptions{Out: os.Stdout}
	local := config.LocalFromEnv(os.Getenv)
	flag.StringVar(&o.APIURL, "api", env("CC_PUBLIC_URL", "http://"+local.HTTPAddr), "the running API")
	flag.StringVar(&o.SimURL, "sim", "http://"+local.SimAddr, "the running Strava simulator")
	flag.Uint64Var(&o.Seed, "seed", 1, "seed of the month of activities")
	flag.DurationVar(&o.Timeout, "timeout", 0, "how long to wait for each projection (default 30s)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := demokit.Demo(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
