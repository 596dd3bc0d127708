// Command sweeper is the commitcollect-sweeper Lambda, invoked by two
// schedules: once a minute it drains the outbox, re-dispatching accepted
// events whose hand-off was lost or whose deferral ended; on
// {"task":"reconcile"} it takes one step of the reconciliation
// (handlers/app.SweeperTasks).
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/commitcollect/backend/handlers/app"
)

func main() {
	tasks, err := app.SweeperLambda(context.Background())
	app.Exit(err)
	lambda.Start(tasks.Handle)
}
