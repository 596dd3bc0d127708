// Command projector is the stream-consumer Lambda: DynamoDB Stream records of
// the main table in, milestone projections, awards and audit out. It is
// wiring only; the logic lives in projections/consumer.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/projections/consumer"
)

func main() {
	cfg, err := config.Load(context.Background(), config.Need{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log := cfg.Logger().With("service", "projector")
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
	c := consumer.New(st, consumer.Options{Logger: log})
	lambda.Start(c.Handle)
}
