package ingest

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// EMFValue is one metric of a CloudWatch Embedded Metric Format line.
type EMFValue struct {
	Name, Unit string
	Value      int64
}

// WriteEMF writes one CloudWatch Embedded Metric Format line in namespace
// with one dimension (nothing when w is nil): the one EMF writer of the
// worker's and the sweeper's metrics.
func WriteEMF(w io.Writer, namespace string, now time.Time, dim, dimValue string, vals []EMFValue) error {
	if w == nil || len(vals) == 0 {
		return nil
	}
	metrics := make([]map[string]string, len(vals))
	line := map[string]any{dim: dimValue}
	for i, v := range vals {
		metrics[i] = map[string]string{"Name": v.Name, "Unit": v.Unit}
		line[v.Name] = v.Value
	}
	line["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace": namespace, "Dimensions": [][]string{{dim}}, "Metrics": metrics,
		}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return fmt.Errorf("encode %s metrics: %w", vals[0].Name, err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
