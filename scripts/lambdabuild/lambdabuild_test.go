package lambdabuild

import (
	"slices"
	"testing"
)

func TestWithoutRaceKeepsEveryOtherFlag(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env, out []string
	}{
		{"race alone", []string{"HOME=/h", "GOFLAGS=-race"}, []string{"HOME=/h", "GOFLAGS="}},
		{"race among others", []string{"GOFLAGS=-mod=mod -race=true -count=1"}, []string{"GOFLAGS=-mod=mod -count=1"}},
		{"no race", []string{"GOFLAGS=-mod=mod", "PATH=/bin"}, []string{"GOFLAGS=-mod=mod", "PATH=/bin"}},
		{"no GOFLAGS", []string{"PATH=/bin"}, []string{"PATH=/bin"}},
	} {
		if got := WithoutRace(tc.env); !slices.Equal(got, tc.out) {
			t.Errorf("%s: WithoutRace(%q) = %q, want %q", tc.name, tc.env, got, tc.out)
		}
	}
}
