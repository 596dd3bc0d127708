package tableadmin_test

import (
	"testing"

	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/tableadmin"
)

// TestKeySchemasFollowTheSpecs: the write-key accounting sees every table
// and index of the specs with its key attribute.
func TestKeySchemasFollowTheSpecs(t *testing.T) {
	t.Parallel()
	specs := tableadmin.Specs(dynamo.TableNames("p-"))
	ks := tableadmin.KeySchemas(specs)
	if len(ks) != len(specs) {
		t.Fatalf("got %d schemas for %d tables", len(ks), len(specs))
	}
	for i, s := range specs {
		k := ks[i]
		if k.Name != s.Name || k.HashKey != s.HashKey || len(k.GSIs) != len(s.GSIs) || len(k.LSIs) != len(s.LSIs) {
			t.Fatalf("schema %+v does not follow spec %+v", k, s)
		}
		for j, g := range s.GSIs {
			if k.GSIs[j].Name != g.Name || k.GSIs[j].Key != g.HashKey {
				t.Errorf("%s: global index %+v, want %s keyed by %s", s.Name, k.GSIs[j], g.Name, g.HashKey)
			}
		}
		for j, l := range s.LSIs {
			if k.LSIs[j].Name != l.Name || k.LSIs[j].Key != l.RangeKey {
				t.Errorf("%s: local index %+v, want %s keyed by %s", s.Name, k.LSIs[j], l.Name, l.RangeKey)
			}
		}
	}
}
