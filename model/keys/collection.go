package keys

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PrefixCollected starts the sort key of an award's entry in the user's
// collection (CollectedAwardSK).
const PrefixCollected = "AWARD#"

// CollectedAwardSK is the sort key of an award's collection entry:
// AWARD#{awardedAtUtc, fixed-width RFC 3339 with nanoseconds}#{owner}#{part,
// two digits}, the owner being the milestone or the series' period
// (AwardOwnerID). The user's awards sort by the time they were minted, so the
// collection pages newest first with one Query, and an entry outlives its
// milestone (a deleted milestone's awards stay in the collection).
func CollectedAwardSK(awardedAtUtc time.Time, milestoneID string, partIndex int) string {
	return fmt.Sprintf("%s%s%s%s%s%02d", PrefixCollected, awardedAtUtc.UTC().Format(workoutDateLayout), sep, milestoneID, sep, partIndex)
}

// CollectedAwardKey addresses an award's collection entry.
func CollectedAwardKey(userID string, awardedAtUtc time.Time, milestoneID string, partIndex int) Key {
	return Key{UserPK(userID), CollectedAwardSK(awardedAtUtc, milestoneID, partIndex)}
}

// ParseCollectedAwardSK reads a CollectedAwardSK back; false when sk is not
// one.
func ParseCollectedAwardSK(sk string) (awardedAtUtc time.Time, milestoneID string, partIndex int, ok bool) {
	fields := strings.Split(strings.TrimPrefix(sk, PrefixCollected), sep)
	if !strings.HasPrefix(sk, PrefixCollected) || len(fields) != 3 {
		return time.Time{}, "", 0, false
	}
	at, err := time.Parse(workoutDateLayout, fields[0])
	part, perr := strconv.Atoi(fields[2])
	if err != nil || perr != nil || fields[1] == "" || part < 0 {
		return time.Time{}, "", 0, false
	}
	return at.UTC(), fields[1], part, true
}

// PrefixSeries starts the sort keys of a series' periods and their awards
// (SeriesPeriodSK), outside the milestone range the projector reads for
// every event: a series' past never adds to an event's read.
const PrefixSeries = "SERIES#"

// SeriesSKPrefix is the prefix of every period (and award) of a series.
func SeriesSKPrefix(milestoneID string) string { return PrefixSeries + milestoneID + sep }

// SeriesPeriodSK is the sort key of one period of a series, by its first
// local day (YYYY-MM-DD); its awards follow it (SeriesAwardSK).
func SeriesPeriodSK(milestoneID, startDate string) string {
	return SeriesSKPrefix(milestoneID) + startDate
}

// SeriesPeriodKey addresses one period of a user's series.
func SeriesPeriodKey(userID, milestoneID, startDate string) Key {
	return Key{UserPK(userID), SeriesPeriodSK(milestoneID, startDate)}
}

// SeriesAwardKey addresses one minted part of a series' period.
func SeriesAwardKey(userID, milestoneID, startDate string, partIndex int) Key {
	return Key{UserPK(userID), fmt.Sprintf("%s%s%02d", SeriesPeriodSK(milestoneID, startDate), awardInfix, partIndex)}
}

// AwardOwnerID names whose parts an AWARD_MINTED entry counts
// (AwardMintedAuditKey): the milestone, or one period of a series
// ({milestoneId}.{first day}), so two periods' entries never share a key.
func AwardOwnerID(milestoneID, periodOf string) string {
	if periodOf == "" {
		return milestoneID
	}
	return milestoneID + "." + periodOf
}

// PrefixCollectionSummary starts the sort keys of a user's collection
// summary: the header CollectionSummaryHeaderSK (the summary counts every
// entry) and one item per model (CollectionSummarySK), read with one Query
// whatever the collection's size.
const PrefixCollectionSummary = "COLLECTION#SUM"

// CollectionSummaryHeaderSK is the sort key of the summary's header,
// written once every entry of the user's collection is counted.
const CollectionSummaryHeaderSK = PrefixCollectionSummary

// CollectionSummarySK is the sort key of the summary of the user's awards
// of one model: a count per part (CollectionSummaryPart).
func CollectionSummarySK(modelID string) string { return PrefixCollectionSummary + sep + modelID }

// CollectionSummaryKey addresses the summary of a user's awards of one
// model.
func CollectionSummaryKey(userID, modelID string) Key {
	return Key{UserPK(userID), CollectionSummarySK(modelID)}
}

// CollectionSummaryPart is the attribute of a model's summary item that
// counts the user's awards of part i (p{i}).
func CollectionSummaryPart(i int) string { return "p" + strconv.Itoa(i) }

// ParseCollectionSummaryPart reads a CollectionSummaryPart back; false for
// any other attribute.
func ParseCollectionSummaryPart(attr string) (int, bool) {
	rest, ok := strings.CutPrefix(attr, "p")
	i, err := strconv.Atoi(rest)
	return i, ok && err == nil && i >= 0 && strconv.Itoa(i) == rest
}
