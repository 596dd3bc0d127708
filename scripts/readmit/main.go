// Command readmit re-admits the webhook events dropped for one push
// subscription: events the webhook recorded, and answered, but did not
// accept, because their subscription id was not the one it was configured
// with (a new subscription, registered when the callback's path secret was
// rotated, before STRAVA_SUBSCRIPTION_ID named it). Run it once the
// configuration accepts the subscription: each dropped event becomes
// received, due now, and the sweeper dispatches it as if it had been
// accepted. The events are listed through the subscription's partition of
// the outbox's pending index (never a Scan); each is re-admitted with a
// conditional write, so re-running it is harmless and events taken over by
// a redelivery meanwhile are left as they are.
//
//	go run ./scripts/readmit -subscription 12345 [-table-prefix dev-]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/outbox"
)

func main() {
	if _, err := run(context.Background(), os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "readmit:", err)
		os.Exit(1)
	}
}

// run reads the configuration and flags and re-admits the subscription's
// dropped events.
func run(ctx context.Context, args []string, getenv func(string) string) (Report, error) {
	cfg, err := config.FromEnv(getenv, config.Need{})
	if err != nil {
		return Report{}, err
	}
	fs := flag.NewFlagSet("readmit", flag.ContinueOnError)
	prefix := fs.String("table-prefix", cfg.TablePrefix, "table name prefix (default $CC_TABLE_PREFIX)")
	sub := fs.Int64("subscription", 0, "the push subscription whose dropped events to re-admit (required)")
	if err := fs.Parse(args); err != nil {
		return Report{}, err
	}
	if *sub <= 0 {
		return Report{}, errors.New("-subscription: want the push subscription's id, a positive integer")
	}
	cfg.TablePrefix = *prefix
	conn, err := app.Open(ctx, cfg)
	if err != nil {
		return Report{}, err
	}
	rep, err := Readmit(ctx, outbox.NewDrops(conn.Store.DB), *sub, time.Now().UTC())
	cfg.Logger().Info("readmit done", "subscription", *sub, "listed", rep.Listed, "readmitted", rep.Readmitted, "error", errString(err))
	return rep, err
}

// Report counts what a run did.
type Report struct {
	// Listed is how many dropped events were read; Readmitted how many
	// became received (the others were taken over or re-admitted since).
	Listed, Readmitted int
}

// Drops lists and re-admits a subscription's dropped events
// (outbox.Drops).
type Drops interface {
	DroppedOutboxItems(ctx context.Context, subscriptionID int64, limit int) ([]ops.IdempotencyRecord, error)
	ReadmitOutboxItem(ctx context.Context, key string, subscriptionID int64, now time.Time) (*ops.IdempotencyRecord, error)
}

// readPage is how many dropped events one listing reads.
const readPage = 500

// Readmit re-admits every event dropped for subscriptionID, a page at a
// time, until a listing finds none left to re-admit (the index is
// eventually consistent: an event re-admitted may be listed once more, and
// is then a conflict, skipped).
func Readmit(ctx context.Context, d Drops, subscriptionID int64, now time.Time) (Report, error) {
	var rep Report
	for {
		page, err := d.DroppedOutboxItems(ctx, subscriptionID, readPage)
		if err != nil {
			return rep, err
		}
		rep.Listed += len(page)
		moved := 0
		for _, r := range page {
			_, err := d.ReadmitOutboxItem(ctx, r.IdempotencyKey, subscriptionID, now)
			switch {
			case errors.Is(err, model.ErrConflict):
			case err != nil:
				return rep, err
			default:
				moved++
			}
		}
		rep.Readmitted += moved
		if moved == 0 {
			return rep, nil
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
