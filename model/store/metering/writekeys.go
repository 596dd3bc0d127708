package metering

import (
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DefaultTopK is how many keys a WriteKeys counts per table or index when
// NewWriteKeys is given 0.
const DefaultTopK = 1024

// WriteKeys counts written items per table and index and per partition key
// (see the file comment). It is safe for concurrent use.
//
// Per-partition-key write accounting (hot keys). A WriteKeys counts the
// items written per table and per index and, for each, the partition keys
// those writes land on, so a test or a simulation can say what share of a
// table's or an index's writes its hottest key takes (test/scale). It is
// off unless a Meter is given one (Meter.CountWriteKeys): the Lambdas never
// do, so their memory never grows with it.
//
// What is counted, from the request alone (no extra call): every item a
// PutItem, UpdateItem, DeleteItem, BatchWriteItem or TransactWriteItems
// writes counts once under its table, keyed by its partition key. It counts
// once under an index when the request names the item's partition key in
// that index: a Put whose item carries the index's hash key attribute (a
// local index: its range key attribute; the partition is the table's), an
// Update whose SET assigns it (a plain value or if_not_exists(…, :v)). An
// Update that leaves the index key as it is or removes it, and a Delete,
// also write the index when the old item was in it, under a key the request
// does not show: for UpdateItem and DeleteItem those are counted as
// Unknown, when DynamoDB reports write units on the index; in a batch or a
// transaction they are not counted. Conditional writes refused by DynamoDB
// are not counted (they write nothing).
//
// Keys are counted with the Space-Saving algorithm (Metwally et al.): at
// most TopK counters per table or index; a new key when all are taken
// replaces the least counted one and inherits its count (recorded as the
// key's error). Every key written more than Writes/TopK times is kept, and
// a kept key's count exceeds its true count by at most its error: the
// hottest key's share is exact when no counter was ever replaced and an
// upper bound (by Error/Writes) otherwise.
type WriteKeys struct {
	topK   int
	tables map[string]KeySchema
	mu     sync.Mutex
	scopes map[string]*keyCounts
}

// KeySchema is what WriteKeys needs of a table: its name, the attribute of
// its partition key, and its indexes' (tableadmin.KeySchemas derives them from
// the table specs).
type KeySchema struct {
	Name    string
	HashKey string
	// GSIs name each global index and the attribute of its partition key.
	GSIs []Index
	// LSIs name each local index and the attribute of its sort key (an item
	// without it is not in the index).
	LSIs []Index
}

// Index is one index of a KeySchema: its name and key attribute.
type Index struct{ Name, Key string }

// NewWriteKeys returns a counter for the tables of specs (tableadmin.KeySchemas),
// keeping at most topK keys per table or index (DefaultTopK when ≤ 0).
func NewWriteKeys(specs []KeySchema, topK int) *WriteKeys {
	if topK <= 0 {
		topK = DefaultTopK
	}
	w := &WriteKeys{topK: topK, tables: map[string]KeySchema{}, scopes: map[string]*keyCounts{}}
	for _, s := range specs {
		w.tables[s.Name] = s
	}
	return w
}

// keyCounts is one table's or index's Space-Saving counters.
type keyCounts struct {
	writes, unknown int64
	counts          map[string]*keyCount
}

type keyCount struct{ count, err int64 }

func (w *WriteKeys) add(scope, key string) {
	c := w.scopes[scope]
	if c == nil {
		c = &keyCounts{counts: map[string]*keyCount{}}
		w.scopes[scope] = c
	}
	c.writes++
	if k, ok := c.counts[key]; ok {
		k.count++
		return
	}
	if len(c.counts) < w.topK {
		c.counts[key] = &keyCount{count: 1}
		return
	}
	var minKey string
	var least *keyCount
	for k, v := range c.counts {
		if least == nil || v.count < least.count || (v.count == least.count && k < minKey) {
			minKey, least = k, v
		}
	}
	delete(c.counts, minKey)
	c.counts[key] = &keyCount{count: least.count + 1, err: least.count}
}

func (w *WriteKeys) addUnknown(scope string) {
	c := w.scopes[scope]
	if c == nil {
		c = &keyCounts{counts: map[string]*keyCount{}}
		w.scopes[scope] = c
	}
	c.unknown++
}

// HotKey is one table's or index's write figures: Scope is "Table" or
// "Table/Index"; Writes the items written with a known partition key,
// Unknown those whose key the request did not show (see the file comment);
// Key, Count and Error the hottest key (Count overstates its writes by at
// most Error); Keys how many distinct keys are counted (at most TopK).
type HotKey struct {
	Scope   string
	Writes  int64
	Unknown int64
	Key     string
	Count   int64
	Error   int64
	Keys    int
}

// Share is the hottest key's share of Writes (0 without writes).
func (h HotKey) Share() float64 {
	if h.Writes == 0 {
		return 0
	}
	return float64(h.Count) / float64(h.Writes)
}

// Hottest returns every table's and index's figures, in Scope order (nil
// for a nil WriteKeys).
func (w *WriteKeys) Hottest() []HotKey {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]HotKey, 0, len(w.scopes))
	for scope, c := range w.scopes {
		h := HotKey{Scope: scope, Writes: c.writes, Unknown: c.unknown, Keys: len(c.counts)}
		for k, v := range c.counts {
			if v.count > h.Count || (v.count == h.Count && k < h.Key) {
				h.Key, h.Count, h.Error = k, v.count, v.err
			}
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scope < out[j].Scope })
	return out
}

// CountWriteKeys makes m (and every meter started from it with StartMeter)
// count the items its calls write into w. A nil w turns it off.
func (m *Meter) CountWriteKeys(w *WriteKeys) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys = w
}

// writeKeys returns the distinct WriteKeys of m and its parents.
func (m *Meter) writeKeys() []*WriteKeys {
	var out []*WriteKeys
	for ; m != nil; m = m.parent {
		m.mu.Lock()
		k := m.keys
		m.mu.Unlock()
		if k != nil && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// recordWrites counts the items a successful write request wrote (params is
// the request; consumed DynamoDB's report, for the Unknown index writes of
// UpdateItem and DeleteItem).
func (w *WriteKeys) recordWrites(params any, consumed []types.ConsumedCapacity) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch v := params.(type) {
	case *dynamodb.PutItemInput:
		w.put(aws.ToString(v.TableName), v.Item)
	case *dynamodb.UpdateItemInput:
		named := w.update(aws.ToString(v.TableName), v.Key, aws.ToString(v.UpdateExpression), v.ExpressionAttributeNames, v.ExpressionAttributeValues)
		w.unknownIndexes(aws.ToString(v.TableName), consumed, named)
	case *dynamodb.DeleteItemInput:
		w.keyOnly(aws.ToString(v.TableName), v.Key)
		w.unknownIndexes(aws.ToString(v.TableName), consumed, nil)
	case *dynamodb.BatchWriteItemInput:
		for table, reqs := range v.RequestItems {
			for _, r := range reqs {
				switch {
				case r.PutRequest != nil:
					w.put(table, r.PutRequest.Item)
				case r.DeleteRequest != nil:
					w.keyOnly(table, r.DeleteRequest.Key)
				}
			}
		}
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range v.TransactItems {
			switch {
			case it.Put != nil:
				w.put(aws.ToString(it.Put.TableName), it.Put.Item)
			case it.Update != nil:
				w.update(aws.ToString(it.Update.TableName), it.Update.Key, aws.ToString(it.Update.UpdateExpression),
					it.Update.ExpressionAttributeNames, it.Update.ExpressionAttributeValues)
			case it.Delete != nil:
				w.keyOnly(aws.ToString(it.Delete.TableName), it.Delete.Key)
			}
		}
	}
}

// spec returns the table's spec, or a PK-keyed one for a table the specs
// do not name.
func (w *WriteKeys) spec(table string) KeySchema {
	if s, ok := w.tables[table]; ok {
		return s
	}
	return KeySchema{Name: table, HashKey: "PK"}
}

func (w *WriteKeys) put(table string, item map[string]types.AttributeValue) {
	s := w.spec(table)
	pk, ok := str(item[s.HashKey])
	if !ok {
		return
	}
	w.add(table, pk)
	for _, g := range s.GSIs {
		if k, ok := str(item[g.Key]); ok {
			w.add(table+"/"+g.Name, k)
		}
	}
	for _, l := range s.LSIs {
		if _, ok := item[l.Key]; ok {
			w.add(table+"/"+l.Name, pk)
		}
	}
}

// update counts an Update's item and the indexes whose key its SET names;
// it returns those indexes.
func (w *WriteKeys) update(table string, key map[string]types.AttributeValue, expr string, names map[string]string, values map[string]types.AttributeValue) map[string]bool {
	s := w.spec(table)
	pk, ok := str(key[s.HashKey])
	if !ok {
		return nil
	}
	w.add(table, pk)
	set := setAssignments(expr, names, values)
	named := map[string]bool{}
	for _, g := range s.GSIs {
		if k, ok := str(set[g.Key]); ok {
			w.add(table+"/"+g.Name, k)
			named[g.Name] = true
		}
	}
	for _, l := range s.LSIs {
		if _, ok := set[l.Key]; ok {
			w.add(table+"/"+l.Name, pk)
			named[l.Name] = true
		}
	}
	return named
}

func (w *WriteKeys) keyOnly(table string, key map[string]types.AttributeValue) {
	if pk, ok := str(key[w.spec(table).HashKey]); ok {
		w.add(table, pk)
	}
}

// unknownIndexes counts, for one UpdateItem or DeleteItem, each index
// DynamoDB reports write units on whose key the request did not name.
func (w *WriteKeys) unknownIndexes(table string, consumed []types.ConsumedCapacity, named map[string]bool) {
	for _, c := range consumed {
		if aws.ToString(c.TableName) != table {
			continue
		}
		for _, idx := range []map[string]types.Capacity{c.GlobalSecondaryIndexes, c.LocalSecondaryIndexes} {
			for name, cap := range idx {
				if !named[name] && (aws.ToFloat64(cap.CapacityUnits) > 0 || aws.ToFloat64(cap.WriteCapacityUnits) > 0) {
					w.addUnknown(table + "/" + name)
				}
			}
		}
	}
}

func str(v types.AttributeValue) (string, bool) {
	s, ok := v.(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return s.Value, true
}

// setAssignments returns the attributes an update expression's SET clause
// assigns a value placeholder to (directly or as if_not_exists's default),
// by attribute name. Paths into maps or lists are left out: an index key is
// a top-level attribute.
func setAssignments(expr string, names map[string]string, values map[string]types.AttributeValue) map[string]types.AttributeValue {
	out := map[string]types.AttributeValue{}
	for _, clause := range updateClauses(expr)["SET"] {
		lhs, rhs, ok := strings.Cut(clause, "=")
		if !ok {
			continue
		}
		lhs, rhs = strings.TrimSpace(lhs), strings.TrimSpace(rhs)
		if n, ok := names[lhs]; ok {
			lhs = n
		}
		if strings.ContainsAny(lhs, ".[#") {
			continue
		}
		if strings.HasPrefix(rhs, "if_not_exists(") && strings.HasSuffix(rhs, ")") {
			args := splitTopLevel(strings.TrimSuffix(strings.TrimPrefix(rhs, "if_not_exists("), ")"))
			if len(args) != 2 {
				continue
			}
			rhs = strings.TrimSpace(args[1])
		}
		if v, ok := values[rhs]; ok {
			out[lhs] = v
		}
	}
	return out
}

// updateClauses splits an update expression into its actions (SET, REMOVE,
// ADD, DELETE), each a list of comma-separated clauses.
func updateClauses(expr string) map[string][]string {
	out := map[string][]string{}
	fields := strings.Fields(expr)
	action := ""
	var cur []string
	flush := func() {
		if action != "" && len(cur) > 0 {
			out[action] = append(out[action], splitTopLevel(strings.Join(cur, " "))...)
		}
		cur = nil
	}
	for _, f := range fields {
		switch u := strings.ToUpper(f); u {
		case "SET", "REMOVE", "ADD", "DELETE":
			flush()
			action = u
			continue
		}
		cur = append(cur, f)
	}
	flush()
	return out
}

// splitTopLevel splits s at commas outside parentheses.
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}
