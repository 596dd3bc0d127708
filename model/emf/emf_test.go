package emf_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/emf/emftest"

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
	line, err := emftest.Parse(b.Bytes())
	if err != nil || bytes.Count(b.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("not one EMF line: %v %q", err, b.String())
	}
	reads, _ := line.Value("Reads")
	lag, _ := line.Value("Lag")
	unit, declared := line.Declares("Lag")
	if line.Dimension("Service") != "worker" || reads != 3 || lag != 1.5 || !line.At.Equal(now) ||
		line.Namespace != "CommitCollect/Test" || len(line.Dimensions) != 1 || line.Dimensions[0][0] != "Service" ||
		len(line.Metrics) != 2 || !declared || unit != "Milliseconds" {
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
