// Command worker is the worker Lambda (deployed as
// commitcollect-<environment>-worker): it receives the Job the api hands off
// (async invoke), fetches the activity from Strava and writes the normalized
// workout. Wiring only; the logic is handlers/ingest.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/config"
)

func main() {
	cfg, err := config.Load(context.Background(), config.Need{Strava: true, Tokens: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log := cfg.Logger()
	awsCfg, err := cfg.AWS(context.Background())
	if err != nil {
		log.Error("aws config", "error", err)
		os.Exit(1)
	}
	db, _ := cfg.DynamoDB(awsCfg)
	st, err := cfg.Store(db, awsCfg)
	if err != nil {
		log.Error("store", "error", err)
		os.Exit(1)
	}
	st.AuditMetrics = os.Stdout // AuditWritesDropped (EMF), alarmed
	// StravaReads by class, AthleteReadsHeldBack, AthleteReadShare (alarmed),
	// SyncsWaiting: EMF on stdout.
	w := app.WorkerOf(cfg, st, os.Stdout, log)
	lambda.Start(w.Handle)
}
