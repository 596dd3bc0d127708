package budget

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/emf"
)

// Reads is an instance's spending of Strava reads on events: the
// application's shared budget (check.go: CheckBudget before a read,
// ObserveRate after each answer) and each athlete's read caps (this file).
// The fetcher and the burst walks of one worker share one.
type Reads struct {
	// Caps are the athletes' shared read counters.
	Caps ReadCaps
	// Rate is the shared rate-limit reading.
	Rate RateStore
	// Cache is the instance's copy of that reading, shared with the sync
	// jobs' pages (handlers/app).
	Cache *RateCache
	// PerWindow caps Strava reads per athlete per rate window (0: no cap).
	PerWindow int
	// PerDay caps Strava reads per athlete per UTC day (0: no daily cap).
	PerDay int
	// RateWindow is Strava's short rate-limit window (keys.AthleteReadsWindow
	// when zero; shorter only against a simulator, CC_STRAVA_WINDOW).
	RateWindow time.Duration
	// Reserve is the share of a rate-limit budget kept free.
	Reserve float64
	// Now is the clock.
	Now func() time.Time
	// Metrics receives the AthleteReadShare EMF lines (nil: none).
	Metrics io.Writer
	// Log receives what could not be recorded.
	Log *slog.Logger

	tally readTally
}

// NewReads returns the reads over the caps' counters and the shared rate
// reading, with the default caps and reserve.
func NewReads(caps ReadCaps, rate RateStore, log *slog.Logger) *Reads {
	return &Reads{Caps: caps, Rate: rate, Cache: new(RateCache), PerWindow: DefaultAthleteReadsPerWindow, PerDay: DefaultAthleteReadsPerDay,
		Reserve: DefaultReserve, Now: func() time.Time { return time.Now().UTC() }, Log: log}
}

// ReadCaps are an athlete's shared read counters (model/store/limits).
type ReadCaps interface {
	// TakeAthleteReads counts n Strava reads for the athlete in the window
	// (of length windowLen) containing now and returns the window's count
	// after them (every instance's); ErrConflict when that would count
	// more than limit.
	TakeAthleteReads(ctx context.Context, athleteID int64, now time.Time, windowLen time.Duration, limit, n int) (int, error)
	// TakeAthleteDayReads counts n Strava reads for the athlete in the UTC
	// day containing now; ErrConflict when that would count more than limit.
	TakeAthleteDayReads(ctx context.Context, athleteID int64, now time.Time, limit, n int) error
	// TakeUnverifiedReads and TakeUnverifiedDayReads count n reads of the
	// athlete's unverified allowance (caps.go) in the window or the UTC
	// day containing now; ErrConflict when that would count more than limit.
	TakeUnverifiedReads(ctx context.Context, athleteID int64, now time.Time, windowLen time.Duration, limit, n int) error
	TakeUnverifiedDayReads(ctx context.Context, athleteID int64, now time.Time, limit, n int) error
}

// The athletes' read caps by default.
const (
	// DefaultAthleteReadsPerWindow caps the Strava reads one athlete's
	// events may cause per 15-minute window (CC_ATHLETE_READS_PER_WINDOW):
	// a flood of (forged) events for one athlete waits instead of spending
	// the application's budget. 30 is far above what one athlete uploads.
	DefaultAthleteReadsPerWindow = 30
	// DefaultAthleteReadsPerDay caps the Strava reads one athlete's events
	// may cause per UTC day (CC_ATHLETE_READS_PER_DAY): a tenth of
	// Strava's default daily read budget, so that no handful of athletes
	// can spend the day's budget, and far above an honest day (a bulk
	// upload of a year costs a few list pages).
	DefaultAthleteReadsPerDay = 100
)

// maxTallied bounds the athletes an instance tallies at once.
const maxTallied = 10000

// The athlete's read caps (AthleteReadsPerWindow, AthleteReadsPerDay) are
// shared counters per athlete and window (STRAVA#ATHLETE#{id} /
// READS#{window}) and per athlete and UTC day (READSDAY#{day}), but an
// athlete who uploads one activity in a window is nowhere near them:
// touching the counters for every read would cost every event a write. So
// each instance keeps its own tally per athlete (readTally) and reads without
// touching the counters while its tally in the window is under
// localReadAllowance (at most half the cap) and its reads the day counter has
// not seen are under localDayAllowance. Past either it adds every read not
// yet counted, its own earlier ones included, with a condition that the
// counter stays within its cap: from then on this instance's reads are
// counted exactly and refused at the caps. Across instances, each may spend
// localReadAllowance reads of an athlete per window unseen by the window
// counter, and at most localDayAllowance unseen by the day counter (the
// tally carries unseen reads from window to window within the day), so the
// daily overshoot is bounded by localDayAllowance per concurrent instance.
// The local stack is one instance: there the caps are exact. The
// application-wide budget check still bounds them all.
const (
	localReadAllowance = 3
	localDayAllowance  = 6
)

// readTally is the instance's own count of Strava reads per athlete in the
// current window, and how many of them the shared counters have not seen.
type readTally struct {
	mu sync.Mutex
	m  map[int64]tally
}

type tally struct {
	window, day time.Time
	// reads in the window; unshared: not on the window counter;
	// dayUnshared: not on the day counter (carried across windows).
	reads, unshared, dayUnshared int
}

// take counts one read of the athlete at now. It returns how many reads the
// window and day counters must take now (0, 0: the read stays within the
// instance's allowances); the caller reports a refusal with settle.
func (t *readTally) take(athleteID int64, window, day time.Time, allowance int) (addWindow, addDay int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil || len(t.m) >= maxTallied {
		t.m = make(map[int64]tally)
	}
	c := t.m[athleteID]
	if !c.day.Equal(day) {
		c = tally{day: day}
	}
	if !c.window.Equal(window) {
		c.window, c.reads, c.unshared = window, 0, 0
	}
	c.reads++
	c.dayUnshared++
	switch {
	case c.reads > allowance:
		addWindow, addDay = c.unshared+1, c.dayUnshared
		c.unshared, c.dayUnshared = 0, 0
	case c.dayUnshared > localDayAllowance:
		addDay = c.dayUnshared
		c.unshared++
		c.dayUnshared = 0
	default:
		c.unshared++
	}
	t.m[athleteID] = c
	return addWindow, addDay
}

// settle undoes take's count when a shared counter refused it: the read is
// not made, and the reads the counters did not take stay unshared.
func (t *readTally) settle(athleteID int64, window time.Time, addWindow, addDay int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.m[athleteID]
	if !ok || !c.window.Equal(window) {
		return
	}
	c.reads--
	c.dayUnshared += max(addDay-1, 0)
	if addWindow > 0 {
		c.unshared += addWindow - 1
	} else {
		c.unshared--
	}
	t.m[athleteID] = c
}

// refund takes back one read counted at window and day by take, which was
// made and is charged elsewhere (MoveReadToUnverified). A read the shared
// counters took already is taken back from this instance's next share
// (unshared below zero: the next add is one smaller), so neither counter
// keeps it; once the window (or day) has moved on, there is nothing left
// to take back there.
func (t *readTally) refund(athleteID int64, window, day time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.m[athleteID]
	if !ok || !c.day.Equal(day) {
		return
	}
	c.dayUnshared--
	if c.window.Equal(window) {
		c.reads--
		c.unshared--
	}
	t.m[athleteID] = c
}

// Uploads keep a reserve of the caps. An update or a delete names an
// activity id, and activity ids are public: anyone can post them in a real
// athlete's name, and each names a stored activity that must be asked about
// alone. So the reads of updates and deletes may fill each cap only up to
// editsShare of it; the rest stays for the athlete's new uploads (creates,
// and the list walks that serve them), which no flood of updates and
// deletes can spend. An edit held back waits for the next window (or day),
// and reconciliation catches what Strava does not push again.
func editsShare(limit int) int {
	if limit <= 0 {
		return limit
	}
	return max(limit-limit/3, 1)
}

// TakeAthleteRead counts one Strava read against the athlete's caps
// (AthleteReadsPerWindow, AthleteReadsPerDay, see readTally; an edit, not
// upload, only up to editsShare of each); an ingest.DeferError (AthleteCap
// set) to the next window, or the next UTC day, when a cap is reached.
func (r *Reads) TakeAthleteRead(ctx context.Context, job ingest.Job, upload bool) error {
	limit, dayLimit := r.PerWindow, r.PerDay
	if limit <= 0 && dayLimit <= 0 {
		return nil
	}
	kind := "strava reads"
	if !upload {
		limit, dayLimit, kind = editsShare(limit), editsShare(dayLimit), "strava reads for updates and deletes (a third is kept for uploads)"
	}
	allowance := min(localReadAllowance, limit/2)
	if limit <= 0 {
		allowance = math.MaxInt32 // only the day counts
	}
	ev := job.Event
	now := r.Now()
	win := r.Window()
	window, day := now.UTC().Truncate(win), now.UTC().Truncate(24*time.Hour)
	addWindow, addDay := r.tally.take(ev.OwnerID, window, day, allowance)
	var (
		err    error
		shared int // the window counter's reads after ours: every instance's
	)
	if addWindow > 0 && r.PerWindow > 0 {
		if shared, err = r.Caps.TakeAthleteReads(ctx, ev.OwnerID, now, win, limit, addWindow); errors.Is(err, model.ErrConflict) {
			r.tally.settle(ev.OwnerID, window, addWindow, addDay)
			return r.heldBack(job, window.Add(win), fmt.Sprintf("athlete %d reached %d %s in this window", ev.OwnerID, limit, kind))
		}
	}
	if err == nil && addDay > 0 && dayLimit > 0 {
		// The window's counter has taken the reads already; a refusal
		// here leaves them counted there (erring on fewer reads).
		if err = r.Caps.TakeAthleteDayReads(ctx, ev.OwnerID, now, dayLimit, addDay); errors.Is(err, model.ErrConflict) {
			r.tally.settle(ev.OwnerID, window, addWindow, addDay)
			return r.heldBack(job, day.Add(24*time.Hour), fmt.Sprintf("athlete %d reached the daily allowance of %d %s", ev.OwnerID, dayLimit, kind))
		}
	}
	if err != nil {
		r.tally.settle(ev.OwnerID, window, addWindow, addDay)
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	if shared > 0 {
		r.reportShare(ev.OwnerID, shared, now)
	}
	return nil
}

// TakeUnverifiedRead takes a read that only unverified events ask for (a
// walk's deeper pages, a second look, a fetch alone of an activity a walk
// did not list) from the athlete's unverified allowance: counters of their
// own (keys.UnverifiedReadsKey), as large as the athlete's caps, apart from
// them. Activity and athlete ids are public, so such reads may be a
// forger's; spent, they wait for the allowance's next window or UTC day
// (AthleteCap: held back), and the athlete's own uploads and edits go on.
func (r *Reads) TakeUnverifiedRead(ctx context.Context, job ingest.Job) error {
	limit, dayLimit := r.PerWindow, r.PerDay
	now, win, owner := r.Now(), r.Window(), job.Event.OwnerID
	if limit > 0 {
		if err := r.Caps.TakeUnverifiedReads(ctx, owner, now, win, limit, 1); errors.Is(err, model.ErrConflict) {
			return r.heldBack(job, now.UTC().Truncate(win).Add(win),
				fmt.Sprintf("athlete %d reached %d unverified reads in this window", owner, limit))
		} else if err != nil {
			return fmt.Errorf("process %s: %w", job.CorrelationID, err)
		}
	}
	if dayLimit > 0 {
		if err := r.Caps.TakeUnverifiedDayReads(ctx, owner, now, dayLimit, 1); errors.Is(err, model.ErrConflict) {
			return r.heldBack(job, now.UTC().Truncate(24*time.Hour).Add(24*time.Hour),
				fmt.Sprintf("athlete %d reached the daily allowance of %d unverified reads", owner, dayLimit))
		} else if err != nil {
			return fmt.Errorf("process %s: %w", job.CorrelationID, err)
		}
	}
	return nil
}

// MoveReadToUnverified moves a read taken at tookAt from the athlete's caps
// to the athlete's unverified allowance: a burst's page on the caps that
// listed none of the burst's events, or a probe's read by id of a create
// Strava did not have, was asked for by unverified events only (forged
// creates naming the athlete, or uploads the list does not show yet,
// which later pages and walks serve from that allowance). The allowance
// counts the read past its cap too (it was made); a counter that fails is
// logged and the caps keep the read.
func (r *Reads) MoveReadToUnverified(ctx context.Context, log *slog.Logger, job ingest.Job, tookAt time.Time) {
	limit, dayLimit := r.PerWindow, r.PerDay
	if limit <= 0 && dayLimit <= 0 {
		return // TakeAthleteRead counted nothing
	}
	win, owner := r.Window(), job.Event.OwnerID
	var err error
	if limit > 0 {
		err = r.Caps.TakeUnverifiedReads(ctx, owner, tookAt, win, math.MaxInt32, 1)
	}
	if err == nil && dayLimit > 0 {
		err = r.Caps.TakeUnverifiedDayReads(ctx, owner, tookAt, math.MaxInt32, 1)
	}
	if err != nil {
		log.WarnContext(ctx, "a read only unverified events asked for could not move to their allowance; it stays on the athlete's caps", "error", err)
		return
	}
	r.tally.refund(owner, tookAt.UTC().Truncate(win), tookAt.UTC().Truncate(24*time.Hour))
}

// heldBack is the deferral of a job whose athlete reached a read cap.
func (r *Reads) heldBack(job ingest.Job, until time.Time, reason string) error {
	return fmt.Errorf("process %s: %w", job.CorrelationID, &ingest.DeferError{Until: until, Reason: reason, AthleteCap: true})
}

// reportShare writes the AthleteReadShare metric: the athlete's reads in
// this window on the shared counter (every instance's, as the counter
// answered the add) as a percentage of the application's read budget per
// window (Strava's reported limit, else its default). Only athletes past
// an instance's allowance are reported, so the metric's maximum is the
// heaviest athlete of the period; Terraform alarms on it.
func (r *Reads) reportShare(athleteID int64, reads int, now time.Time) {
	limit := DefaultReadShortLimit
	if st := r.Cache.Peek(); st != nil && st.ReadShortLimit > 0 {
		limit = st.ReadShortLimit
	}
	err := WriteEMF(r.Metrics, now, "Service", "worker", []emf.Value{
		{Name: MetricAthleteReadShare, Unit: "Percent", Value: float64(int64(reads * 100 / limit))}})
	if err != nil {
		r.Log.Warn("athlete read share metric not written", "athleteId", athleteID, "error", err)
	}
}

// Metrics of the athletes' read caps (the worker's namespace,
// WorkerMetricsNamespace).
const (
	// MetricAthleteReadShare is the largest share (percent) of the
	// application's read window one athlete took (AthleteReadShare alarm).
	MetricAthleteReadShare = "AthleteReadShare"
)
