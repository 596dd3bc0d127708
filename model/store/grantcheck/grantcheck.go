// Package grantcheck keeps the confirmations of one athlete's Strava grant
// to one at a time, and remembers Strava's last "honoured" answer, on the
// athlete's connection item: what lets a flood of forged deauthorizations
// naming a real athlete cost one confirmation a minute, not one each.
package grantcheck

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
)

// Attributes of the connection item (model.StravaConnection).
const (
	attrDeauthCheckAtMs = "deauthCheckAtMs"
	attrHonouredAtUtc   = "honouredAtUtc"
)

// Checks updates the checks of grants on the main table's connection
// items.
type Checks struct{ st *store.Adapters }

// New returns the checks over st.
func New(st *store.Adapters) Checks { return Checks{st: st} }

// ClaimDeauthCheck lets one confirmation of the user's grant begin at now:
// it records now (deauthCheckAtMs) unless another began less than gap
// before, which is ErrConflict; ErrNotFound when the connection is gone.
func (c Checks) ClaimDeauthCheck(ctx context.Context, userID string, now time.Time, gap time.Duration) error {
	cond := expression.AttributeExists(expression.Name("PK")).And(expression.Or(
		expression.AttributeNotExists(expression.Name(attrDeauthCheckAtMs)),
		expression.Name(attrDeauthCheckAtMs).LessThanEqual(expression.Value(now.Add(-gap).UnixMilli()))))
	upd := expression.Set(expression.Name(attrDeauthCheckAtMs), expression.Value(now.UnixMilli()))
	err := c.update(ctx, userID, upd, cond)
	if errors.Is(err, model.ErrConflict) {
		if _, gerr := c.st.Connections.StravaConnectionGrant(ctx, userID); errors.Is(gerr, model.ErrNotFound) {
			err = gerr
		}
	}
	if err != nil {
		return fmt.Errorf("claim deauthorization check of %s: %w", userID, err)
	}
	return nil
}

// ReleaseDeauthCheck removes the claim ClaimDeauthCheck made at now, if it
// is still that claim (a confirmation that got no answer from Strava).
func (c Checks) ReleaseDeauthCheck(ctx context.Context, userID string, now time.Time) error {
	cond := expression.Name(attrDeauthCheckAtMs).Equal(expression.Value(now.UnixMilli()))
	err := c.update(ctx, userID, expression.Remove(expression.Name(attrDeauthCheckAtMs)), cond)
	if err != nil && !errors.Is(err, model.ErrConflict) {
		return fmt.Errorf("release deauthorization check of %s: %w", userID, err)
	}
	return nil
}

// MarkGrantHonoured records that a deauthorization's confirmation found the
// user's grant alive at at (honouredAtUtc). Two confirmations racing may
// leave the earlier time, which only makes the next deauthorization ask
// Strava again. The connection gone (revoked, disconnected) is not an
// error: there is no grant left to vouch for.
func (c Checks) MarkGrantHonoured(ctx context.Context, userID string, at time.Time) error {
	cond := expression.AttributeExists(expression.Name("PK"))
	upd := expression.Set(expression.Name(attrHonouredAtUtc), expression.Value(at.UTC()))
	if err := c.update(ctx, userID, upd, cond); err != nil && !errors.Is(err, model.ErrConflict) {
		return fmt.Errorf("mark grant of %s honoured at %s: %w", userID, at.UTC().Format(time.RFC3339), err)
	}
	return nil
}

func (c Checks) update(ctx context.Context, userID string, upd expression.UpdateBuilder, cond expression.ConditionBuilder) error {
	return c.st.DB.UpdateIn(ctx, c.st.DB.Tables().Main, keys.StravaConnectionKey(userID), upd, cond)
}
