// Command run is `make run`: the whole CommitCollect pipeline on this
// machine (scripts/runkit) until Ctrl-C. Wiring only.
//
// It prints where everything listens (DynamoDB Local on a free port, the API
// on CC_HTTP_ADDR, the simulator on CC_STRAVA_SIM_ADDR), logs JSON on stderr
// (one line per webhook, workout write, projection and award) and stops
// cleanly on Ctrl-C: DynamoDB Local is its child and goes with it. `go run
// ./scripts/run -help` lists its settings (runkit.Settings). With
// CC_DATA_DIR the tables survive a restart but the simulator starts empty:
// athletes it issued tokens to are unknown to it, so their token refreshes
// fail and the connection is marked for re-authorization, as a revoked Strava
// app would be. Sign in again (or run `make demo`, which creates a new
// athlete).
//
// By hand, against the simulator's control API:
//
//	curl -X POST localhost:8090/_sim/athletes -d '{"id":42,"firstname":"Ada"}'
//	curl -X PUT  localhost:8090/_sim/authorization -d '{"athleteId":42}'
//	# open http://127.0.0.1:8080/auth/strava/login: it lands on / (then /v1/me, /v1/milestones)
//	curl -X PUT  localhost:8090/_sim/activities/1 \
//	     -d '{"athleteId":42,"sport_type":"Run","distance":5000,"start_date":"2026-11-20T06:00:00Z"}'
//	curl -X POST localhost:8090/_sim/events -d '{"aspect":"create","activityId":1,"ownerId":42}'
//
// The landing page / shows the signed-in user's milestones, progress bars
// and awards, server-rendered from the same projection as /v1/milestones and
// reloading every few seconds.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/commitcollect/backend/scripts/runkit"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: run\n\nRuns DynamoDB Local, the API, the worker, the stream reader feeding the projector\n"+
			"and the Strava simulator in one process until Ctrl-C. Configuration is read from the environment:\n\n")
		for _, s := range runkit.Settings {
			fmt.Fprintf(os.Stderr, "  %s\n        %s\n", s.Name, s.Meaning)
		}
	}
	flag.Parse()
	var level slog.Level
	if v := os.Getenv("CC_LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			fmt.Fprintf(os.Stderr, "CC_LOG_LEVEL %q: want debug, info, warn or error\n", v)
			os.Exit(2)
		}
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := runkit.Start(ctx, runkit.Options{Log: log})
	if err != nil {
		fmt.Fprintf(os.Stderr, "run: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(runkit.Banner(st))
	select {
	case <-ctx.Done():
	case <-st.Done():
	}
	stop()
	fmt.Fprintln(os.Stderr, "run: shutting down")
	closeCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	st.Close(closeCtx)
	if err := st.Err(); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "run: stream reader stopped: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "run: stopped")
}
