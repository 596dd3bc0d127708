package purge

// AfterChunk sets a function called after each chunk of workout deletes
// (tests reconnect an athlete in the middle of a purge through it).
func (s *Purger) AfterChunk(f func(deleted int)) { s.afterChunk = f }
