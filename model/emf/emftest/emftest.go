// Package emftest reads CloudWatch Embedded Metric Format lines back, as
// CloudWatch does: the tests' one reader of what package emf writes.
package emftest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Metric is one metric a line declares.
type Metric struct {
	Name, Unit string
}

// Line is one EMF line: its one directive under _aws, and its members.
type Line struct {
	// At is the line's timestamp.
	At time.Time
	// Namespace, Dimensions and Metrics are the directive's.
	Namespace  string
	Dimensions [][]string
	Metrics    []Metric
	// Members are the line's top-level members but _aws: the metrics'
	// values and the dimensions' values.
	Members map[string]any
}

// Parse reads one line; it fails unless the line is a JSON object with
// exactly one metric directive under _aws.
func Parse(b []byte) (Line, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Line{}, fmt.Errorf("EMF line %q: %w", b, err)
	}
	var aws struct {
		Timestamp         int64
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []Metric
		}
	}
	if err := json.Unmarshal(raw["_aws"], &aws); err != nil || len(aws.CloudWatchMetrics) != 1 {
		return Line{}, fmt.Errorf("EMF line %q: want one directive under _aws (%v)", b, err)
	}
	d := aws.CloudWatchMetrics[0]
	l := Line{At: time.UnixMilli(aws.Timestamp).UTC(), Namespace: d.Namespace, Dimensions: d.Dimensions, Metrics: d.Metrics,
		Members: map[string]any{}}
	for k, v := range raw {
		if k == "_aws" {
			continue
		}
		var m any
		if err := json.Unmarshal(v, &m); err != nil {
			return Line{}, fmt.Errorf("EMF line member %s: %w", k, err)
		}
		l.Members[k] = m
	}
	return l, nil
}

// ParseAll reads every line of r.
func ParseAll(r io.Reader) ([]Line, error) {
	var out []Line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		l, err := Parse(sc.Bytes())
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// Value is the number a metric (or any numeric member) holds, and whether
// the line has it.
func (l Line) Value(name string) (float64, bool) {
	v, ok := l.Members[name].(float64)
	return v, ok
}

// Dimension is a dimension's (or any string member's) value.
func (l Line) Dimension(name string) string {
	s, _ := l.Members[name].(string)
	return s
}

// Declares reports whether the directive declares the metric name, and its
// unit.
func (l Line) Declares(name string) (string, bool) {
	for _, m := range l.Metrics {
		if m.Name == name {
			return m.Unit, true
		}
	}
	return "", false
}
