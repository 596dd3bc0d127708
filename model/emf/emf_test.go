package emf_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/emf"
)

// TestWrite: one line CloudWatch reads as metrics: the values at the top
// level, declared under _aws with their unit, the namespace and the one
// dimension; nothing for no values or no writer.
func TestWrite(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if err := emf.Write(&b, "CommitCollect/Test", now, "Service", "worker", []emf.Value{{"Reads", "Count", 3}, {"Lag", "Milliseconds", 1.5}}); err != nil {
		t.Fatal(err)
	}
	var line struct {
		Service string
		Reads   float64
		Lag     float64
		AWS     struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
	}
	if err := json.Unmarshal(b.Bytes(), &line); err != nil || bytes.Count(b.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("not one JSON line: %v %q", err, b.String())
	}
	cw := line.AWS.CloudWatchMetrics
	if line.Service != "worker" || line.Reads != 3 || line.Lag != 1.5 || line.AWS.Timestamp != now.UnixMilli() || len(cw) != 1 ||
		cw[0].Namespace != "CommitCollect/Test" || len(cw[0].Dimensions) != 1 || cw[0].Dimensions[0][0] != "Service" ||
		len(cw[0].Metrics) != 2 || cw[0].Metrics[1].Unit != "Milliseconds" {
		t.Fatalf("line %+v", line)
	}
	b.Reset()
	if err := emf.Write(&b, "n", now, "d", "v", nil); err != nil || b.Len() != 0 {
		t.Fatalf("no values wrote %q (%v)", b.String(), err)
	}
	if err := emf.Write(nil, "n", now, "d", "v", []emf.Value{{"X", "Count", 1}}); err != nil {
		t.Fatal(err)
	}
}
