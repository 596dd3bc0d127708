package stravasim

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/commitcollect/backend/scripts/stravasim/webhook"
	"github.com/commitcollect/backend/scripts/stravasim/wire"
)

// Event is a webhook event as Strava posts it (webhook.Event).
type Event = webhook.Event

// Delivery reports what happened to one event (webhook.Delivery).
type Delivery = webhook.Delivery

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

// Deliver POSTs ev to callbackURL the way Strava does (webhook.Deliver),
// up to Options.DeliveryAttempts times, Options.DeliveryBackoff apart. It
// returns ErrNotDelivered when every attempt failed.
func (s *Server) Deliver(ctx context.Context, callbackURL string, ev Event) (Delivery, error) {
	return webhook.Deliver(ctx, callbackURL, ev, s.opts.DeliveryAttempts, s.opts.DeliveryBackoff, func() { s.stats.webhookDeliveries.Add(1) })
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
// (webhook.Handshake).
func (s *Server) VerifyCallback(ctx context.Context, callbackURL, verifyToken string) error {
	return webhook.Handshake(ctx, callbackURL, verifyToken)
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
