package strava

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/oauth2"
)

// Strava's token answers, read exactly. x/oauth2 keeps an answer's extra
// fields as float64 (an athlete id above 2^53 would lose digits) and derives
// the expiry from expires_in only, while Strava's recorded answers always
// carry expires_at and some carry no expires_in. tokenCall runs one token
// request through a transport that keeps the answer's body, then re-reads
// it with json.Number: Extra then holds exact numbers and Expiry is
// expires_at when Strava sent it.

// bodyKeeper is a RoundTripper that keeps the last answer's body (at most
// 1 MiB) and hands the caller an identical copy.
type bodyKeeper struct {
	base http.RoundTripper
	body []byte
}

// RoundTrip implements http.RoundTripper.
func (k *bodyKeeper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := k.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read token answer: %w", err)
	}
	k.body = b
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// tokenCall runs call (a token request of x/oauth2 made with the context it
// is given) over hc (nil: http.DefaultClient) and returns its token read
// exactly (see above).
func tokenCall(ctx context.Context, hc *http.Client, call func(context.Context) (*oauth2.Token, error)) (*oauth2.Token, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	keeper := &bodyKeeper{base: base}
	kept := *hc
	kept.Transport = keeper
	tok, err := call(context.WithValue(ctx, oauth2.HTTPClient, &kept))
	if err != nil {
		return nil, err
	}
	return exactToken(tok, keeper.body), nil
}

// exactToken re-reads a token answer's body with exact numbers: its fields
// become tok's Extra, and expires_at, when present, its Expiry. A body that
// is not a JSON object leaves tok as it is.
func exactToken(tok *oauth2.Token, body []byte) *oauth2.Token {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var fields map[string]any
	if dec.Decode(&fields) != nil || fields == nil {
		return tok
	}
	out := tok.WithExtra(fields)
	if at, err := exactInt(fields["expires_at"]); err == nil && at > 0 {
		out.Expiry = time.Unix(at, 0).UTC()
	}
	return out
}

// exactInt reads an integer of a decoded JSON answer: a json.Number or a
// numeric string exactly, a float64 only when it is integral and below 2^53
// (where float64 is still exact).
func exactInt(v any) (int64, error) {
	switch x := v.(type) {
	case json.Number:
		return strconv.ParseInt(x.String(), 10, 64)
	case string:
		return strconv.ParseInt(x, 10, 64)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) >= 1<<53 {
			return 0, fmt.Errorf("%v is not an exact integer", x)
		}
		return int64(x), nil
	}
	return 0, errors.New("not a number")
}
