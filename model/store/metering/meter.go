// Package metering meters what DynamoDB calls cost, in the product: a
// client middleware (Install) adds the requests and the read and write units
// of every call made with a metered context (Start, With) to its Meter, and
// a Meter may also count the partition keys writes land on (WriteKeys, for
// the hot-key figures of test/scale). The Lambdas log a job's or a batch's
// Snapshot; make capacity and make bench read the same figures.
package metering

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Units is what a set of DynamoDB calls cost: requests, read capacity units
// and write capacity units, and how many of the requests failed (their units
// are unknown, see the package comment).
type Units struct {
	Requests int     `json:"requests"`
	RCU      float64 `json:"rcu"`
	WCU      float64 `json:"wcu"`
	Failed   int     `json:"failed,omitempty"`
}

// Add returns u plus v.
func (u Units) Add(v Units) Units {
	return Units{Requests: u.Requests + v.Requests, RCU: u.RCU + v.RCU, WCU: u.WCU + v.WCU, Failed: u.Failed + v.Failed}
}

// Sub returns u minus v, field by field (a meter's growth between two
// snapshots).
func (u Units) Sub(v Units) Units {
	return Units{Requests: u.Requests - v.Requests, RCU: u.RCU - v.RCU, WCU: u.WCU - v.WCU, Failed: u.Failed - v.Failed}
}

// Meter sums the consumed capacity of the DynamoDB calls made with a context
// that carries it (WithMeter). The zero value is ready; it is safe for
// concurrent use. A nil *Meter records nothing.
//
// Consumed capacity, accounted in the product. store.New installs one
// middleware on the client it is given (capacityOption); every call the
// store makes, and every call made through Store.Client(), then passes
// through it. When the call's context carries a *Meter (WithMeter), the
// middleware asks DynamoDB for ReturnConsumedCapacity=INDEXES and adds the
// request and the read and write units DynamoDB reports to the meter, by
// operation and by table and index. Without a meter in the context the call
// goes out untouched: nothing recorded, nothing asked for.
//
// What is counted:
//   - requests: one per operation call (GetItem, Query, one page of a
//     paginator, one BatchWriteItem…), whether it succeeded or not. SDK
//     retries of the same call are not extra requests here (they are in
//     AWS's bill for throttles and 5xx, which DynamoDB does not charge).
//   - units: what DynamoDB reported in ConsumedCapacity. A failed call
//     reports nothing (the SDK drops the output of a
//     ConditionalCheckFailedException or a TransactionCanceledException), so
//     a refused conditional write is a request with zero units here although
//     AWS charges the write units of the item; Failed counts those calls.
//   - read or write: DynamoDB's ReadCapacityUnits/WriteCapacityUnits when it
//     reports them, else CapacityUnits attributed by the operation (reads:
//     GetItem, Query, BatchGetItem, TransactGetItems; the rest write; the store
//     never scans).
//
// DynamoDB Local reports ConsumedCapacity for every operation the store uses
// (capacity_local_test.go checks Put, Query and TransactWriteItems against
// AWS's published formulas: 1 WCU per KB written per item and per index it
// lands in, 2 per item in a transaction; 0.5 RCU per 4 KB read eventually
// consistent, 1 strongly), with two differences:
//   - a transaction is charged by Local for one item per table (2 WCU for
//     ten small Puts into one table); AWS charges every item. The meter
//     therefore records at least 2 units per item a transaction writes
//     (Put, Update, Delete) or reads (TransactGetItems) in each table
//     (transactFloor): a lower bound that AWS's own figure always meets, so
//     it changes nothing there, and makes Local's figures what AWS charges
//     for items under 1 KB.
//   - a Query of a local secondary index with a ProjectionExpression is
//     charged by Local as if every item were fetched from the base table
//     (1 RCU per item more), even when the index projects every name asked
//     for; AWS charges the index only. WorkoutLog therefore asks for
//     ALL_PROJECTED_ATTRIBUTES (LSI1 projects exactly WorkoutLogFields),
//     which Local charges like AWS.
type Meter struct {
	// parent also receives every record (StartMeter).
	parent  *Meter
	mu      sync.Mutex
	total   Units
	byOp    map[string]Units
	byTable map[string]Units
	// keys, when set (CountWriteKeys), counts written items per
	// partition key (writekeys.go).
	keys *WriteKeys
}

// NewMeter returns an empty meter.
func NewMeter() *Meter { return &Meter{} }

type meterKey struct{}

// WithMeter returns ctx carrying m: the store's calls made with it are added
// to m.
func WithMeter(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// StartMeter returns ctx carrying a fresh meter, and the meter: what one
// handler invocation (a request, a job, a batch) costs. The calls it records
// are also added to the meter ctx carried before, if any, so a caller that
// sums many invocations (the local stack, the bench) keeps its totals.
func StartMeter(ctx context.Context) (context.Context, *Meter) {
	m := &Meter{parent: MeterFrom(ctx)}
	return WithMeter(ctx, m), m
}

// MeterFrom returns the meter ctx carries, or nil.
func MeterFrom(ctx context.Context) *Meter {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m
}

// Record adds one call of operation op: its consumed capacity (nil when
// DynamoDB reported none) and whether it failed.
func (m *Meter) Record(op string, consumed []types.ConsumedCapacity, failed bool) {
	if m == nil {
		return
	}
	call := Units{Requests: 1}
	if failed {
		call.Failed = 1
	}
	tables := map[string]Units{}
	for _, c := range consumed {
		call = call.Add(units(op, c.ReadCapacityUnits, c.WriteCapacityUnits, c.CapacityUnits))
		name := aws.ToString(c.TableName)
		if c.Table != nil {
			tables[name] = tables[name].Add(units(op, c.Table.ReadCapacityUnits, c.Table.WriteCapacityUnits, c.Table.CapacityUnits))
		} else {
			tables[name] = tables[name].Add(units(op, c.ReadCapacityUnits, c.WriteCapacityUnits, c.CapacityUnits))
		}
		for _, idx := range []map[string]types.Capacity{c.LocalSecondaryIndexes, c.GlobalSecondaryIndexes} {
			for ix, cap := range idx {
				k := name + "/" + ix
				tables[k] = tables[k].Add(units(op, cap.ReadCapacityUnits, cap.WriteCapacityUnits, cap.CapacityUnits))
			}
		}
	}
	for ; m != nil; m = m.parent {
		m.add(op, call, tables)
	}
}

func (m *Meter) add(op string, call Units, tables map[string]Units) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byOp == nil {
		m.byOp, m.byTable = map[string]Units{}, map[string]Units{}
	}
	m.total = m.total.Add(call)
	m.byOp[op] = m.byOp[op].Add(call)
	for k, u := range tables {
		m.byTable[k] = m.byTable[k].Add(u)
	}
}

// readOps are the operations whose CapacityUnits are read units.
var readOps = map[string]bool{"GetItem": true, "Query": true, "BatchGetItem": true, "TransactGetItems": true}

// units splits one capacity report into read and write units: DynamoDB's own
// split when it gives one, else all of total to the operation's kind.
func units(op string, read, write, total *float64) Units {
	if read != nil || write != nil {
		return Units{RCU: aws.ToFloat64(read), WCU: aws.ToFloat64(write)}
	}
	if readOps[op] {
		return Units{RCU: aws.ToFloat64(total)}
	}
	return Units{WCU: aws.ToFloat64(total)}
}

// Snapshot returns what m has recorded so far (the zero Snapshot for a nil
// meter).
func (m *Meter) Snapshot() Snapshot {
	if m == nil {
		return Snapshot{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Snapshot{Units: m.total}
	if len(m.byOp) > 0 {
		s.ByOp = make(map[string]Units, len(m.byOp))
		for k, v := range m.byOp {
			s.ByOp[k] = v
		}
		s.ByTable = make(map[string]Units, len(m.byTable))
		for k, v := range m.byTable {
			s.ByTable[k] = v
		}
	}
	return s
}

// Snapshot is a meter's figures at one instant: the totals (embedded Units),
// the breakdown by operation ("GetItem", "TransactWriteItems"…) and by table
// and index ("Table" and "Table/Index"; units only, Requests stays 0 there).
// It is a value: Add returns a new one, and it logs itself with slog as a
// group (requests, rcu, wcu, failed, ops).
type Snapshot struct {
	Units
	ByOp    map[string]Units `json:"byOp,omitempty"`
	ByTable map[string]Units `json:"byTable,omitempty"`
}

// Add returns s plus o; neither is modified.
func (s Snapshot) Add(o Snapshot) Snapshot {
	r := Snapshot{Units: s.Units.Add(o.Units)}
	r.ByOp = addMaps(s.ByOp, o.ByOp)
	r.ByTable = addMaps(s.ByTable, o.ByTable)
	return r
}

func addMaps(a, b map[string]Units) map[string]Units {
	if len(a)+len(b) == 0 {
		return nil
	}
	r := make(map[string]Units, len(a)+len(b))
	for k, v := range a {
		r[k] = v
	}
	for k, v := range b {
		r[k] = r[k].Add(v)
	}
	return r
}

// LogValue renders s for slog: requests, rcu, wcu, failed (when not zero)
// and ops, one group per operation in name order. Tables are left out of the
// log line (they are in the Snapshot for whoever needs them).
func (s Snapshot) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Int("requests", s.Requests), slog.Float64("rcu", s.RCU), slog.Float64("wcu", s.WCU)}
	if s.Failed > 0 {
		attrs = append(attrs, slog.Int("failed", s.Failed))
	}
	if len(s.ByOp) > 0 {
		ops := make([]string, 0, len(s.ByOp))
		for k := range s.ByOp {
			ops = append(ops, k)
		}
		sort.Strings(ops)
		g := make([]any, 0, len(ops))
		for _, op := range ops {
			u := s.ByOp[op]
			g = append(g, slog.Group(op, "requests", u.Requests, "rcu", u.RCU, "wcu", u.WCU))
		}
		attrs = append(attrs, slog.Group("ops", g...))
	}
	return slog.GroupValue(attrs...)
}

// Attr returns s as an inline slog attribute: requests, rcu, wcu (and
// failed, ops) at the top level of the log record, where the handlers' log
// lines carry them.
func (s Snapshot) Attr() slog.Attr { return slog.Attr{Value: s.LogValue()} }

// capacityMiddlewareID names the meter's middleware in the SDK's stack.
const capacityMiddlewareID = "commitcollect.ConsumedCapacity"

// Install returns a client with db's options plus the capacity meter
// middleware. A client that already has it (a Store's Client() handed to
// another New) is wrapped once only.
func Install(db *dynamodb.Client) *dynamodb.Client {
	if db == nil {
		return nil
	}
	o := db.Options()
	o.APIOptions = append(slices.Clip(o.APIOptions), addCapacityMiddleware)
	return dynamodb.New(o)
}

func addCapacityMiddleware(stack *middleware.Stack) error {
	if _, ok := stack.Initialize.Get(capacityMiddlewareID); ok {
		return nil
	}
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc(capacityMiddlewareID, meterCall), middleware.After)
}

// meterCall is the middleware: it asks for the capacity when the context
// carries a meter, and records it from the output.
func meterCall(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	m := MeterFrom(ctx)
	if m == nil {
		return next.HandleInitialize(ctx, in)
	}
	op, params, ok := askCapacity(in.Parameters)
	if !ok {
		return next.HandleInitialize(ctx, in)
	}
	in.Parameters = params
	out, md, err := next.HandleInitialize(ctx, in)
	cc := consumedCapacity(out.Result)
	if err == nil {
		for _, w := range m.writeKeys() {
			w.recordWrites(params, cc)
		}
		cc = withFloor(cc, transactFloor(params))
	}
	m.Record(op, cc, err != nil)
	return out, md, err
}

// transactFloor returns the least capacity a transaction costs per table: 2
// units per item written or read (nil for other operations).
func transactFloor(p any) map[string]float64 {
	floor := map[string]float64{}
	switch v := p.(type) {
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range v.TransactItems {
			switch {
			case it.Put != nil:
				floor[aws.ToString(it.Put.TableName)] += 2
			case it.Update != nil:
				floor[aws.ToString(it.Update.TableName)] += 2
			case it.Delete != nil:
				floor[aws.ToString(it.Delete.TableName)] += 2
			}
		}
	case *dynamodb.TransactGetItemsInput:
		for _, it := range v.TransactItems {
			if it.Get != nil {
				floor[aws.ToString(it.Get.TableName)] += 2
			}
		}
	default:
		return nil
	}
	return floor
}

// withFloor raises each table's reported capacity to its floor (a table the
// report leaves out gets an entry). The base-table share is raised; index
// shares are kept as reported.
func withFloor(cc []types.ConsumedCapacity, floor map[string]float64) []types.ConsumedCapacity {
	if len(floor) == 0 {
		return cc
	}
	out := make([]types.ConsumedCapacity, 0, len(cc)+len(floor))
	seen := map[string]bool{}
	for _, c := range cc {
		name := aws.ToString(c.TableName)
		seen[name] = true
		base := aws.ToFloat64(c.CapacityUnits)
		if c.Table != nil {
			base = aws.ToFloat64(c.Table.CapacityUnits)
		}
		if f := floor[name]; f > base && c.ReadCapacityUnits == nil && c.WriteCapacityUnits == nil {
			c.CapacityUnits = aws.Float64(aws.ToFloat64(c.CapacityUnits) + f - base)
			c.Table = &types.Capacity{CapacityUnits: aws.Float64(f)}
		}
		out = append(out, c)
	}
	names := make([]string, 0, len(floor))
	for name := range floor {
		if !seen[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		out = append(out, types.ConsumedCapacity{TableName: aws.String(name), CapacityUnits: aws.Float64(floor[name]),
			Table: &types.Capacity{CapacityUnits: aws.Float64(floor[name])}})
	}
	return out
}

// askCapacity returns the operation's name and a copy of its input asking
// for ReturnConsumedCapacity=INDEXES (a copy: the caller's input is not
// changed), or ok=false for an operation that reports no capacity.
func askCapacity(p any) (op string, params any, ok bool) {
	const idx = types.ReturnConsumedCapacityIndexes
	switch v := p.(type) {
	case *dynamodb.GetItemInput:
		c := *v
		c.ReturnConsumedCapacity = idx
		return "GetItem", &c, true
	case *dynamodb.PutItemInput:
		c := *v
		c.ReturnConsumedCapacity = idx
		return "PutItem", &c, true
	case *dynamodb.UpdateItemInput:
		c := *v
		c.ReturnConsumedCapacity = idx
		return "UpdateItem", &c, true
	case *dynamodb.DeleteItemInput:
		c := *v
		c.ReturnConsumedCapacity = idx
		return "DeleteItem", &c, true
	case *dynamodb.QueryInput:
		c := *v
		c.ReturnConsumedCapacity = idx
		return "Query", &c, true
	case *dynamodb.BatchGetItemInput:
		c := *v
		c.ReturnConsumedCapacity = idx
		return "BatchGetItem", &c, true
	case *dynamodb.BatchWriteItemInput:
		c := *v
		c.ReturnConsumedCapacity = idx
		return "BatchWriteItem", &c, true
	case *dynamodb.TransactGetItemsInput:
		c := *v
		c.ReturnConsumedCapacity = idx
		return "TransactGetItems", &c, true
	case *dynamodb.TransactWriteItemsInput:
		c := *v
		c.ReturnConsumedCapacity = idx
		return "TransactWriteItems", &c, true
	}
	return "", p, false
}

// consumedCapacity extracts ConsumedCapacity from an operation's output.
func consumedCapacity(r any) []types.ConsumedCapacity {
	one := func(c *types.ConsumedCapacity) []types.ConsumedCapacity {
		if c == nil {
			return nil
		}
		return []types.ConsumedCapacity{*c}
	}
	switch v := r.(type) {
	case *dynamodb.GetItemOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.PutItemOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.BatchGetItemOutput:
		return v.ConsumedCapacity
	case *dynamodb.BatchWriteItemOutput:
		return v.ConsumedCapacity
	case *dynamodb.TransactGetItemsOutput:
		return v.ConsumedCapacity
	case *dynamodb.TransactWriteItemsOutput:
		return v.ConsumedCapacity
	}
	return nil
}
