package ingest

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/commitcollect/backend/model"
)

// WebhookPath is where Strava posts events and performs the handshake.
const WebhookPath = "/webhooks/strava"

// IdempotencyTTL is how long an accepted event's key is kept: long past
// Strava's redelivery window.
const IdempotencyTTL = 7 * 24 * time.Hour

// HeaderCorrelationID carries the correlation id on every webhook answer.
const HeaderCorrelationID = "X-Correlation-Id"

// IdempotencyStore is the persistence the webhook needs (implemented by
// model/store.Store).
type IdempotencyStore interface {
	// ClaimIdempotencyKey records the key; ErrConflict when already claimed.
	ClaimIdempotencyKey(ctx context.Context, key, correlationID string, now time.Time, ttl time.Duration) error
	// ReleaseIdempotencyKey deletes the key if correlationID still holds it.
	ReleaseIdempotencyKey(ctx context.Context, key, correlationID string) error
}

// Dispatcher hands an accepted job to the worker asynchronously. Dispatch
// returns once the job is safely queued (not processed); an error means it
// was not queued and the event must be redelivered.
type Dispatcher interface {
	Dispatch(ctx context.Context, job Job) error
}

// WebhookConfig is what the webhook checks events against.
type WebhookConfig struct {
	// VerifyToken answers the subscription handshake (STRAVA_VERIFY_TOKEN).
	VerifyToken string
	// SubscriptionID is the only subscription whose events are accepted
	// (STRAVA_SUBSCRIPTION_ID).
	SubscriptionID int64
}

// Webhook serves GET and POST /webhooks/strava.
type Webhook struct {
	cfg      WebhookConfig
	store    IdempotencyStore
	dispatch Dispatcher
	log      *slog.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// NewID makes correlation ids (default model.NewID).
	NewID func() string
}

// NewWebhook builds the webhook handler.
func NewWebhook(cfg WebhookConfig, store IdempotencyStore, d Dispatcher, log *slog.Logger) *Webhook {
	return &Webhook{cfg: cfg, store: store, dispatch: d, log: log,
		Now: func() time.Time { return time.Now().UTC() }, NewID: model.NewID}
}

// Mount registers the webhook routes on mux ("GET /webhooks/strava" and
// "POST /webhooks/strava"), so other routes can share the mux.
func (h *Webhook) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET "+WebhookPath, h.Handshake)
	mux.HandleFunc("POST "+WebhookPath, h.Receive)
}

// Handshake answers Strava's subscription validation: hub.mode=subscribe and
// the right hub.verify_token → 200 {"hub.challenge": …}; anything else → 403.
func (h *Webhook) Handshake(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	challenge := q.Get("hub.challenge")
	ok := q.Get("hub.mode") == "subscribe" && challenge != "" && h.cfg.VerifyToken != "" &&
		subtle.ConstantTimeCompare([]byte(q.Get("hub.verify_token")), []byte(h.cfg.VerifyToken)) == 1
	if !ok {
		h.log.WarnContext(r.Context(), "webhook handshake refused", "mode", q.Get("hub.mode"))
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "forbidden", "reason": "hub.mode or hub.verify_token is wrong"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"hub.challenge": challenge})
}

// Receive validates one event, deduplicates it through the idempotency
// table and hands it to the worker. Answers: 200 accepted or duplicate; 400
// with a JSON reason for a malformed event; 403 for another subscription;
// 413 for a body over MaxEventBytes; 503 when the event could not be
// recorded or handed off (the key is released so Strava's retry is
// accepted).
func (h *Webhook) Receive(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	corr := h.NewID()
	w.Header().Set(HeaderCorrelationID, corr)
	log := h.log.With("correlationId", corr)

	body, err := readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			log.WarnContext(ctx, "webhook body too large", "limit", MaxEventBytes)
			writeReason(w, http.StatusRequestEntityTooLarge, "body_too_large", "the event is larger than 64 KiB", nil)
			return
		}
		log.WarnContext(ctx, "webhook body unreadable", "error", err)
		writeReason(w, http.StatusBadRequest, "invalid_event", "the body could not be read", nil)
		return
	}
	ev, err := DecodeEvent(body)
	if err != nil {
		var v *model.ValidationError
		errors.As(err, &v)
		log.WarnContext(ctx, "webhook event rejected", "error", err)
		writeReason(w, http.StatusBadRequest, "invalid_event", err.Error(), v)
		return
	}
	log = log.With("eventType", ev.ObjectType+"."+ev.AspectType, "athleteId", ev.OwnerID, "objectId", ev.ObjectID)
	if ev.SubscriptionID != h.cfg.SubscriptionID {
		log.WarnContext(ctx, "webhook event from another subscription", "subscriptionId", ev.SubscriptionID)
		writeReason(w, http.StatusForbidden, "unknown_subscription", "subscription_id does not match this application's subscription", nil)
		return
	}

	key := ev.IdempotencyKey()
	now := h.Now()
	switch err := h.store.ClaimIdempotencyKey(ctx, key, corr, now, IdempotencyTTL); {
	case errors.Is(err, model.ErrConflict):
		log.InfoContext(ctx, "webhook event is a duplicate", "idempotency", "duplicate")
		writeJSON(w, http.StatusOK, map[string]string{"status": "duplicate", "correlationId": corr})
		return
	case err != nil:
		log.ErrorContext(ctx, "webhook idempotency claim failed", "idempotency", "error", "error", err)
		writeReason(w, http.StatusServiceUnavailable, "unavailable", "the event could not be recorded; retry", nil)
		return
	}
	job := Job{Event: ev, CorrelationID: corr, IdempotencyKey: key, ReceivedAtUtc: now}
	if err := h.dispatch.Dispatch(ctx, job); err != nil {
		// Release with a fresh context: the request's may be what failed.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if rerr := h.store.ReleaseIdempotencyKey(rctx, key, corr); rerr != nil {
			log.ErrorContext(ctx, "webhook idempotency release failed", "error", rerr)
		}
		log.ErrorContext(ctx, "webhook hand-off failed", "idempotency", "released", "error", err)
		writeReason(w, http.StatusServiceUnavailable, "unavailable", "the event could not be handed off; retry", nil)
		return
	}
	log.InfoContext(ctx, "webhook event accepted", "idempotency", "new")
	writeJSON(w, http.StatusOK, map[string]string{"status": "accepted", "correlationId": corr})
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, MaxEventBytes))
}

// reasonBody is every 4xx/5xx answer of the webhook.
type reasonBody struct {
	Error  string             `json:"error"`
	Reason string             `json:"reason"`
	Fields []model.FieldError `json:"fields,omitempty"`
}

func writeReason(w http.ResponseWriter, status int, code, reason string, v *model.ValidationError) {
	b := reasonBody{Error: code, Reason: reason}
	if v != nil {
		b.Fields = v.Fields
	}
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
