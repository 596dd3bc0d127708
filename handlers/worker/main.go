// Command worker is the worker Lambda (deployed as
// commitcollect-<environment>-worker): it receives the jobs the api and the
// sweeper hand off (async invoke), fetches activities from Strava and writes
// the normalized workouts (handlers/app.WorkerLambda).
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/commitcollect/backend/handlers/app"
)

func main() {
	w, err := app.WorkerLambda(context.Background())
	app.Exit(err)
	lambda.Start(w.Handle)
}
