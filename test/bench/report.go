package bench

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/test/awsrecord"
)

// The design minimum of one new-activity event: what the data model itself
// requires, with every cache warm and nothing optional, for items under
// 1 KB, in AWS's units (a write is 1 WCU per KB per item and per index entry;
// a strongly consistent read is 1 RCU per 4 KB read by one request).
//
// Ingestion (api + worker): 2 requests, 0 RCU, 3 WCU.
//   - the webhook's conditional PutItem claiming the event in the
//     idempotency table (Strava delivers at least once; 1 WCU);
//   - the worker's write of the normalized workout (1 WCU) and its LSI1
//     entry (the date-ordered key the projector reads; 1 WCU), with the
//     claim settled in the same request or left to its TTL;
//   - no read: the athlete → user mapping and the tokens are cached in a
//     warm worker, and the activity itself comes from Strava.
//
// Projection: 3 requests, 1 + ceil(n·s / 4 KB) RCU, 1 WCU.
//   - one Query of the user's milestones with their awards (one partition,
//     begins_with; under 4 KB: 1 RCU);
//   - one Query of LSI1 bounded by the active milestones' periods: n
//     workouts in those periods (capped at 3000, the guardrail) of s bytes
//     each as LSI1 projects them (WorkoutLogFields plus the keys); for a
//     period of two to six weeks only the event's UTC week, the others
//     being sums kept with the milestone (projections' weeks.go);
//   - one UpdateItem of the milestone's progress (1 WCU).
//   - An award minted or an audit entry written adds a write on top (the
//     growth table's milestones are never completed, so it mints none).
//
// In total 5 requests and 4 WCU. The product adds the outbox's durability
// (a Pending index entry on claim and settle: 1 request and 3 WCU), the
// seed's routine audit entry (1 request, 1 WCU) and the guard read with the
// milestones (no request): 7 requests, 2 RCU, 8 WCU (the targets in
// print_test.go: 8, 2, 8; 2 RCU when the period's log fits 4 KB).
const (
	minIngestRequests  = 2
	minIngestWCU       = 3
	minProjectRequests = 3
	minProjectWCU      = 1
	// rcuBytes is what one read unit reads, strongly consistent.
	rcuBytes = 4096
)

// DesignMinimum returns the design minimum of one event for ingestion and
// projection when the projection reads n workouts of s bytes each.
func DesignMinimum(n, s int) (ingest, project metering.Units) {
	ingest = metering.Units{Requests: minIngestRequests, WCU: minIngestWCU}
	project = metering.Units{Requests: minProjectRequests, WCU: minProjectWCU,
		RCU: 1 + math.Ceil(float64(n*s)/rcuBytes)}
	return ingest, project
}

// ItemSize is an item's size as DynamoDB counts it for capacity: the sum of
// attribute name lengths and value sizes (strings and binaries by length,
// numbers about one byte per two digits plus one, 1 byte for booleans and
// nulls, 3 bytes plus the elements for lists and maps).
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return (len(v.Value)+1)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		return 3 + ItemSize(v.Value)
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += (len(s)+1)/2 + 1
		}
		return n
	}
	return 0
}

// Percentile returns the p-th percentile (0 < p ≤ 1, nearest rank) of ds, or
// 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Per returns u divided by n events (requests stay a count: the ratio is in
// the float fields of the returned PerEvent).
func Per(u metering.Units, n int) PerEvent {
	if n <= 0 {
		return PerEvent{}
	}
	f := float64(n)
	return PerEvent{Requests: float64(u.Requests) / f, RCU: u.RCU / f, WCU: u.WCU / f}
}

// PerEvent is a cost divided by the number of events.
type PerEvent struct {
	Requests, RCU, WCU float64
}

// Add returns p plus q.
func (p PerEvent) Add(q PerEvent) PerEvent {
	return PerEvent{Requests: p.Requests + q.Requests, RCU: p.RCU + q.RCU, WCU: p.WCU + q.WCU}
}

// Minus returns a minus b, field by field (metering.Units.Sub).
func Minus(a, b metering.Units) metering.Units { return a.Sub(b) }

// MinusSnapshot returns what a meter recorded between snapshot b and the
// later snapshot a, totals and operations (tables are left out).
func MinusSnapshot(a, b metering.Snapshot) metering.Snapshot {
	r := metering.Snapshot{Units: Minus(a.Units, b.Units)}
	for op, u := range a.ByOp {
		if d := Minus(u, b.ByOp[op]); d != (metering.Units{}) {
			if r.ByOp == nil {
				r.ByOp = map[string]metering.Units{}
			}
			r.ByOp[op] = d
		}
	}
	return r
}

// OpsPerEvent renders a snapshot's operations divided by n events, in name
// order, e.g. "GetItem 3.00 req 1.50 RCU · PutItem 4.00 req 10.0 WCU".
func OpsPerEvent(s metering.Snapshot, n int) string {
	ops := make([]string, 0, len(s.ByOp))
	for op := range s.ByOp {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	out := ""
	for i, op := range ops {
		u := Per(s.ByOp[op], n)
		if i > 0 {
			out += " · "
		}
		out += fmt.Sprintf("%s %.2f", op, u.Requests)
		if u.RCU > 0 {
			out += fmt.Sprintf(" (%.2f RCU)", u.RCU)
		}
		if u.WCU > 0 {
			out += fmt.Sprintf(" (%.2f WCU)", u.WCU)
		}
	}
	if out == "" {
		return "none"
	}
	return out
}

// Verdict says whether got meets an upper bound (atMost) or a lower bound
// (!atMost) of limit, and by how much it clears or misses it, e.g.
// "met (6 to spare)" or "MISSED by 3.2 (1.3× the limit)".
func Verdict(got, limit float64, atMost bool) string {
	diff := limit - got
	if !atMost {
		diff = got - limit
	}
	if diff >= 0 {
		return fmt.Sprintf("met (%.3g to spare)", diff)
	}
	rel := ""
	if limit != 0 {
		rel = fmt.Sprintf(" (%.2f× the limit)", got/limit)
	}
	return fmt.Sprintf("MISSED by %.3g%s", -diff, rel)
}

// CallsPerEvent is every call the stack made between two tallies
// (awsrecord.Tally snapshots), per event: the total and a line by call,
// most frequent first ("DynamoDB Streams GetRecords 0.41 · …"). It includes
// what the capacity meter does not see: the stream reader's calls and
// retried attempts.
func CallsPerEvent(before, after map[string]awsrecord.Calls, n int) (total float64, line string) {
	per := map[string]float64{}
	for name, c := range after {
		if d := c.N - before[name].N; d > 0 {
			per[name] = float64(d) / float64(max(n, 1))
			total += per[name]
		}
	}
	return total, rankLine(per, "%.2f")
}

// MeanWaits is the mean time one attempt of each call waited for its
// answer between two tallies (awsrecord.Tally snapshots), longest first
// ("DynamoDB TransactWriteItems 41.0 ms · …"): under load, where DynamoDB
// Local's time goes by call.
func MeanWaits(before, after map[string]awsrecord.Calls) string {
	ms := map[string]float64{}
	for name, c := range after {
		if n := c.N - before[name].N; n > 0 {
			ms[name] = float64((c.Wait-before[name].Wait)/time.Duration(n)) / float64(time.Millisecond)
		}
	}
	return rankLine(ms, "%.1f ms")
}

// rankLine joins "name value" (value in format) for each entry, largest
// first and ties by name, or says "none".
func rankLine(values map[string]float64, format string) string {
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if a, b := values[names[i]], values[names[j]]; a != b {
			return a > b
		}
		return names[i] < names[j]
	})
	if len(names) == 0 {
		return "none"
	}
	for i, name := range names {
		names[i] = name + " " + fmt.Sprintf(format, values[name])
	}
	return strings.Join(names, " · ")
}
