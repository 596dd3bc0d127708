package model

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func validDefinition() MilestoneDefinition {
	return MilestoneDefinition{
		ModelID: "saturn-v", Title: "100 km in March", Metric: MetricDistance, Target: 100000,
		SportTypes: []string{"Run", "TrailRun"}, PeriodStartAtUtc: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		PartCount: 10,
	}
}

// local sets a local period in place of the UTC one.
func local(first, last string) func(*MilestoneDefinition) {
	return func(d *MilestoneDefinition) {
		d.PeriodStartAtUtc, d.PeriodEndAtUtc = time.Time{}, nil
		d.PeriodStartDate, d.PeriodEndDate = first, last
	}
}

func TestMilestoneDefinitionValidate(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	before := start.Add(-time.Hour)
	tests := []struct {
		name  string
		given func(*MilestoneDefinition)
		want  []string // bad fields, in order
	}{
		{"valid", func(*MilestoneDefinition) {}, nil},
		{"valid open-ended, all sports", func(d *MilestoneDefinition) { d.SportTypes = nil }, nil},
		{"valid count", func(d *MilestoneDefinition) { d.Metric, d.Target = MetricCount, 20 }, nil},
		{"valid fractional distance", func(d *MilestoneDefinition) { d.Target = 42195.5 }, nil},
		{"missing model", func(d *MilestoneDefinition) { d.ModelID = " " }, []string{"modelId"}},
		{"model id with separator", func(d *MilestoneDefinition) { d.ModelID = "a#b" }, []string{"modelId"}},
		{"missing title", func(d *MilestoneDefinition) { d.Title = "  " }, []string{"title"}},
		{"long title", func(d *MilestoneDefinition) { d.Title = strings.Repeat("é", MaxTitleLength+1) }, []string{"title"}},
		{"title at limit", func(d *MilestoneDefinition) { d.Title = strings.Repeat("é", MaxTitleLength) }, nil},
		{"unknown metric", func(d *MilestoneDefinition) { d.Metric = "calories" }, []string{"metric"}},
		{"zero target", func(d *MilestoneDefinition) { d.Target = 0 }, []string{"target"}},
		{"negative target", func(d *MilestoneDefinition) { d.Target = -5 }, []string{"target"}},
		{"NaN target", func(d *MilestoneDefinition) { d.Target = math.NaN() }, []string{"target"}},
		{"huge target", func(d *MilestoneDefinition) { d.Target = 2e9 }, []string{"target"}},
		{"distance rounding to zero millimetres", func(d *MilestoneDefinition) { d.Target = 0.0004 }, []string{"target"}},
		{"one millimetre", func(d *MilestoneDefinition) { d.Target = 0.001 }, nil},
		{"fractional count", func(d *MilestoneDefinition) { d.Metric, d.Target = MetricCount, 2.5 }, []string{"target"}},
		{"fractional seconds", func(d *MilestoneDefinition) { d.Metric, d.Target = MetricMovingTime, 0.5 }, []string{"target"}},
		{"empty sport type", func(d *MilestoneDefinition) { d.SportTypes = []string{"Run", ""} }, []string{"sportTypes"}},
		{"sport type in the wrong case never matches", func(d *MilestoneDefinition) { d.SportTypes = []string{"run"} }, []string{"sportTypes"}},
		{"sport type Strava does not have", func(d *MilestoneDefinition) { d.SportTypes = []string{"Jogging"} }, []string{"sportTypes"}},
		{"duplicate sport type", func(d *MilestoneDefinition) { d.SportTypes = []string{"Run", "Run"} }, []string{"sportTypes"}},
		{"missing start", func(d *MilestoneDefinition) { d.PeriodStartAtUtc = time.Time{} }, []string{"periodStartAtUtc"}},
		{"end before start", func(d *MilestoneDefinition) { d.PeriodEndAtUtc = &before }, []string{"periodEndAtUtc"}},
		{"end equals start", func(d *MilestoneDefinition) { d.PeriodEndAtUtc = &start }, []string{"periodEndAtUtc"}},
		{"local March", local("2026-03-01", "2026-03-31"), nil},
		{"local single day", local("2026-03-01", "2026-03-01"), nil},
		{"local open-ended", local("2026-03-01", ""), nil},
		{"local impossible start", local("2026-02-30", ""), []string{"periodStartDate"}},
		{"local impossible end", local("2026-03-01", "2026-04-31"), []string{"periodEndDate"}},
		{"local end before start", local("2026-03-01", "2026-02-28"), []string{"periodEndDate"}},
		{"local end without start", local("", "2026-03-31"), []string{"periodStartDate"}},
		{"both forms", func(d *MilestoneDefinition) { d.PeriodStartDate = "2026-03-01" }, []string{"periodStartDate"}},
		{"local start with a UTC end", func(d *MilestoneDefinition) {
			local("2026-03-01", "")(d)
			d.PeriodEndAtUtc = &start
		}, []string{"periodStartDate"}},
		{"no part count", func(d *MilestoneDefinition) { d.PartCount = 0 }, []string{"partCount"}},
		{"too many parts", func(d *MilestoneDefinition) { d.PartCount = 100 }, []string{"partCount"}},
		{"every field bad at once", func(d *MilestoneDefinition) {
			*d = MilestoneDefinition{Metric: "x", Target: -1, SportTypes: []string{""}}
		}, []string{"modelId", "title", "metric", "target", "sportTypes", "periodStartAtUtc", "partCount"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := validDefinition()
			tt.given(&d)
			err := d.Validate()
			var got []string
			var ve *ValidationError
			if errors.As(err, &ve) {
				for _, f := range ve.Fields {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatalf("Validate() = %v, want a *ValidationError or nil", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("bad fields = %v, want %v (error: %v)", got, tt.want, err)
			}
			if tt.want != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
		})
	}
}

func TestProgressConversion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		metric    Metric
		value     int64
		wantValue float64
	}{
		{"distance mm to m", MetricDistance, 42195000, 42195},
		{"elevation mm to m", MetricElevation, 250500, 250.5},
		{"moving time in seconds", MetricMovingTime, 1800, 1800},
		{"count", MetricCount, 1, 1},
		{"streak days", MetricStreak, 12, 12},
		{"negative stays", MetricCount, -1, -1},
	}
	for _, tt := range tests {
		if got := tt.metric.ProgressInUnit(tt.value); got != tt.wantValue {
			t.Errorf("%s: ProgressInUnit(%d) = %v, want %v", tt.name, tt.value, got, tt.wantValue)
		}
	}
}

// TestValidateProjectableIsValidatesProjectionPart: what the projector
// checks is Validate without the stored-only checks (model id, title, sport
// types, the target's upper bound and wholeness), in the same words.
func TestValidateProjectableIsValidatesProjectionPart(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		given func(*MilestoneDefinition)
		want  []string // fields ValidateProjectable names, in order
	}{
		{"valid", func(*MilestoneDefinition) {}, nil},
		{"names and sports are not the projector's concern", func(d *MilestoneDefinition) {
			d.ModelID, d.Title, d.SportTypes = "", "", []string{"run", "run"}
		}, nil},
		{"huge target still projects", func(d *MilestoneDefinition) { d.Target = 2e9 }, nil},
		{"fractional count still projects", func(d *MilestoneDefinition) { d.Metric, d.Target = MetricCount, 2.5 }, nil},
		{"distance rounding to zero millimetres", func(d *MilestoneDefinition) { d.Target = 0.0004 }, []string{"target"}},
		{"unknown metric", func(d *MilestoneDefinition) { d.Metric = "calories" }, []string{"metric"}},
		{"end equals start", func(d *MilestoneDefinition) { d.PeriodEndAtUtc = &start }, []string{"periodEndAtUtc"}},
		{"every field bad at once", func(d *MilestoneDefinition) {
			*d = MilestoneDefinition{Metric: "x", Target: -1, SportTypes: []string{""}}
		}, []string{"metric", "target", "periodStartAtUtc", "partCount"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := validDefinition()
			tt.given(&d)
			var got []string
			var proj, full *ValidationError
			if err := d.ValidateProjectable(); errors.As(err, &proj) {
				for _, f := range proj.Fields {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatalf("ValidateProjectable() = %v, want a *ValidationError or nil", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("bad fields = %v, want %v", got, tt.want)
			}
			if proj == nil {
				return
			}
			if !errors.As(d.Validate(), &full) {
				t.Fatalf("Validate() passes what ValidateProjectable refuses: %v", proj)
			}
			for _, f := range proj.Fields {
				if !slices.Contains(full.Fields, f) {
					t.Errorf("ValidateProjectable says %+v; Validate says %+v", f, full.Fields)
				}
			}
		})
	}
}
