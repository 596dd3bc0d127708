// Package privacyscan finds what a deletion or a revocation's purge must
// not leave behind: items holding a Strava id or a name, read as stored.
// Every attribute value is read in its stored form, nested ones included,
// so a number is its stored digits: an athlete id left in a number
// attribute is found, where decoding to float64 printed 9.87654321e+08.
// Tests of the purge, of account deletion and of a comeback share it.
package privacyscan

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Values are an item's attribute values as stored, nested ones included:
// strings, numbers (their digits), sets, and binary values as text.
func Values(item map[string]types.AttributeValue) []string {
	var out []string
	for _, v := range item {
		out = appendValues(out, v)
	}
	return out
}

func appendValues(out []string, v types.AttributeValue) []string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		out = append(out, v.Value)
	case *types.AttributeValueMemberN:
		out = append(out, v.Value)
	case *types.AttributeValueMemberB:
		out = append(out, string(v.Value))
	case *types.AttributeValueMemberSS:
		out = append(out, v.Value...)
	case *types.AttributeValueMemberNS:
		out = append(out, v.Value...)
	case *types.AttributeValueMemberBS:
		for _, b := range v.Value {
			out = append(out, string(b))
		}
	case *types.AttributeValueMemberM:
		for _, m := range v.Value {
			out = appendValues(out, m)
		}
	case *types.AttributeValueMemberL:
		for _, l := range v.Value {
			out = appendValues(out, l)
		}
	}
	return out
}

// Holding is the first of clear that one of the item's values contains,
// and false when none does.
func Holding(item map[string]types.AttributeValue, clear []string) (string, bool) {
	for _, v := range Values(item) {
		for _, c := range clear {
			if strings.Contains(v, c) {
				return c, true
			}
		}
	}
	return "", false
}

// Scan reads every page of each table and hands each item to each; it
// returns how many items it read.
func Scan(ctx context.Context, db *dynamodb.Client, tables []string, each func(table string, item map[string]types.AttributeValue)) (int, error) {
	n := 0
	for _, table := range tables {
		p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: &table})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return n, fmt.Errorf("scan %s: %w", table, err)
			}
			for _, it := range page.Items {
				n++
				each(table, it)
			}
		}
	}
	return n, nil
}

// Lingering describes each item of tables holding one of clear that has
// no TTL (expiresAt, or the sessions table's expiresAtUtc) at or before
// by: what an account deletion must not leave. It also returns how many
// items it read.
func Lingering(ctx context.Context, db *dynamodb.Client, tables, clear []string, by time.Time) ([]string, int, error) {
	var out []string
	n, err := Scan(ctx, db, tables, func(table string, it map[string]types.AttributeValue) {
		if c, ok := Holding(it, clear); ok && !expiresBy(it, by) {
			out = append(out, fmt.Sprintf("%s holds %q without expiring by %s: %v", table, c, by.Format(time.RFC3339), Values(it)))
		}
	})
	return out, n, err
}

// expiresBy says whether the item's TTL attribute is set at or before by.
func expiresBy(it map[string]types.AttributeValue, by time.Time) bool {
	for _, name := range []string{"expiresAt", "expiresAtUtc"} {
		var s string
		switch v := it[name].(type) {
		case *types.AttributeValueMemberN:
			s = v.Value
		case *types.AttributeValueMemberS:
			s = v.Value
		default:
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return err == nil && n > 0 && n <= by.Unix()
	}
	return false
}
