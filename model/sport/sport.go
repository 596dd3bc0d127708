// Package sport is Strava's SportType vocabulary: the names Strava gives an
// activity's sport_type (its API reference and swagger), and the groups a
// milestone may name instead ("group:rides"), which expand into explicit
// types when the milestone is created, so the projection stays a plain
// filter on the stored names.
package sport

import (
	"fmt"
	"slices"
	"strings"
)

// Types are Strava's SportType values, as the API spells them.
var Types = []string{
	"AlpineSki", "BackcountrySki", "Badminton", "Canoeing", "Crossfit", "EBikeRide", "EMountainBikeRide",
	"Elliptical", "Golf", "GravelRide", "Handcycle", "HighIntensityIntervalTraining", "Hike", "IceSkate",
	"InlineSkate", "Kayaking", "Kitesurf", "MountainBikeRide", "NordicSki", "Pickleball", "Pilates",
	"Racquetball", "Ride", "RockClimbing", "RollerSki", "Rowing", "Run", "Sail", "Skateboard", "Snowboard",
	"Snowshoe", "Soccer", "Squash", "StairStepper", "StandUpPaddling", "Surfing", "Swim", "TableTennis",
	"Tennis", "TrailRun", "Velomobile", "VirtualRide", "VirtualRow", "VirtualRun", "Walk", "WeightTraining",
	"Wheelchair", "Windsurf", "Workout", "Yoga",
}

// GroupPrefix starts the name of a group.
const GroupPrefix = "group:"

// Groups are the documented groups of sport types a milestone may name
// (README, OpenAPI): each expands into its types at creation.
var Groups = map[string][]string{
	"group:runs":   {"Run", "TrailRun", "VirtualRun"},
	"group:rides":  {"Ride", "MountainBikeRide", "GravelRide", "EBikeRide", "EMountainBikeRide", "VirtualRide", "Velomobile", "Handcycle"},
	"group:walks":  {"Walk", "Hike"},
	"group:foot":   {"Run", "TrailRun", "VirtualRun", "Walk", "Hike", "Snowshoe"},
	"group:swims":  {"Swim"},
	"group:water":  {"Canoeing", "Kayaking", "Kitesurf", "Rowing", "Sail", "StandUpPaddling", "Surfing", "VirtualRow", "Windsurf"},
	"group:winter": {"AlpineSki", "BackcountrySki", "IceSkate", "NordicSki", "RollerSki", "Snowboard", "Snowshoe"},
}

// Known reports whether name is one of Strava's sport types.
func Known(name string) bool {
	_, ok := slices.BinarySearch(Types, name)
	return ok
}

// Expand replaces every group in names by its types and drops repeats,
// keeping the first appearance's order. It returns the names it does not
// know (neither a type, case included, nor a group), each with a hint when
// only its case differs from a type: "run" is not "Run".
func Expand(names []string) (out []string, unknown []string) {
	seen := map[string]bool{}
	add := func(t string) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, n := range names {
		switch group, isGroup := Groups[n]; {
		case isGroup:
			for _, t := range group {
				add(t)
			}
		case Known(n):
			add(n)
		default:
			unknown = append(unknown, n)
		}
	}
	return out, unknown
}

// Unknown describes a name Expand did not know, with the type it likely
// meant when only the case differs.
func Unknown(name string) string {
	for _, t := range Types {
		if strings.EqualFold(t, name) {
			return fmt.Sprintf("%q is not a Strava sport type (did you mean %q?)", name, t)
		}
	}
	if strings.HasPrefix(name, GroupPrefix) {
		return fmt.Sprintf("%q is not a sport group (%s)", name, strings.Join(GroupNames(), ", "))
	}
	return fmt.Sprintf("%q is not a Strava sport type", name)
}

// GroupNames are the groups' names, sorted.
func GroupNames() []string {
	out := make([]string, 0, len(Groups))
	for g := range Groups {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}
