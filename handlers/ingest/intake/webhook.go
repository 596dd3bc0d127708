// Package intake is the Strava webhook endpoint (/webhooks/strava, served
// by the api Lambda): the subscription handshake, decoding an event, its
// claim in the outbox and the hand-off to the worker.
//
// Contract (/webhooks/strava, api Lambda)
//
//	GET  ?hub.mode=subscribe&hub.verify_token=$STRAVA_VERIFY_TOKEN&hub.challenge=X
//	     → 200 {"hub.challenge":"X"}; any other GET → 403
//	POST valid event, new (or received earlier but its lease lapsed)
//	     → 200 {"status":"accepted","correlationId":…}, recorded in the outbox and handed
//	       to the worker (also 200 when the hand-off fails: the sweeper dispatches it);
//	       an athlete's creates past ingest.CreatesBeforeGather in a rate window are
//	       gathered instead: not handed off, due at the next gather tick (Webhook.lease)
//	POST valid event seen before (done, parked, still leased/deferred, or
//	     dropped under another subscription id)
//	     → 200 {"status":"duplicate"}, no hand-off; a lapsed hand-off is
//	       taken again, handed off and answered accepted; a dropped item is
//	       taken over and handed off, answered duplicate (as its replay
//	       under the other id is)
//	POST malformed (bad JSON, wrong type, missing field, unknown
//	     object_type/aspect_type, non-positive ids, invalid UTF-8)
//	     → 400 {"error":"invalid_event","reason":…,"fields":[…]}
//	POST with another subscription_id → recorded as dropped under the
//	     event's key (outbox.StatusDropped: never dispatched, re-admitted by
//	     an operator once the subscription is ours) with one conditional
//	     write, as a claim is, and answered as ours would be: accepted the
//	     first time, duplicate after. So a guess of the subscription id is
//	     answered as the right one, a replay included, in about the same
//	     time; the log line ("writeStatus":"dropped") feeds an alarm. Until
//	     STRAVA_SUBSCRIPTION_ID is set, every event is dropped so
//	POST body over 64 KiB → 413 {"error":"body_too_large"}
//	POST when the event cannot be recorded → 503 (nothing recorded, so Strava's
//	     redelivery is accepted)
//
// The same routes are served under /webhooks/strava/{secret} when
// CC_WEBHOOK_PATH_SECRET is set (CallbackPath): the callback registered
// with Strava. It may list two segments, comma-separated, the new one
// first: while a new callback is registered, deliveries to either are
// served. In AWS that path is a route of its own with its own throttle, so
// a flood at /webhooks/strava (or at any other path) never throttles
// Strava's deliveries; a wrong secret is a 404, as for any path not
// served. The secret is not a credential: events are still confirmed at
// Strava before anything is written. Logs name the route, never the path.
//
// Decoding is a tolerant reader (DecodeEvent: unknown fields ignored, ids as
// numbers or numeric strings, updates optional); FuzzDecodeWebhook (this package) fuzzes it (`make fuzz`,
// FUZZTIME, default 60s; `make test` runs it for 20,000 executions). The idempotency key is
// keys.WebhookIdempotencyKey(object_type, object_id, aspect_type, owner_id,
// event_time, updates) — the event's identity, not the HTTP request's — claimed with
// one conditional UpdateItem in CommitCollectIdempotency (TTL 7 days after
// its last activity, see Lifetime); that
// item is the outbox above. Every request gets a correlation id
// (X-Correlation-Id header) that travels in the job to the worker, onto the
// workout item (correlationId) and into audit entries (audit GSI1 CORR#…).
// The webhook routes mount on a shared *http.ServeMux (Webhook.Mount); in AWS
// the mux is served through aws-lambda-go-api-proxy (httpadapter.NewV2, HTTP
// API payload v2).
package intake

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/emf"
	"github.com/commitcollect/backend/model/keys"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
)

// WebhookPath is where Strava posts events and performs the handshake.
const WebhookPath = "/webhooks/strava"

// IdempotencyStore is the persistence the webhook needs (implemented by
// model/store.Adapters): the outbox claim.
type IdempotencyStore interface {
	// ClaimOutboxItem records the event as received with its job and a
	// lease, to be handed off, and returns the stored item (the original
	// job when a lapsed hand-off is taken again); ErrConflict when it is a
	// duplicate (done, parked, still leased, or the sweeper's).
	ClaimOutboxItem(ctx context.Context, key, correlationID, job string, now time.Time, lease, ttl time.Duration) (*ops.IdempotencyRecord, error)
	// HoldOutboxItem records the event as received with its job, not
	// handed off: the sweeper dispatches it once due. A redelivery of a
	// held event is a duplicate until the event is settled.
	HoldOutboxItem(ctx context.Context, key, correlationID, job string, now, due time.Time, ttl time.Duration) (*ops.IdempotencyRecord, error)
}

// DropStore records the events of subscriptions the webhook does not
// accept (model/store/outbox.Drops).
type DropStore interface {
	// DropOutboxItem records the event as dropped with its job unless its
	// key exists (ErrConflict: a duplicate).
	DropOutboxItem(ctx context.Context, key, correlationID, job string, subscriptionID int64, now time.Time, ttl time.Duration) (*ops.IdempotencyRecord, error)
}

// WebhookConfig is what the webhook checks events against.
type WebhookConfig struct {
	// VerifyToken answers the subscription handshake (STRAVA_VERIFY_TOKEN).
	VerifyToken string
	// SubscriptionID is the only subscription whose events are accepted
	// (STRAVA_SUBSCRIPTION_ID).
	SubscriptionID int64
	// PathSecrets, when set, serve the routes under CallbackPath of each
	// too (CC_WEBHOOK_PATH_SECRET: the current segment, and while a new
	// callback is registered the one before).
	PathSecrets []string
	// Lease is how long a hand-off is presumed in flight (ingest.DefaultLease
	// when zero).
	Lease time.Duration
	// Gather, when set, gathers an athlete's crowded creates at the claim
	// (see Receive); RateWindow is Strava's short rate-limit window that
	// sets the count's window and the gather grid (CC_STRAVA_WINDOW;
	// keys.AthleteReadsWindow when zero).
	Gather     bool
	RateWindow time.Duration
}

// Webhook serves GET and POST /webhooks/strava.
type Webhook struct {
	cfg      WebhookConfig
	store    IdempotencyStore
	drops    DropStore
	dispatch ingest.Dispatcher
	log      *slog.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// NewID makes correlation ids (default model.NewID).
	NewID func() string
	// Metrics receives one CloudWatch EMF line per event dropped for
	// another subscription (MetricEventsDropped; default os.Stdout, which
	// Lambda ships to CloudWatch).
	Metrics io.Writer
	// Sleep waits before a dropped event's answer (default time.Sleep).
	Sleep func(time.Duration)
	// handOffNs is the recent hand-offs' duration (a moving average, ns):
	// a dropped event's answer waits as long, so the answer's time tells
	// no guess of the subscription id from ours.
	handOffNs atomic.Int64
	// creates counts this instance's creates per athlete (cfg.Gather).
	creates ingest.Crowd
}

// NewWebhook builds the webhook handler.
func NewWebhook(cfg WebhookConfig, store IdempotencyStore, drops DropStore, d ingest.Dispatcher, log *slog.Logger) *Webhook {
	if cfg.Lease <= 0 {
		cfg.Lease = ingest.DefaultLease
	}
	if cfg.RateWindow <= 0 {
		cfg.RateWindow = keys.AthleteReadsWindow
	}
	return &Webhook{cfg: cfg, store: store, drops: drops, dispatch: d, log: log,
		Now: func() time.Time { return time.Now().UTC() }, NewID: model.NewID, Metrics: os.Stdout, Sleep: time.Sleep}
}

// CallbackPath is the webhook's path under a path secret (WebhookPath
// when there is none): what the Strava subscription registers.
func CallbackPath(secret string) string {
	if secret == "" {
		return WebhookPath
	}
	return WebhookPath + "/" + secret
}

// Routes are the patterns Mount registers: the bare path's, and with
// path secrets the secret path's (one pattern: {secret} is checked against
// each).
func Routes(pathSecrets []string) []string {
	out := []string{"GET " + WebhookPath, "POST " + WebhookPath}
	if len(pathSecrets) > 0 {
		out = append(out, "GET "+WebhookPath+"/{secret}", "POST "+WebhookPath+"/{secret}")
	}
	return out
}

// Mount registers the webhook routes on mux (Routes: "GET /webhooks/strava"
// and "POST /webhooks/strava", and under the path secret when one is set),
// so other routes can share the mux.
func (h *Webhook) Mount(mux *http.ServeMux) {
	for _, r := range Routes(h.cfg.PathSecrets) {
		handle := h.Receive
		if strings.HasPrefix(r, "GET ") {
			handle = h.Handshake
		}
		if strings.HasSuffix(r, "/{secret}") {
			handle = h.secret(handle)
		}
		mux.HandleFunc(r, handle)
	}
}

// secret serves next only under a path secret of the configuration (each
// compared in constant time); any other segment is a 404, as for a path
// not served.
func (h *Webhook) secret(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := []byte(r.PathValue("secret")), 0
		for _, s := range h.cfg.PathSecrets {
			ok |= subtle.ConstantTimeCompare(got, []byte(s))
		}
		if ok != 1 {
			http.NotFound(w, r)
			return
		}
		next(w, r)
	}
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

// Receive validates one event, records it in the outbox and hands it to
// the worker. Answers: 200 accepted (also when the hand-off itself failed:
// the event is durable and the Sweeper dispatches it, and for another
// subscription's event, dropped) or duplicate (done, parked, or still
// leased or deferred); 400 with a JSON reason for a malformed event; 413
// for a body over MaxEventBytes; 503 only when the event could not be
// recorded, so that Strava retries.
func (h *Webhook) Receive(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	corr := h.NewID()
	w.Header().Set(ingest.HeaderCorrelationID, corr)
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
	key := ev.IdempotencyKey()
	now := h.Now()
	job := ingest.Job{Event: ev, CorrelationID: corr, IdempotencyKey: key, ReceivedAtUtc: now}
	payload, err := json.Marshal(job)
	if err != nil {
		log.ErrorContext(ctx, "webhook job not encodable", "error", err)
		writeReason(w, http.StatusServiceUnavailable, "unavailable", "the event could not be recorded; retry", nil)
		return
	}
	if ev.SubscriptionID != h.cfg.SubscriptionID {
		h.drop(w, r, log, job, string(payload))
		return
	}
	rec, tick, gathered, err := h.record(ctx, job, string(payload))
	switch {
	case errors.Is(err, model.ErrConflict):
		status := ""
		if rec != nil {
			status = string(rec.Status)
		}
		log.InfoContext(ctx, "webhook event is a duplicate", "idempotency", "duplicate", "outboxStatus", status)
		writeJSON(w, http.StatusOK, map[string]string{"status": "duplicate", "correlationId": corr})
		return
	case err != nil:
		log.ErrorContext(ctx, "webhook outbox claim failed", "idempotency", "error", "error", err)
		writeReason(w, http.StatusServiceUnavailable, "unavailable", "the event could not be recorded; retry", nil)
		return
	}
	idem, status, answerCorr := "new", "accepted", job.CorrelationID
	if rec.Job != string(payload) {
		// A lapsed claim taken again: hand off the job as first accepted.
		// A dropped item taken over (its first dispatch): the same, but
		// answered as a redelivery, as the other subscription id's replay
		// was, so that the answers tell no guess of the id from ours.
		if orig, derr := ingest.DecodeJob([]byte(rec.Job)); derr == nil {
			job, idem, answerCorr = orig, "reclaimed", orig.CorrelationID
			if rec.Dispatches == 1 {
				idem, status, answerCorr = "taken over from a drop", "duplicate", corr
			}
		}
	}
	if gathered {
		log.InfoContext(ctx, "webhook event gathered for a burst; the sweeper dispatches it", "idempotency", idem,
			"writeStatus", "deferred", "notBefore", tick.Format(time.RFC3339))
	} else if err := h.handOff(ctx, job.WithOutbox(rec)); err != nil {
		log.WarnContext(ctx, "webhook hand-off failed; the event stays received for the sweeper",
			"idempotency", idem, "error", err)
	} else {
		log.InfoContext(ctx, "webhook event accepted", "idempotency", idem)
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": status, "correlationId": answerCorr})
}

// drop records an event of a subscription we do not accept (a guess of
// the id, or a new subscription the configuration does not name yet) and
// answers as for ours: accepted when first recorded, duplicate when its
// key exists, 503 when it cannot be recorded.
func (h *Webhook) drop(w http.ResponseWriter, r *http.Request, log *slog.Logger, job ingest.Job, payload string) {
	ctx := r.Context()
	log = log.With("writeStatus", "dropped", "subscriptionId", job.Event.SubscriptionID)
	_, err := h.drops.DropOutboxItem(ctx, job.IdempotencyKey, job.CorrelationID, payload, job.Event.SubscriptionID, job.ReceivedAtUtc, ingest.IdempotencyTTL)
	if err == nil {
		h.Sleep(h.HandOffPad()) // ours would be handed off now: take as long
	}
	switch {
	case errors.Is(err, model.ErrConflict):
		log.WarnContext(ctx, "webhook event from another subscription; dropped (a duplicate)", "idempotency", "duplicate")
		writeJSON(w, http.StatusOK, map[string]string{"status": "duplicate", "correlationId": job.CorrelationID})
	case err != nil:
		log.ErrorContext(ctx, "webhook event from another subscription not recorded", "idempotency", "error", "error", err)
		writeReason(w, http.StatusServiceUnavailable, "unavailable", "the event could not be recorded; retry", nil)
	default:
		log.WarnContext(ctx, "webhook event from another subscription; dropped", "idempotency", "new")
		writeJSON(w, http.StatusOK, map[string]string{"status": "accepted", "correlationId": job.CorrelationID})
	}
	if err == nil || errors.Is(err, model.ErrConflict) {
		if merr := emf.Write(h.Metrics, MetricsNamespace, job.ReceivedAtUtc, "Service", "api",
			[]emf.Value{{Name: MetricEventsDropped, Unit: "Count", Value: 1}}); merr != nil {
			log.WarnContext(ctx, "dropped-event metric not written", "error", merr)
		}
	}
}

// handOff hands job to the worker and folds how long that took into the
// moving average a dropped event's answer waits (an eighth a hand-off).
func (h *Webhook) handOff(ctx context.Context, job ingest.Job) error {
	start := time.Now()
	err := h.dispatch.Dispatch(ctx, job)
	took := time.Since(start).Nanoseconds()
	for {
		old := h.handOffNs.Load()
		next := took
		if old > 0 {
			next = old + (took-old)/8
		}
		if h.handOffNs.CompareAndSwap(old, next) {
			return err
		}
	}
}

// HandOffPad is how long a dropped event's answer waits now: the recent
// hand-offs' average (zero before the first).
func (h *Webhook) HandOffPad() time.Duration { return time.Duration(h.handOffNs.Load()) }

// MetricsNamespace is the CloudWatch namespace of the webhook's metrics.
const MetricsNamespace = "CommitCollect/Webhook"

// MetricEventsDropped counts events dropped for a subscription the webhook
// does not accept: guesses of the id, or a new subscription's events
// before STRAVA_SUBSCRIPTION_ID names it (its alarm pages the operator,
// who re-admits them: make readmit).
const MetricEventsDropped = "WebhookEventsDropped"

// record records job (encoded as payload) in the outbox: held until the
// next gather tick when gathered (gatherAt), else claimed with the lease
// of a hand-off. It returns the stored item, the tick and whether job was
// gathered.
func (h *Webhook) record(ctx context.Context, job ingest.Job, payload string) (*ops.IdempotencyRecord, time.Time, bool, error) {
	ev, now := job.Event, job.ReceivedAtUtc
	var rec *ops.IdempotencyRecord
	var err error
	tick, gathered := h.gatherAt(ev, now)
	if gathered {
		rec, err = h.store.HoldOutboxItem(ctx, job.IdempotencyKey, job.CorrelationID, payload, now, tick, ingest.IdempotencyTTL)
	} else {
		rec, err = h.store.ClaimOutboxItem(ctx, job.IdempotencyKey, job.CorrelationID, payload, now, h.cfg.Lease, ingest.IdempotencyTTL)
	}
	if err != nil && h.cfg.Gather && ev.Kind() == ingest.KindActivityCreate {
		h.creates.Forget(ev.OwnerID, now.UTC().Truncate(h.cfg.RateWindow)) // a duplicate or nothing recorded
	}
	return rec, tick, gathered, err
}

// gatherAt says whether ev is gathered at now, and until when: a create
// of an athlete whose creates crowd this instance's rate window (more than
// ingest.CreatesBeforeGather, when cfg.Gather) is not handed off; it is
// held (HoldOutboxItem) until the next tick of the gather grid, where the
// sweeper finds it due with the athlete's other gathered events and
// dispatches them as one burst. It saves the hand-off, the worker's run
// and its deferral (an UpdateItem moving the item in the pending index)
// that the worker would have gathered it with.
func (h *Webhook) gatherAt(ev ingest.Event, now time.Time) (time.Time, bool) {
	if !h.cfg.Gather || ev.Kind() != ingest.KindActivityCreate ||
		!h.creates.Crowded(ev.OwnerID, now.UTC().Truncate(h.cfg.RateWindow)) {
		return time.Time{}, false
	}
	return ingest.NextGather(now, ingest.GatherGrid(h.cfg.RateWindow)), true
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
