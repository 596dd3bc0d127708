package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// lingering scans tables (every page) and describes each item holding one
// of the clear strings (a Strava id, a name) that has no TTL (expiresAt,
// or the sessions table's expiresAtUtc) at or before by: what an account
// deletion must not leave. It also returns how many items it read.
func lingering(ctx context.Context, db *dynamodb.Client, tables []string, clear []string, by time.Time) ([]string, int, error) {
	var out []string
	n := 0
	for _, table := range tables {
		p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: &table})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return out, n, fmt.Errorf("scan %s: %w", table, err)
			}
			for _, it := range page.Items {
				n++
				var raw map[string]any
				if err := attributevalue.UnmarshalMap(it, &raw); err != nil {
					return out, n, fmt.Errorf("decode an item of %s: %w", table, err)
				}
				text := fmt.Sprint(raw)
				for _, c := range clear {
					if strings.Contains(text, c) && !expiresBy(raw, by) {
						out = append(out, fmt.Sprintf("%s holds %q without expiring by %s: %s", table, c, by.Format(time.RFC3339), text))
						break
					}
				}
			}
		}
	}
	return out, n, nil
}

// expiresBy says whether the item's TTL attribute is set at or before by.
func expiresBy(raw map[string]any, by time.Time) bool {
	for _, name := range []string{"expiresAt", "expiresAtUtc"} {
		switch v := raw[name].(type) {
		case float64:
			return v > 0 && int64(v) <= by.Unix()
		case string:
			n, err := strconv.ParseInt(v, 10, 64)
			return err == nil && n > 0 && n <= by.Unix()
		}
	}
	return false
}
