// Package webhook is how the Strava simulator pushes as Strava does: an
// event in the wire shapes public clients have recorded, its delivery with
// Strava's retries, and the subscription's callback handshake.
package webhook

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

// ErrNotDelivered is Deliver's error when no attempt was answered 200.
var ErrNotDelivered = errors.New("stravasim: webhook event not acknowledged")

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

// Deliver POSTs ev to callbackURL the way Strava does: JSON body, and the
// same event sent again (up to attempts in all, backoff apart) while the
// answer is not 200; sent is called before each attempt. It returns
// ErrNotDelivered when every attempt failed.
func Deliver(ctx context.Context, callbackURL string, ev Event, attempts int, backoff time.Duration, sent func()) (Delivery, error) {
	body, err := json.Marshal(ev.Wire())
	if err != nil {
		return Delivery{}, fmt.Errorf("webhook: encode event: %w", err)
	}
	var d Delivery
	client := &http.Client{Timeout: 2 * time.Second} // Strava wants an answer within 2 s
	for d.Attempts < attempts {
		if d.Attempts > 0 {
			select {
			case <-ctx.Done():
				return d, ctx.Err()
			case <-time.After(backoff):
			}
		}
		d.Attempts++
		sent()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, callbackURL, strings.NewReader(string(body)))
		if err != nil {
			return d, fmt.Errorf("webhook: %w", err)
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

// Handshake performs the subscription handshake against callbackURL
// (GET with hub.mode=subscribe, hub.verify_token and hub.challenge) and
// checks that the challenge is echoed as {"hub.challenge": …}.
func Handshake(ctx context.Context, callbackURL, verifyToken string) error {
	challenge := wire.Token()
	u, err := url.Parse(callbackURL)
	if err != nil {
		return fmt.Errorf("webhook: callback url: %w", err)
	}
	q := u.Query()
	q.Set("hub.mode", "subscribe")
	q.Set("hub.verify_token", verifyToken)
	q.Set("hub.challenge", challenge)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("webhook: handshake: %w", err)
	}
	defer resp.Body.Close()
	var got map[string]string
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("webhook: handshake answered %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got["hub.challenge"] != challenge {
		return fmt.Errorf("webhook: handshake did not echo the challenge (got %v, %v)", got, err)
	}
	return nil
}

// ControlEvent asks the simulator to send a webhook event (POST
// /_sim/events, the simulator's control API).
type ControlEvent struct {
	// Aspect is create, update or delete for an activity event.
	Aspect     string            `json:"aspect,omitempty"`
	ActivityID int64             `json:"activityId,omitempty"`
	OwnerID    int64             `json:"ownerId,omitempty"`
	Updates    map[string]string `json:"updates,omitempty"`
	// Deauthorize, when set, revokes the athlete's tokens (RevokeAthlete)
	// and sends the athlete's deauthorization instead.
	Deauthorize int64 `json:"deauthorize,omitempty"`
	// Forged sends the deauthorization event without revoking anything,
	// as a third party posting it would.
	Forged bool `json:"forged,omitempty"`
}

// ControlDelivery is the answer to POST /_sim/events (the simulator's
// control API).
type ControlDelivery struct {
	Event    Event `json:"event"`
	Attempts int   `json:"attempts"`
	Statuses []int `json:"statuses"`
	// SentAtUtc is when the first attempt started (for end-to-end lag).
	SentAtUtc time.Time `json:"sentAtUtc"`
}
