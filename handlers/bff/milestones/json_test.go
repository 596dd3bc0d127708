package milestones

import (
	"testing"

	"github.com/commitcollect/backend/model"
)

func TestPercent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		metric model.Metric
		target float64
		value  int64
		want   float64
	}{
		{"distance in mm", model.MetricDistance, 100000, 42195000, 42.1},
		{"elevation in mm", model.MetricElevation, 1000, 250500, 25},
		{"moving time", model.MetricMovingTime, 3600, 1800, 50},
		{"count", model.MetricCount, 3, 1, 33.3},
		{"nothing yet", model.MetricCount, 3, 0, 0},
		{"just short of the target never reads 100", model.MetricDistance, 1000, 999999, 99.9},
		{"reached", model.MetricDistance, 1000, 1000000, 100},
		{"beyond the target is capped", model.MetricCount, 2, 5, 100},
		{"negative is floored", model.MetricCount, 2, -1, 0},
	}
	for _, tt := range tests {
		if got := Percent(model.MilestoneDefinition{Metric: tt.metric, Target: tt.target}, tt.value); got != tt.want {
			t.Errorf("%s: Percent(%d) = %v, want %v", tt.name, tt.value, got, tt.want)
		}
	}
}
