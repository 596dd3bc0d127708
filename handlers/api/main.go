// Command api is the commitcollect-api Lambda behind API Gateway's HTTP API
// (payload v2): one net/http mux serves the Strava webhook (and the BFF's
// routes), adapted by aws-lambda-go-api-proxy. Wiring only.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/store"
)

func main() {
	cfg, err := config.FromEnv(nil, config.Need{Webhook: true, Worker: true})
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
	st := store.New(db, cfg.Tables())
	dispatcher := ingest.NewLambdaDispatcher(awslambda.NewFromConfig(awsCfg), cfg.WorkerFunction)

	mux := http.NewServeMux()
	ingest.NewWebhook(ingest.WebhookConfig{
		VerifyToken: cfg.StravaVerifyToken, SubscriptionID: cfg.StravaSubscriptionID,
	}, st, dispatcher, log).Mount(mux)

	lambda.Start(httpadapter.NewV2(mux).ProxyWithContext)
}
