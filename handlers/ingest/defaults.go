package ingest

// DefaultMaxFailures bounds the retryable failures of one job before it is
// parked (the outbox runner's policy, which a sync job's state follows).
const DefaultMaxFailures = 6
