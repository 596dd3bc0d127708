package stravasim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/scripts/stravasim/wire"
)

// Event is a webhook event as Strava posts it.
type Event struct {
	ObjectType     string            `json:"object_type"`
	ObjectID       int64             `json:"object_id"`
	AspectType     string            `json:"aspect_type"`
	Updates        map[string]string `json:"updates"`
	OwnerID        int64             `json:"owner_id"`
	SubscriptionID int64             `json:"subscription_id"`
	EventTime      int64             `json:"event_time"`
}

// Delivery reports what happened to one event.
type Delivery struct {
	Attempts int   // POSTs made
	Statuses []int // answer of each attempt (0 for a transport failure)
	// Answer is the body of the last answer (at most 4 KiB), e.g.
	// {"status":"accepted",…} from CommitCollect's webhook.
	Answer string
}

// Wire is the event as Strava's pushes render it, in the shapes public
// clients have recorded, so a receiver is held to all of them: an event
// with an odd object_id carries subscription_id as a numeric string (Strava's
// own 2017 example and stravalib's recorded payload do), an event without
// updates omits the key (deletes), and every event carries a field Strava
// documents nowhere (a reader must ignore what it does not know).
func (e Event) Wire() map[string]any {
	m := map[string]any{
		"object_type": e.ObjectType, "object_id": e.ObjectID, "aspect_type": e.AspectType,
		"owner_id": e.OwnerID, "subscription_id": e.SubscriptionID, "event_time": e.EventTime,
		"resource_state": 2,
	}
	if e.ObjectID%2 == 1 {
		m["subscription_id"] = strconv.FormatInt(e.SubscriptionID, 10)
	}
	if len(e.Updates) > 0 {
		m["updates"] = e.Updates
	}
	return m
}

// ActivityEvent builds an activity event (aspect create, update or delete)
// for the activity's owner, stamped now with the subscription id
// (Options.SubscriptionID, else the registered subscription's).
func (s *Server) ActivityEvent(aspect string, activityID, ownerID int64, updates map[string]string) Event {
	if updates == nil {
		updates = map[string]string{}
	}
	return Event{ObjectType: "activity", ObjectID: activityID, AspectType: aspect, Updates: updates,
		OwnerID: ownerID, SubscriptionID: s.subscriptionID(), EventTime: s.opts.Now().Unix()}
}

func (s *Server) subscriptionID() int64 {
	if s.opts.SubscriptionID != 0 {
		return s.opts.SubscriptionID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sub.id
}

// DeauthorizationEvent builds the athlete event Strava sends when an athlete
// revokes access.
func (s *Server) DeauthorizationEvent(athleteID int64) Event {
	return Event{ObjectType: "athlete", ObjectID: athleteID, AspectType: "update",
		Updates: map[string]string{"authorized": "false"}, OwnerID: athleteID,
		SubscriptionID: s.subscriptionID(), EventTime: s.opts.Now().Unix()}
}

// Deliver POSTs ev to callbackURL the way Strava does: JSON body, and the
// same event sent again (up to Options.DeliveryAttempts in all) while the
// answer is not 200. It returns ErrNotDelivered when every attempt failed.
func (s *Server) Deliver(ctx context.Context, callbackURL string, ev Event) (Delivery, error) {
	body, err := json.Marshal(ev.Wire())
	if err != nil {
		return Delivery{}, fmt.Errorf("stravasim: encode event: %w", err)
	}
	var d Delivery
	client := &http.Client{Timeout: 2 * time.Second} // Strava wants an answer within 2 s
	for d.Attempts < s.opts.DeliveryAttempts {
		if d.Attempts > 0 {
			select {
			case <-ctx.Done():
				return d, ctx.Err()
			case <-time.After(s.opts.DeliveryBackoff):
			}
		}
		d.Attempts++
		s.stats.webhookDeliveries.Add(1)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, callbackURL, strings.NewReader(string(body)))
		if err != nil {
			return d, fmt.Errorf("stravasim: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			d.Statuses = append(d.Statuses, 0)
			continue
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
		d.Answer = strings.TrimSpace(string(raw))
		d.Statuses = append(d.Statuses, resp.StatusCode)
		if resp.StatusCode == http.StatusOK {
			return d, nil
		}
	}
	return d, ErrNotDelivered
}

// Subscribe registers the push subscription as POST
// /api/v3/push_subscriptions does: it validates the callback with the
// handshake first and returns the subscription id (Options.SubscriptionID
// when set, else 1). A second subscription is refused.
func (s *Server) Subscribe(ctx context.Context, callbackURL, verifyToken string) (int64, error) {
	s.mu.Lock()
	exists := s.sub.id != 0
	s.mu.Unlock()
	if exists {
		return 0, errors.New("stravasim: subscription already exists")
	}
	if err := s.VerifyCallback(ctx, callbackURL, verifyToken); err != nil {
		return 0, err
	}
	id := s.opts.SubscriptionID
	if id == 0 {
		id = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sub = subscription{id: id, callback: callbackURL}
	return id, nil
}

// Subscription returns the registered push subscription, if any.
func (s *Server) Subscription() (id int64, callbackURL string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sub.id, s.sub.callback, s.sub.id != 0
}

// Publish delivers ev to the registered subscription's callback (see
// Deliver). It returns ErrNoSubscription when none is registered.
func (s *Server) Publish(ctx context.Context, ev Event) (Delivery, error) {
	_, cb, ok := s.Subscription()
	if !ok {
		return Delivery{}, ErrNoSubscription
	}
	return s.Deliver(ctx, cb, ev)
}

// VerifyCallback performs the subscription handshake against callbackURL
// (GET with hub.mode=subscribe, hub.verify_token and hub.challenge) and
// checks that the challenge is echoed as {"hub.challenge": …}.
func (s *Server) VerifyCallback(ctx context.Context, callbackURL, verifyToken string) error {
	challenge := wire.Token()
	u, err := url.Parse(callbackURL)
	if err != nil {
		return fmt.Errorf("stravasim: callback url: %w", err)
	}
	q := u.Query()
	q.Set("hub.mode", "subscribe")
	q.Set("hub.verify_token", verifyToken)
	q.Set("hub.challenge", challenge)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("stravasim: %w", err)
	}
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("stravasim: handshake: %w", err)
	}
	defer resp.Body.Close()
	var got map[string]string
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stravasim: handshake answered %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got["hub.challenge"] != challenge {
		return fmt.Errorf("stravasim: handshake did not echo the challenge (got %v, %v)", got, err)
	}
	return nil
}

// pushRoutes serve the push subscriptions API.
type pushRoutes struct{ Server *Server }

func (s pushRoutes) createSubscription(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		wire.Status(w, http.StatusBadRequest)
		return
	}
	f := r.Form
	if !s.Server.appCredentials(f.Get("client_id"), f.Get("client_secret")) {
		wire.Error(w, http.StatusUnauthorized, "Authorization Error", wire.Fault{Resource: "Application", Field: "client_id", Code: "invalid"})
		return
	}
	id, err := s.Server.Subscribe(r.Context(), f.Get("callback_url"), f.Get("verify_token"))
	if err != nil {
		wire.Error(w, http.StatusBadRequest, "Bad Request", wire.Fault{Resource: "PushSubscription", Field: "callback url", Code: err.Error()})
		return
	}
	wire.JSON(w, http.StatusCreated, map[string]any{"id": id})
}

func (s pushRoutes) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !s.Server.appCredentials(q.Get("client_id"), q.Get("client_secret")) {
		wire.Error(w, http.StatusUnauthorized, "Authorization Error", wire.Fault{Resource: "Application", Field: "client_id", Code: "invalid"})
		return
	}
	out := []map[string]any{}
	if id, cb, ok := s.Server.Subscription(); ok {
		out = append(out, map[string]any{"id": id, "application_id": s.Server.opts.ClientID, "callback_url": cb})
	}
	wire.JSON(w, http.StatusOK, out)
}

func (s pushRoutes) deleteSubscription(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !s.Server.appCredentials(q.Get("client_id"), q.Get("client_secret")) {
		wire.Error(w, http.StatusUnauthorized, "Authorization Error", wire.Fault{Resource: "Application", Field: "client_id", Code: "invalid"})
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.Server.mu.Lock()
	defer s.Server.mu.Unlock()
	if id == 0 || id != s.Server.sub.id {
		wire.Error(w, http.StatusNotFound, "Record Not Found", wire.Fault{Resource: "PushSubscription", Field: "id", Code: "invalid"})
		return
	}
	s.Server.sub = subscription{}
	w.WriteHeader(http.StatusNoContent)
}
