// Command api is the api Lambda (deployed as commitcollect-<environment>-api)
// behind API Gateway's HTTP API (payload v2): one net/http mux serves the
// Strava webhook and the BFF's routes (handlers/app.APILambda), adapted by
// aws-lambda-go-api-proxy.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/commitcollect/backend/handlers/app"
)

func main() {
	api, err := app.APILambda(context.Background())
	app.Exit(err)
	lambda.Start(httpadapter.NewV2(api).ProxyWithContext)
}
