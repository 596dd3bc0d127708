// Package emf writes CloudWatch Embedded Metric Format lines: the one
// encoder of every service's metrics (worker, sweeper, projector, the
// store's dropped audit writes), which CloudWatch reads from the logs and
// the Terraform alarms watch.
package emf

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Value is one metric of a line.
type Value struct {
	Name, Unit string
	Value      float64
}

// Write writes one line in namespace with one dimension (dim = dimValue)
// and vals (nothing when w is nil or vals is empty).
func Write(w io.Writer, namespace string, now time.Time, dim, dimValue string, vals []Value) error {
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
