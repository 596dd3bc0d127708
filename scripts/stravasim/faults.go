package stravasim

import (
	"cmp"
	"net/http"
	"net/http/httptest"
	"time"
)

// Fault scripts the answers of upcoming activity requests (AddFault): a
// status instead of the activity (5xx, 429 …), a pause before the answer, or
// both. The chaos suite (test/chaos) builds its Strava outages from these.
type Fault struct {
	// Endpoint is the endpoint the fault applies to: EndpointActivity (the
	// default) or EndpointList.
	Endpoint Endpoint
	// ActivityID limits the fault to requests for one activity (0: any).
	ActivityID int64
	// Status, when not 0, is answered instead of the activity, with
	// Strava's error body and the rate-limit headers.
	Status int
	// Delay holds the answer this long. The answer is decided before the
	// pause, so a slow answer is a stale one when the activity changes
	// meanwhile; a Delay beyond the client's timeout is a timeout (the
	// answer is dropped when the client has gone).
	Delay time.Duration
	// Gate, when not nil, holds the (already decided) answer until Gate is
	// closed (Delay follows): tests order a stale answer exactly after the
	// change that makes it stale.
	Gate <-chan struct{}
	// Decided, when not nil, is sent to (without blocking: give it room)
	// once the answer is decided, before Gate and Delay: a test then
	// knows the answer it holds back is the one of that moment.
	Decided chan<- struct{}
	// Count is how many requests the fault applies to (default 1).
	Count int
}

// AddFault queues f behind the faults already queued. A request takes the
// first queued fault that matches its activity; FailNext answers take
// precedence over faults.
func (s *Server) AddFault(f Fault) {
	if f.Count <= 0 {
		f.Count = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// ClearFaults drops every queued fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// takeFault consumes one use of the first activity fault matching
// activityID (the zero Fault when none matches).
func (s *Server) takeFault(activityID int64) Fault {
	return s.takeEndpointFault(EndpointActivity, activityID)
}

// takeEndpointFault consumes one use of the first fault of endpoint
// matching activityID.
func (s *Server) takeEndpointFault(e Endpoint, activityID int64) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if cmp.Or(f.Endpoint, EndpointActivity) != e || (f.ActivityID != 0 && f.ActivityID != activityID) {
			continue
		}
		s.faults[i].Count--
		if s.faults[i].Count <= 0 {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
		}
		if f.Status != 0 || f.Delay > 0 || f.Gate != nil {
			s.stats.scriptedFailures.Add(1)
		}
		return f
	}
	return Fault{}
}

// SpendReadWindow spends the read budget of the current 15-minute window:
// read usage is raised to its limit, so every later activity request is
// answered 429 with headers saying the window is used up, until the window
// resets. resetIn moves that reset to resetIn from now (0: the end of the
// current window, the next quarter hour on Strava; see Options.Window), so
// tests need not wait up to 15 minutes.
func (s *Server) SpendReadWindow(resetIn time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rollLocked()
	l := s.opts.Limits
	s.usage[2] = max(s.usage[2], l.ReadShort)
	s.usage[3] = max(s.usage[3], s.usage[2])
	s.usage[0] = max(s.usage[0], s.usage[2])
	s.usage[1] = max(s.usage[1], s.usage[0])
	s.windowEnd = time.Time{}
	if resetIn > 0 {
		s.windowEnd = s.opts.Now().Add(resetIn)
	}
}

// Activities returns a copy of every activity the simulator holds now (what
// Strava would answer), by id.
func (s *Server) Activities() map[int64]Activity {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int64]Activity, len(s.activities))
	for id, a := range s.activities {
		out[id] = a
	}
	return out
}

// answerLater writes the recorded answer to w as f scripts it: it says
// the answer is decided (f.Decided), then writes it once f.Gate (when not
// nil) is closed and f.Delay has passed, unless the client gives up first
// (a timeout: nothing is written).
func answerLater(w http.ResponseWriter, r *http.Request, rec *httptest.ResponseRecorder, f Fault) {
	if f.Decided != nil {
		select {
		case f.Decided <- struct{}{}:
		default:
		}
	}
	delay, gate := f.Delay, f.Gate
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}
