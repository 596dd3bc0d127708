package stravasim

import (
	"cmp"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"time"

	"github.com/commitcollect/backend/scripts/stravasim/wire"
)

// ReadsOf counts the activity and list requests made with the athlete's
// tokens, whatever the answer: what one athlete's events cost the
// application's read budget.
func (s *Server) ReadsOf(athleteID int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readsBy[athleteID]
}

// rollLocked resets usage at quarter-hour (Options.Window) and UTC-midnight
// boundaries, as Strava does.
func (s *Server) rollLocked() {
	now := s.opts.Now().UTC()
	w := now.Truncate(s.opts.Window)
	if !w.Equal(s.window) || (!s.windowEnd.IsZero() && !now.Before(s.windowEnd)) {
		s.window, s.windowEnd, s.usage[0], s.usage[2] = w, time.Time{}, 0, 0
	}
	if d := now.Format(time.DateOnly); d != s.day {
		s.day, s.usage[1], s.usage[3] = d, 0, 0
	}
}

func (s *Server) setRateHeadersLocked(h http.Header) {
	l := s.opts.Limits
	h.Set("X-RateLimit-Limit", fmt.Sprintf("%d,%d", l.Short, l.Daily))
	h.Set("X-RateLimit-Usage", fmt.Sprintf("%d,%d", s.usage[0], s.usage[1]))
	h.Set("X-ReadRateLimit-Limit", fmt.Sprintf("%d,%d", l.ReadShort, l.ReadDaily))
	h.Set("X-ReadRateLimit-Usage", fmt.Sprintf("%d,%d", s.usage[2], s.usage[3]))
}

// FailNext makes the next n requests to endpoint answer status (401, 404,
// 429, 500 …) with Strava's error body, before any other check.
func (s *Server) FailNext(endpoint Endpoint, status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[endpoint] = append(s.fail[endpoint], failure{status: status, left: n})
}

// SetUsage sets the current window's usage counters (e.g. to bring the read
// budget close to its limit).
func (s *Server) SetUsage(short, daily, readShort, readDaily int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rollLocked()
	s.usage = [4]int{short, daily, readShort, readDaily}
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	return Stats{
		Authorizations: s.stats.authorizations.Load(), CodeExchanges: s.stats.codeExchanges.Load(),
		TokenRefreshes: s.stats.tokenRefreshes.Load(), RefusedTokens: s.stats.refusedTokens.Load(),
		ActivityFetches: s.stats.activityFetches.Load(), ActivityRequests: s.stats.activityRequests.Load(),
		Deauthorizations: s.stats.deauthorizations.Load(), ScriptedFailures: s.stats.scriptedFailures.Load(),
		WebhookDeliveries: s.stats.webhookDeliveries.Load(), ActivityInFlight: s.stats.activityInFlight.Load(),
		ListRequests: s.stats.listRequests.Load(), ListedActivities: s.stats.listedActivities.Load(),
		AthleteRequests: s.stats.athleteRequests.Load(),
	}
}

// takeFailure pops one scripted failure for endpoint (0 when none).
func (s *Server) takeFailure(e Endpoint) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.fail[e]
	for len(q) > 0 && q[0].left <= 0 {
		q = q[1:]
	}
	if len(q) == 0 {
		s.fail[e] = nil
		return 0
	}
	q[0].left--
	s.fail[e] = q
	s.stats.scriptedFailures.Add(1)
	return q[0].status
}

func activityJSON(a Activity) map[string]any {
	local, zone := a.local()
	return map[string]any{
		"resource_state": 3, "id": a.ID, "athlete": map[string]any{"id": a.AthleteID, "resource_state": 1},
		"name": a.Name, "sport_type": a.SportType, "type": a.SportType, "distance": a.Distance,
		"total_elevation_gain": a.TotalElevationGain, "moving_time": a.MovingTime, "elapsed_time": a.ElapsedTime,
		"start_date": a.StartDate.UTC().Format(time.RFC3339), "start_date_local": local,
		"timezone": zone, "private": a.Private, "manual": a.Manual, "trainer": a.Trainer, "commute": a.Commute,
	}
}

// apiRoutes serve the REST API's reads: the athlete, an activity, the athlete's activities, each through the rate limits and the faults.
type apiRoutes struct{ Server *Server }

// athlete answers GET /api/v3/athlete: the token's athlete, 401 for a token
// that is unknown (revoked) or expired. It spends a read of the budget.
func (s apiRoutes) athlete(w http.ResponseWriter, r *http.Request) {
	s.Server.stats.athleteRequests.Add(1)
	if s.refuseRead(w, EndpointAthlete, 0) {
		return
	}
	s.Server.mu.Lock()
	ti, ok := s.Server.access[wire.Bearer(r)]
	valid := ok && s.Server.opts.Now().Before(ti.expires)
	a, known := s.Server.athletes[ti.athlete]
	s.Server.mu.Unlock()
	if !valid {
		wire.Error(w, http.StatusUnauthorized, "Authorization Error", wire.Fault{Resource: "Athlete", Field: "access_token", Code: "invalid"})
		return
	}
	if !known {
		a = Athlete{ID: ti.athlete}
	}
	wire.JSON(w, http.StatusOK, map[string]any{"id": a.ID, "firstname": a.Firstname, "lastname": a.Lastname, "resource_state": 2})
}

// countReadOf counts a read request (an activity or a list) for the
// athlete whose token made it (ReadsOf).
func (s apiRoutes) countReadOf(r *http.Request) {
	s.Server.mu.Lock()
	defer s.Server.mu.Unlock()
	if ti, ok := s.Server.access[wire.Bearer(r)]; ok {
		if s.Server.readsBy == nil {
			s.Server.readsBy = map[int64]int64{}
		}
		s.Server.readsBy[ti.athlete]++
	}
}

func (s apiRoutes) activity(w http.ResponseWriter, r *http.Request) {
	s.countReadOf(r)
	s.Server.stats.activityRequests.Add(1)
	s.Server.stats.activityInFlight.Add(1)
	defer s.Server.stats.activityInFlight.Add(-1)
	id, idErr := strconv.ParseInt(r.PathValue("id"), 10, 64)
	f := s.Server.takeFault(id)
	// The answer is decided now and written after the fault's delay.
	rec := httptest.NewRecorder()
	s.answerActivity(rec, r, id, idErr, f.Status)
	answerLater(w, r, rec, f)
}

// spendRead counts one read request against every budget, sets the
// rate-limit headers and reports whether a budget is exceeded (429).
func (s apiRoutes) spendRead(h http.Header) (over bool) {
	s.Server.mu.Lock()
	defer s.Server.mu.Unlock()
	s.Server.rollLocked()
	for i := range s.Server.usage {
		s.Server.usage[i]++
	}
	s.Server.setRateHeadersLocked(h)
	return s.Server.usage[0] > s.Server.opts.Limits.Short || s.Server.usage[1] > s.Server.opts.Limits.Daily ||
		s.Server.usage[2] > s.Server.opts.Limits.ReadShort || s.Server.usage[3] > s.Server.opts.Limits.ReadDaily
}

// refuseRead spends one read of the rate budget (its headers go on w) and
// answers the read with an error instead when a scripted failure, a fault
// or the spent budget says so; it reports whether it did.
func (s apiRoutes) refuseRead(w http.ResponseWriter, e Endpoint, faultStatus int) bool {
	over := s.spendRead(w.Header())
	st := s.Server.takeFailure(e)
	if st == 0 {
		st = faultStatus
	}
	if st == 0 && over {
		st = http.StatusTooManyRequests
	}
	if st != 0 {
		wire.Status(w, st)
	}
	return st != 0
}

func (s apiRoutes) answerActivity(w http.ResponseWriter, r *http.Request, id int64, idErr error, faultStatus int) {
	if s.refuseRead(w, EndpointActivity, faultStatus) {
		return
	}
	if idErr != nil {
		wire.Status(w, http.StatusNotFound)
		return
	}
	s.Server.mu.Lock()
	ti, ok := s.Server.access[wire.Bearer(r)]
	valid := ok && s.Server.opts.Now().Before(ti.expires)
	a, found := s.Server.activities[id]
	s.Server.mu.Unlock()
	switch {
	case !valid:
		wire.Status(w, http.StatusUnauthorized)
		return
	case !slices.Contains(ti.scope, "activity:read") && !slices.Contains(ti.scope, "activity:read_all"):
		wire.Error(w, http.StatusUnauthorized, "Authorization Error", wire.Fault{Resource: "AccessToken", Field: "activity:read_permission", Code: "missing"})
		return
	case !found || a.AthleteID != ti.athlete || (a.Private && !slices.Contains(ti.scope, "activity:read_all")):
		wire.Status(w, http.StatusNotFound)
		return
	}
	s.Server.stats.activityFetches.Add(1)
	wire.JSON(w, http.StatusOK, activityJSON(a))
}

func (s apiRoutes) list(w http.ResponseWriter, r *http.Request) {
	s.countReadOf(r)
	s.Server.stats.listRequests.Add(1)
	f := s.Server.takeEndpointFault(EndpointList, 0)
	rec := httptest.NewRecorder()
	s.answerList(rec, r, f.Status)
	answerLater(w, r, rec, f)
}

func (s apiRoutes) answerList(w http.ResponseWriter, r *http.Request, faultStatus int) {
	if s.refuseRead(w, EndpointList, faultStatus) {
		return
	}
	q := r.URL.Query()
	num := func(name string, def int64) (int64, bool) {
		v := q.Get(name)
		if v == "" {
			return def, true
		}
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil && n >= 0
	}
	before, ok1 := num("before", 0)
	after, ok2 := num("after", 0)
	page, ok3 := num("page", 1)
	perPage, ok4 := num("per_page", 30)
	switch {
	case !ok1 || !ok2:
		wire.Error(w, http.StatusBadRequest, "Bad Request", wire.Fault{Resource: "Activity", Field: "before/after", Code: "invalid"})
		return
	case !ok3 || page < 1:
		wire.Error(w, http.StatusBadRequest, "Bad Request", wire.Fault{Resource: "Activity", Field: "page", Code: "invalid"})
		return
	case !ok4 || perPage < 1 || perPage > 200:
		wire.Error(w, http.StatusBadRequest, "Bad Request", wire.Fault{Resource: "Activity", Field: "per_page", Code: "invalid"})
		return
	}
	s.Server.mu.Lock()
	ti, ok := s.Server.access[wire.Bearer(r)]
	valid := ok && s.Server.opts.Now().Before(ti.expires)
	var out []Activity
	if valid {
		for _, a := range s.Server.activities {
			start := a.StartDate.Unix()
			if a.AthleteID != ti.athlete || (a.Private && !slices.Contains(ti.scope, "activity:read_all")) ||
				(q.Get("before") != "" && start >= before) || (q.Get("after") != "" && start <= after) {
				continue
			}
			out = append(out, a)
		}
	}
	s.Server.mu.Unlock()
	switch {
	case !valid:
		wire.Status(w, http.StatusUnauthorized)
		return
	case !slices.Contains(ti.scope, "activity:read") && !slices.Contains(ti.scope, "activity:read_all"):
		wire.Error(w, http.StatusUnauthorized, "Authorization Error", wire.Fault{Resource: "AccessToken", Field: "activity:read_permission", Code: "missing"})
		return
	}
	ascending := q.Get("after") != "" && q.Get("before") == ""
	slices.SortFunc(out, func(a, b Activity) int {
		c := a.StartDate.Compare(b.StartDate)
		if c == 0 {
			c = cmp.Compare(a.ID, b.ID)
		}
		if !ascending {
			c = -c
		}
		return c
	})
	lo := min(int64(len(out)), (page-1)*perPage)
	hi := min(int64(len(out)), lo+perPage)
	body := make([]map[string]any, 0, hi-lo)
	for _, a := range out[lo:hi] {
		j := activityJSON(a)
		j["resource_state"] = 2 // summary
		body = append(body, j)
	}
	s.Server.stats.listedActivities.Add(hi - lo)
	wire.JSON(w, http.StatusOK, body)
}
