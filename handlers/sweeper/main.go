// Command sweeper is the commitcollect-sweeper Lambda, invoked once a minute
// by a schedule: it re-dispatches outbox items (accepted webhook events)
// whose hand-off was lost or whose deferral ended, by async-invoking the
// worker, and writes the sweep's figures as CloudWatch metrics (the backlog
// alarm). Wiring only; the logic is handlers/ingest.Sweeper.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/store"
)

func main() {
	cfg, err := config.Load(context.Background(), config.Need{Worker: true})
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
	sw := ingest.NewSweeper(store.New(db, cfg.Tables()),
		ingest.NewLambdaDispatcher(awslambda.NewFromConfig(awsCfg), cfg.WorkerFunction), log)
	if cfg.OutboxLease > 0 {
		sw.Lease = cfg.OutboxLease
	}
	lambda.Start(func(ctx context.Context) (ingest.SweepResult, error) {
		res, err := sw.Sweep(ctx)
		if merr := res.WriteEMF(os.Stdout, sw.Now()); merr != nil {
			log.WarnContext(ctx, "sweep metrics not written", "error", merr)
		}
		return res, err
	})
}
