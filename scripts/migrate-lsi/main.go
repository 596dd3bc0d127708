// Command migrate-lsi moves an existing deployment onto the main table with
// LSI1 (the workouts' date-ordered index the projector reads). An LSI can
// only be created with its table, so:
//
//  1. Terraform creates the new table set under a new prefix (old stack live).
//  2. go run ./scripts/migrate-lsi -from-prefix prod- -to-prefix prod-v2-
//     copies every user's partition (users listed through the sparse users
//     index, never a Scan), keying workouts (LSI1SK), plus the athlete
//     mappings, model catalog, rate-limit counter and parked records.
//  3. Point the functions at the new prefix and deploy this build.
//  4. Run step 2 again with -newer: what the old stack wrote meanwhile is
//     copied (only where the new table lacks the item or holds an older
//     updatedAtUtc).
//  5. go run ./scripts/migrate-lsi -backfill -to-prefix prod-v2- keys any
//     workout still without LSI1SK; then make rebuild ARGS="--all" and
//     make verify ARGS="--all" on the new prefix.
//
// DYNAMODB_ENDPOINT points it at DynamoDB Local; otherwise the default AWS
// credential chain is used. Wiring only; the logic is scripts/migratekit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/scripts/migratekit"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "migrate-lsi:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string) error {
	cfg, err := config.FromEnv(nil, config.Need{})
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("migrate-lsi", flag.ContinueOnError)
	from := fs.String("from-prefix", "", "table prefix of the deployment to copy from (its main table has no LSI1)")
	to := fs.String("to-prefix", "", "table prefix of the new table set (created by Terraform, with LSI1)")
	newer := fs.Bool("newer", false, "catch-up pass: write an item only if the destination lacks it or holds an older updatedAtUtc")
	backfill := fs.Bool("backfill", false, "set LSI1SK in place on every workout of -to-prefix that lacks it (no copy)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *to == "" || (!*backfill && *from == "") {
		return errors.New("-to-prefix is required, and -from-prefix unless -backfill")
	}
	awsCfg, err := cfg.AWS(ctx)
	if err != nil {
		return err
	}
	db, _ := cfg.DynamoDB(awsCfg)
	dst := store.New(db, dynamo.TableNames(*to))
	o := migratekit.Options{Newer: *newer, Progress: func(userID string, s migratekit.Summary) {
		if s.Users%100 == 0 {
			fmt.Fprintln(os.Stderr, "progress:", s)
		}
	}}
	var sum migratekit.Summary
	if *backfill {
		sum, err = migratekit.Backfill(ctx, dst, o)
	} else {
		cat, cerr := catalog.Default()
		if cerr != nil {
			return cerr
		}
		for _, m := range cat.Models {
			o.ModelIDs = append(o.ModelIDs, m.ModelID)
		}
		sum, err = migratekit.Copy(ctx, store.New(db, dynamo.TableNames(*from)), dst, o)
	}
	fmt.Println(sum)
	return err
}
