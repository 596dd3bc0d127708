// Command sealtokens rewrites the Strava connections that still hold their
// tokens in plain text (schema version 1, before item-level encryption) or
// sealed in format 1 (bound to the userId attribute, before tokens were bound
// to the item's key) with the tokens sealed in format 2 (bound to the item's
// key), using the same key the Lambdas use (CC_TOKEN_KMS_KEY in
// AWS, CC_TOKEN_KEY locally). Users are listed through the sparse users
// index (store.ListUsers, shard by shard), never a Scan. Each rewrite is
// conditional on the connection's tokenVersion, so a refresh racing with it
// wins; re-running it is harmless and reports 0 rewritten at the end.
//
//	go run ./scripts/sealtokens [-table-prefix dev-]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
)

func main() {
	if _, err := run(context.Background(), os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "sealtokens:", err)
		os.Exit(1)
	}
}

// Report counts what a run did.
type Report struct {
	Users  int `json:"users"`
	Sealed int `json:"sealed"`
}

// run reads the configuration and flags and seals every plain connection.
func run(ctx context.Context, args []string, getenv func(string) string) (Report, error) {
	cfg, err := config.FromEnv(getenv, config.Need{Tokens: true})
	if err != nil {
		return Report{}, err
	}
	fs := flag.NewFlagSet("sealtokens", flag.ContinueOnError)
	prefix := fs.String("table-prefix", cfg.TablePrefix, "table name prefix (default $CC_TABLE_PREFIX)")
	if err := fs.Parse(args); err != nil {
		return Report{}, err
	}
	cfg.TablePrefix = *prefix
	conn, err := app.Open(ctx, cfg)
	if err != nil {
		return Report{}, err
	}
	st := conn.Store
	rep, err := SealAll(ctx, st, time.Now().UTC())
	cfg.Logger().Info("sealtokens done", "table", st.DB.Tables().Main, "users", rep.Users, "sealed", rep.Sealed, "error", errString(err))
	return rep, err
}

// SealAll walks every shard of the users index and reseals each listed
// user's plain or format 1 connection (store.SealConnection).
func SealAll(ctx context.Context, st *store.Adapters, now time.Time) (Report, error) {
	var rep Report
	for shard := range keys.UserListShards {
		after := ""
		for {
			page, err := st.Users.ListUsers(ctx, shard, after, 0)
			if err != nil {
				return rep, err
			}
			for _, u := range page.UserIDs {
				rep.Users++
				done, err := st.Connections.SealConnection(ctx, u, now)
				if err != nil {
					return rep, err
				}
				if done {
					rep.Sealed++
				}
			}
			if !page.More {
				break
			}
			after = page.Next
		}
	}
	return rep, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
