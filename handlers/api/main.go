// Command api is the api Lambda (deployed as commitcollect-<environment>-api)
// behind API Gateway's HTTP API (payload v2): one net/http mux serves the
// Strava webhook (and the BFF's routes, assembled by handlers/app), adapted by
// aws-lambda-go-api-proxy. Wiring only.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
)

func main() {
	need := app.Need
	need.Worker = true
	cfg, err := config.Load(context.Background(), need)
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
	dispatcher := handoff.NewLambdaDispatcher(awslambda.NewFromConfig(awsCfg), cfg.WorkerFunction)

	mux, err := app.NewAPI(cfg, st, dispatcher, nil, log)
	if err != nil {
		log.Error("build api", "error", err)
		os.Exit(1)
	}

	// Each request is metered and logged with its DynamoDB capacity.
	lambda.Start(httpadapter.NewV2(app.Metered(mux, log)).ProxyWithContext)
}
