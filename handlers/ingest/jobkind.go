package ingest

// A JobKind names the kind of work a Job carries. The worker runs each
// kind with the handler registered for it (runner.Kinds, one line a kind
// in handlers/app's worker table).
type JobKind string

// The kinds the worker runs today. They predate JobKind and are told by
// the field they carry; a kind added later names itself in Job.Kind and
// carries its payload in Job.Work, so adding one touches its own package
// and its line of registration, never Job.
const (
	// JobEvent is a webhook event (Job.Event).
	JobEvent JobKind = "event"
	// JobSync is a page of an athlete's history (Job.Sync).
	JobSync JobKind = "sync"
	// JobBurst is an athlete's gathered activity events (Job.Burst).
	JobBurst JobKind = "burst"
)

// KindOf is the kind of work j carries: Kind when set, else the field it
// carries.
func (j Job) KindOf() JobKind {
	switch {
	case j.Kind != "":
		return j.Kind
	case len(j.Burst) > 0:
		return JobBurst
	case j.Sync != nil:
		return JobSync
	}
	return JobEvent
}
