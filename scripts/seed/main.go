// Command seed writes the model catalog (model/catalog/catalog.json, embedded)
// into the CommitCollect table: MODEL#{modelId} / META and PART#{nn} items.
// It is idempotent: a re-run changes nothing and reports 0 changed items; it
// refuses to overwrite a catalog seeded by a newer version. The local stack
// and deploy run it.
//
//	go run ./scripts/seed [-table-prefix dev-] [-catalog path/to/catalog.json]
//
// DYNAMODB_ENDPOINT points it at DynamoDB Local; without it, AWS credentials
// from the default chain are used.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
)

func main() {
	if _, err := run(context.Background(), os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
}

// run seeds and returns how many items it changed.
func run(ctx context.Context, args []string, getenv func(string) string) (int, error) {
	cfg, err := config.FromEnv(getenv, config.Need{})
	if err != nil {
		return 0, err
	}
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	prefix := fs.String("table-prefix", cfg.TablePrefix, "table name prefix (default $CC_TABLE_PREFIX)")
	file := fs.String("catalog", "", "catalog JSON file (default: the embedded model/catalog/catalog.json)")
	if err := fs.Parse(args); err != nil {
		return 0, err
	}

	cat, err := catalog.Default()
	if *file != "" {
		var data []byte
		if data, err = os.ReadFile(*file); err != nil {
			return 0, err
		}
		cat, err = catalog.Parse(data)
	}
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	awsCfg, err := cfg.AWS(ctx)
	if err != nil {
		return 0, err
	}
	db, _ := cfg.DynamoDB(awsCfg)
	tables := dynamo.TableNames(*prefix)
	n, err := catalog.Seed(ctx, store.New(db, tables).Milestones, cat)
	if err != nil {
		return n, err
	}
	slog.New(slog.NewJSONHandler(os.Stdout, nil)).Info("catalog seeded",
		"table", tables.Main, "catalogVersion", cat.Version, "models", len(cat.Models), "changedItems", n)
	return n, nil
}
