// Command projector is the stream-consumer Lambda: DynamoDB Stream records of
// the main table in, milestone projections, awards and audit out
// (handlers/app.ProjectorLambda; the logic is projections/consumer).
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/commitcollect/backend/handlers/app"
)

func main() {
	c, err := app.ProjectorLambda(context.Background())
	app.Exit(err)
	lambda.Start(c.Handle)
}
