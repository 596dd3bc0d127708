package rules

import (
	"reflect"
	"testing"
)

// TestCheck: every bad rule is named by its API path, every problem at
// once, and good rules pass. Protections: each check of Check.
func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		rules *Rules
		want  []string
	}{
		{"none", nil, nil},
		{"all three and both minimums", &Rules{MinMovingTimeSeconds: 1200, MinDistanceMeters: 1000, Exclude: Exclusions}, nil},
		{"zero minimums are none", &Rules{}, nil},
		{"a negative time", &Rules{MinMovingTimeSeconds: -1}, []string{"rules.minMovingTimeSeconds"}},
		{"a negative distance", &Rules{MinDistanceMeters: -0.5}, []string{"rules.minDistanceMeters"}},
		{"a time past a day", &Rules{MinMovingTimeSeconds: MaxMinMovingTimeSeconds + 1}, []string{"rules.minMovingTimeSeconds"}},
		{"an unknown exclusion", &Rules{Exclude: []string{"manual", "virtual"}}, []string{"rules.exclude[1]"}},
		{"a duplicate", &Rules{Exclude: []string{"commute", "manual", "commute"}}, []string{"rules.exclude[2]"}},
		{"everything at once", &Rules{MinMovingTimeSeconds: -1, MinDistanceMeters: -1, Exclude: []string{"Manual"}},
			[]string{"rules.minMovingTimeSeconds", "rules.minDistanceMeters", "rules.exclude[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, p := range tt.rules.Check() {
				got = append(got, p.Field)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Check named %v, want %v", got, tt.want)
			}
		})
	}
}
