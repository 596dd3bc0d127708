package sport_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/commitcollect/backend/model/sport"
)

func TestTypesAreSortedAndGroupsKnown(t *testing.T) {
	t.Parallel()
	if !slices.IsSorted(sport.Types) {
		t.Fatal("Types must stay sorted (Known searches them)")
	}
	for g, types := range sport.Groups {
		if !strings.HasPrefix(g, sport.GroupPrefix) {
			t.Errorf("group %q lacks the %q prefix", g, sport.GroupPrefix)
		}
		for _, ty := range types {
			if !sport.Known(ty) {
				t.Errorf("group %s names %q, not a Strava sport type", g, ty)
			}
		}
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		given       []string
		want        []string
		wantUnknown []string
	}{
		{"types stay", []string{"Run", "Ride"}, []string{"Run", "Ride"}, nil},
		{"a group expands", []string{"group:runs"}, []string{"Run", "TrailRun", "VirtualRun"}, nil},
		{"rides include mountain and gravel", []string{"group:rides"}, sport.Groups["group:rides"], nil},
		{"repeats drop, first order kept", []string{"Walk", "group:walks", "Run"}, []string{"Walk", "Hike", "Run"}, nil},
		{"case matters", []string{"run", "Run"}, []string{"Run"}, []string{"run"}},
		{"unknown group", []string{"group:flying"}, nil, []string{"group:flying"}},
		{"empty is every sport", nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, unknown := sport.Expand(tt.given)
			if !slices.Equal(got, tt.want) || !slices.Equal(unknown, tt.wantUnknown) {
				t.Fatalf("Expand(%q) = %q, %q; want %q, %q", tt.given, got, unknown, tt.want, tt.wantUnknown)
			}
		})
	}
	if msg := sport.Unknown("run"); !strings.Contains(msg, `did you mean "Run"`) {
		t.Fatalf("Unknown(run) = %q, want a hint", msg)
	}
}
