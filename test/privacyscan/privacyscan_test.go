package privacyscan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestANumericIdLeftBehindIsFound: an athlete id left in a number
// attribute, top level or nested, is found; decoded to float64 and
// printed, as the scans did before, it reads 9.87654321e+08 and is missed.
// A TTL due by the deadline excuses an item, a later one does not.
func TestANumericIdLeftBehindIsFound(t *testing.T) {
	t.Parallel()
	const athlete = "987654321"
	item, err := attributevalue.MarshalMap(map[string]any{"PK": "USER#u1", "athleteId": 987654321})
	if err != nil {
		t.Fatal(err)
	}
	nested, err := attributevalue.MarshalMap(map[string]any{"PK": "USER#u1", "details": map[string]any{"ids": []int64{1, 987654321}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, it := range map[string]map[string]types.AttributeValue{"top level": item, "nested": nested} {
		if c, ok := Holding(it, []string{athlete}); !ok || c != athlete {
			t.Errorf("%s: the id was not found in %v", name, Values(it))
		}
		var raw map[string]any
		if err := attributevalue.UnmarshalMap(it, &raw); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(fmtAny(raw), athlete) {
			t.Errorf("%s: the float reading found the id after all (%v): this test no longer shows the difference", name, raw)
		}
	}
	by := time.Unix(2_000_000_000, 0)
	item["expiresAt"] = &types.AttributeValueMemberN{Value: "1999999999"}
	if expiresBy(item, by) != true {
		t.Error("a TTL before the deadline does not excuse the item")
	}
	item["expiresAt"] = &types.AttributeValueMemberN{Value: "2000000001"}
	if expiresBy(item, by) {
		t.Error("a TTL after the deadline excuses the item")
	}
}

// fmtAny prints v as the scans printed decoded items before.
func fmtAny(v any) string { return fmt.Sprint(v) }
