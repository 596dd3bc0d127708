package stravasim

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/commitcollect/backend/scripts/stravasim/webhook"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/commitcollect/backend/scripts/stravasim/wire"
)

// ControlPrefix is where the control API lives on the simulator's server.
// Strava has nothing under it; it lets a process other than the one running
// the simulator (the demo, a curl session) play the athlete and Strava:
//
//	POST   /_sim/athletes         {"id","firstname","lastname"} adds an athlete (the first logs in)
//	PUT    /_sim/authorization    {"athleteId","scope","deny"} decides who /oauth/authorize logs in (SetAuthorization)
//	PUT    /_sim/activities/{id}  {"athleteId","name","sport_type","distance",…} creates or replaces an activity
//	DELETE /_sim/activities/{id}  removes an activity (Strava then answers 404)
//	PUT    /_sim/activities/{id}/private  {"private"} hides an activity (404, unlisted) or shows it again (SetPrivate)
//	POST   /_sim/events           {"aspect","activityId","ownerId","updates"} or {"deauthorize":athleteId}:
//	                              sends the webhook event to the push subscription, as Strava does
//	                              (a deauthorization revokes the athlete's tokens first, unless
//	                              "forged": true sends the event alone)
//	GET    /_sim/stats            what the simulator served (Stats)
//	GET    /_sim/activities       every activity Strava holds now ([]ControlActivity, by id)
//	POST   /_sim/faults           {"activityId","status","delayMs","count"} queues a Fault (AddFault)
//	DELETE /_sim/faults           drops every queued fault
//	POST   /_sim/ratelimit/spend  {"resetInMs"} spends the 15-minute read budget (SpendReadWindow)
const ControlPrefix = "/_sim/"

// ControlActivity is an Activity as the control API reads it: Strava's
// field names plus its owner.
type ControlActivity struct {
	Activity
	AthleteID int64 `json:"athleteId"`
}

// controlRoutes serve the control API (ControlPrefix): tests and scripts
// shape the simulated Strava through it.
type controlRoutes struct{ Server *Server }

// register mounts the control API under ControlPrefix.
func (s controlRoutes) register(mux *http.ServeMux) {
	mux.HandleFunc("POST "+ControlPrefix+"athletes", s.addAthlete)
	mux.HandleFunc("PUT "+ControlPrefix+"authorization", s.setAuthorization)
	mux.HandleFunc("PUT "+ControlPrefix+"activities/{id}", s.putActivity)
	mux.HandleFunc("DELETE "+ControlPrefix+"activities/{id}", s.deleteActivity)
	mux.HandleFunc("PUT "+ControlPrefix+"activities/{id}/private", s.setPrivate)
	mux.HandleFunc("POST "+ControlPrefix+"events", s.publish)
	mux.HandleFunc("GET "+ControlPrefix+"stats", s.stats)
	mux.HandleFunc("GET "+ControlPrefix+"activities", s.activities)
	mux.HandleFunc("POST "+ControlPrefix+"faults", s.addFault)
	mux.HandleFunc("DELETE "+ControlPrefix+"faults", s.clearFaults)
	mux.HandleFunc("POST "+ControlPrefix+"ratelimit/spend", s.spendReadWindow)
}

// addAthlete serves POST athletes.
func (s controlRoutes) addAthlete(w http.ResponseWriter, r *http.Request) {
	var a Athlete
	if err := decodeControl(r, &a); err != nil || a.ID <= 0 {
		controlError(w, http.StatusBadRequest, fmt.Errorf("want {\"id\": positive, \"firstname\", \"lastname\"}: %v", err))
		return
	}
	s.Server.AddAthlete(a)
	wire.JSON(w, http.StatusCreated, a)
}

// setAuthorization serves PUT authorization.
func (s controlRoutes) setAuthorization(w http.ResponseWriter, r *http.Request) {
	var a struct {
		AthleteID int64  `json:"athleteId"`
		Scope     string `json:"scope"`
		Deny      bool   `json:"deny"`
	}
	if err := decodeControl(r, &a); err != nil || a.AthleteID < 0 {
		controlError(w, http.StatusBadRequest, fmt.Errorf("want {\"athleteId\", \"scope\", \"deny\"}: %v", err))
		return
	}
	s.Server.SetAuthorization(Authorization{AthleteID: a.AthleteID, Scope: a.Scope, Deny: a.Deny})
	wire.JSON(w, http.StatusOK, a)
}

// putActivity serves PUT activities/{id}.
func (s controlRoutes) putActivity(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var a ControlActivity
	if err == nil {
		err = decodeControl(r, &a)
	}
	if err != nil || id <= 0 || a.AthleteID <= 0 || a.SportType == "" || a.StartDate.IsZero() {
		controlError(w, http.StatusBadRequest, fmt.Errorf("want a positive id in the path and athleteId, sport_type, start_date in the body: %v", err))
		return
	}
	a.Activity.ID, a.Activity.AthleteID = id, a.AthleteID
	s.Server.PutActivity(a.Activity)
	wire.JSON(w, http.StatusOK, a)
}

// deleteActivity serves DELETE activities/{id}.
func (s controlRoutes) deleteActivity(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		controlError(w, http.StatusBadRequest, errors.New("activity id must be an integer"))
		return
	}
	s.Server.DeleteActivity(id)
	w.WriteHeader(http.StatusNoContent)
}

// setPrivate serves PUT activities/{id}/private.
func (s controlRoutes) setPrivate(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var c struct {
		Private *bool `json:"private"`
	}
	if err == nil {
		err = decodeControl(r, &c)
	}
	if err != nil || c.Private == nil {
		controlError(w, http.StatusBadRequest, fmt.Errorf(`want an integer id in the path and {"private": true|false}: %v`, err))
		return
	}
	if !s.Server.SetPrivate(id, *c.Private) {
		controlError(w, http.StatusNotFound, fmt.Errorf("no activity %d", id))
		return
	}
	wire.JSON(w, http.StatusOK, map[string]any{"id": id, "private": *c.Private})
}

// publish serves POST events.
func (s controlRoutes) publish(w http.ResponseWriter, r *http.Request) {
	var c webhook.ControlEvent
	if err := decodeControl(r, &c); err != nil {
		controlError(w, http.StatusBadRequest, err)
		return
	}
	var ev Event
	switch {
	case c.Deauthorize > 0:
		if !c.Forged {
			s.Server.RevokeAthlete(c.Deauthorize)
		}
		ev = s.Server.DeauthorizationEvent(c.Deauthorize)
	case (c.Aspect == "create" || c.Aspect == "update" || c.Aspect == "delete") && c.ActivityID > 0 && c.OwnerID > 0:
		ev = s.Server.ActivityEvent(c.Aspect, c.ActivityID, c.OwnerID, c.Updates)
	default:
		controlError(w, http.StatusBadRequest, errors.New(`want {"aspect": create|update|delete, "activityId", "ownerId"} or {"deauthorize": athleteId}`))
		return
	}
	sent := time.Now().UTC()
	d, err := s.Server.Publish(r.Context(), ev)
	out := webhook.ControlDelivery{Event: ev, Attempts: d.Attempts, Statuses: d.Statuses, SentAtUtc: sent}
	switch {
	case errors.Is(err, ErrNoSubscription):
		controlError(w, http.StatusConflict, err)
	case err != nil:
		wire.JSON(w, http.StatusBadGateway, out)
	default:
		wire.JSON(w, http.StatusOK, out)
	}
}

// stats serves GET stats.
func (s controlRoutes) stats(w http.ResponseWriter, _ *http.Request) {
	wire.JSON(w, http.StatusOK, s.Server.Stats())
}

// activities serves GET activities.
func (s controlRoutes) activities(w http.ResponseWriter, _ *http.Request) {
	acts := s.Server.Activities()
	out := make([]ControlActivity, 0, len(acts))
	for _, a := range acts {
		out = append(out, ControlActivity{Activity: a, AthleteID: a.AthleteID})
	}
	slices.SortFunc(out, func(a, b ControlActivity) int { return cmp.Compare(a.ID, b.ID) })
	wire.JSON(w, http.StatusOK, out)
}

// addFault serves POST faults.
func (s controlRoutes) addFault(w http.ResponseWriter, r *http.Request) {
	var c ControlFault
	err := decodeControl(r, &c)
	if err == nil && (c.ActivityID < 0 || c.Count < 0 || c.DelayMs < 0 || (c.Status != 0 && (c.Status < 400 || c.Status > 599)) ||
		(c.Status == 0 && c.DelayMs == 0)) {
		err = errors.New("want a status in 400..599 or a positive delayMs, and non-negative activityId and count")
	}
	if err != nil {
		controlError(w, http.StatusBadRequest, fmt.Errorf(`want {"activityId", "status", "delayMs", "count"}: %v`, err))
		return
	}
	s.Server.AddFault(Fault{ActivityID: c.ActivityID, Status: c.Status, Delay: time.Duration(c.DelayMs) * time.Millisecond, Count: c.Count})
	wire.JSON(w, http.StatusCreated, c)
}

// clearFaults serves DELETE faults.
func (s controlRoutes) clearFaults(w http.ResponseWriter, _ *http.Request) {
	s.Server.ClearFaults()
	w.WriteHeader(http.StatusNoContent)
}

// spendReadWindow serves POST ratelimit/spend.
func (s controlRoutes) spendReadWindow(w http.ResponseWriter, r *http.Request) {
	var c struct {
		ResetInMs int64 `json:"resetInMs"`
	}
	if err := decodeControl(r, &c); err != nil || c.ResetInMs < 0 {
		controlError(w, http.StatusBadRequest, fmt.Errorf(`want {"resetInMs": non-negative}: %v`, err))
		return
	}
	s.Server.SpendReadWindow(time.Duration(c.ResetInMs) * time.Millisecond)
	wire.JSON(w, http.StatusOK, s.Server.Stats())
}

// ControlFault is a Fault as the control API reads it.
type ControlFault struct {
	ActivityID int64 `json:"activityId,omitempty"`
	Status     int   `json:"status,omitempty"`
	DelayMs    int64 `json:"delayMs,omitempty"`
	Count      int   `json:"count,omitempty"`
}

func decodeControl(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode body: %w", err)
	}
	return nil
}

func controlError(w http.ResponseWriter, status int, err error) {
	wire.JSON(w, status, map[string]string{"error": err.Error()})
}
