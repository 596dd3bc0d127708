package keys

import "strconv"

// Sources of parked records: the failure paths that park instead of
// dropping, read back by redrive.
const (
	// ParkSourceProjector holds stream records the projector gave up on.
	ParkSourceProjector = "PROJECTOR"
	// ParkSourceWorker holds ingestion jobs that failed for good.
	ParkSourceWorker = "WORKER"
)

// ParkedShards is how many partitions the records of one parking source
// (ParkSourceProjector, ParkSourceWorker) spread over, by a hash of the
// record id: a burst of failures (a poison batch, a Strava outage) never
// writes one partition past its 1,000 writes/s. Readers query every shard
// (ParkedPartitions). Changing it moves where new records land; readers
// must query the old count's shards until those records expire.
const ParkedShards = 8

// ParkedPK is a source's unsharded partition: where records were parked
// before ParkedShards (still read, by ParkedPartitions, until they expire
// after ParkedRetentionDays) and the audit subject of a record parked
// without a user.
func ParkedPK(source string) string { return PrefixParked + source }

// ParkedShardPK is one shard of a source's parked records:
// PARKED#{source}#{shard}.
func ParkedShardPK(source string, shard int) string {
	return ParkedPK(source) + sep + strconv.Itoa(shard)
}

// ParkedPartitions lists every partition holding a source's parked
// records: the ParkedShards shards, then the unsharded legacy partition.
func ParkedPartitions(source string) []string {
	out := make([]string, 0, ParkedShards+1)
	for i := range ParkedShards {
		out = append(out, ParkedShardPK(source, i))
	}
	return append(out, ParkedPK(source))
}

// ParkedKey addresses one parked record, in the shard of a hash of its id
// (the local stand-in for a DLQ).
func ParkedKey(source, id string) Key {
	return Key{ParkedShardPK(source, shardOf(id, ParkedShards)), id}
}

// LegacyParkedKey addresses a record parked before ParkedShards (in the
// unsharded partition).
func LegacyParkedKey(source, id string) Key { return Key{ParkedPK(source), id} }
