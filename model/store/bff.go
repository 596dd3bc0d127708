package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
)

// Typed operations of the BFF: login, sessions, milestones, the model
// catalog and account deletion.

// LoginTokenRetries bounds how often SaveLoginTokens re-reads a connection
// whose tokenVersion moved under it.
const LoginTokenRetries = 5

// CreateUser writes a new user's profile, Strava connection and athlete
// owner mapping in one transaction, so an athlete can never be linked to two
// users. It returns an error matching model.ErrConflict (a
// *model.TransactionError) when the athlete is already owned or the user id
// is taken; nothing is written then. The connection's grant time
// (grantedAtUtc) is c.GrantedAtUtc, else c.UpdatedAtUtc: the login's.
func (s *Store) CreateUser(ctx context.Context, p *model.Profile, c *model.StravaConnection) error {
	owner := &model.AthleteOwner{AthleteID: c.AthleteID, UserID: p.UserID, CreatedAtUtc: p.CreatedAtUtc}
	if c.GrantedAtUtc == nil {
		g := c.UpdatedAtUtc
		c.GrantedAtUtc = &g
	}
	if err := s.sealConnection(ctx, c); err != nil {
		return fmt.Errorf("create user %s: %w", p.UserID, err)
	}
	var items []types.TransactWriteItem
	for _, e := range []model.Entity{owner, p, c} {
		it, err := s.TransactPutIfAbsent(s.t.Main, e)
		if err != nil {
			return fmt.Errorf("create user %s: %w", p.UserID, err)
		}
		items = append(items, it)
	}
	if err := s.Transact(ctx, items, ""); err != nil {
		return fmt.Errorf("create user %s for athlete %d: %w", p.UserID, c.AthleteID, err)
	}
	return nil
}

// AthleteOwner reads the athlete → user mapping. It returns model.ErrNotFound
// when no user owns the athlete.
func (s *Store) AthleteOwner(ctx context.Context, athleteID int64) (model.AthleteOwner, error) {
	var o model.AthleteOwner
	if err := s.Get(ctx, s.t.Main, model.AthleteOwnerKey(athleteID), &o); err != nil {
		return model.AthleteOwner{}, fmt.Errorf("athlete owner %d: %w", athleteID, err)
	}
	return o, nil
}

// Profile reads a user's profile; model.ErrNotFound when there is none.
func (s *Store) Profile(ctx context.Context, userID string) (model.Profile, error) {
	var p model.Profile
	if err := s.Get(ctx, s.t.Main, model.ProfileKey(userID), &p); err != nil {
		return model.Profile{}, fmt.Errorf("profile %s: %w", userID, err)
	}
	return p, nil
}

// SaveLoginTokens stores the tokens of a fresh login on the user's
// connection (creating it if it is gone), bumping tokenVersion with a
// conditional write so a worker refreshing at the same moment cannot be
// overwritten blindly: on a conflict it re-reads and retries up to
// LoginTokenRetries times, then returns an error matching model.ErrConflict.
// c.TokenVersion is set to the stored value. A login is a new grant: the
// item's grantedAtUtc is c.GrantedAtUtc, else c.UpdatedAtUtc.
func (s *Store) SaveLoginTokens(ctx context.Context, c *model.StravaConnection) error {
	if c.GrantedAtUtc == nil {
		g := c.UpdatedAtUtc
		c.GrantedAtUtc = &g
	}
	for attempt := 0; ; attempt++ {
		var cur model.StravaConnection
		err := s.Get(ctx, s.t.Main, model.StravaConnectionKey(c.UserID), &cur)
		var cond expression.ConditionBuilder
		switch {
		case errors.Is(err, model.ErrNotFound):
			c.TokenVersion = 1
			cond = expression.AttributeNotExists(expression.Name("PK"))
		case err != nil:
			return fmt.Errorf("save login tokens %s: %w", c.UserID, err)
		default:
			c.TokenVersion = cur.TokenVersion + 1
			cond = expression.Name("tokenVersion").Equal(expression.Value(cur.TokenVersion))
		}
		err = s.PutIf(ctx, s.t.Main, c, cond)
		if err == nil {
			return nil
		}
		if !isConflict(err) || attempt >= LoginTokenRetries {
			return fmt.Errorf("save login tokens %s: %w", c.UserID, err)
		}
	}
}

// CreateSession writes a session (sessions table) and its pointer in the
// user's partition (main table) in one transaction, so every live session is
// findable by user. It returns model.ErrConflict if the id is taken.
func (s *Store) CreateSession(ctx context.Context, sess *model.Session) error {
	ptr := &model.UserSession{UserID: sess.UserID, SessionID: sess.SessionID, CreatedAtUtc: sess.CreatedAtUtc, ExpiresAt: sess.ExpiresAtUtc}
	a, err := s.TransactPutIfAbsent(s.t.Sessions, sess)
	if err != nil {
		return err
	}
	b, err := s.TransactPut(s.t.Main, ptr)
	if err != nil {
		return err
	}
	if err := s.Transact(ctx, []types.TransactWriteItem{a, b}, ""); err != nil {
		return fmt.Errorf("create session for user %s: %w", sess.UserID, err)
	}
	return nil
}

// Session reads a session by id (the SessionHash of the cookie); model.ErrNotFound when there is none. It
// does not check expiry (TTL deletion is lazy): callers must use
// Session.Expired.
func (s *Store) Session(ctx context.Context, sessionID string) (model.Session, error) {
	var sess model.Session
	if err := s.Get(ctx, s.t.Sessions, model.SessionKey(sessionID), &sess); err != nil {
		return model.Session{}, fmt.Errorf("session: %w", err)
	}
	return sess, nil
}

// DeleteSession removes a session and then its pointer. Deleting a missing
// session is not an error.
func (s *Store) DeleteSession(ctx context.Context, userID, sessionID string) error {
	if err := s.Delete(ctx, s.t.Sessions, model.SessionKey(sessionID)); err != nil {
		return fmt.Errorf("delete session of user %s: %w", userID, err)
	}
	if err := s.Delete(ctx, s.t.Main, model.UserSessionKey(userID, sessionID)); err != nil {
		return fmt.Errorf("delete session pointer of user %s: %w", userID, err)
	}
	return nil
}

// UserSessionIDs lists the session ids a user's partition points to (at
// most MaxWorkoutsToInspect; truncated says there are more).
func (s *Store) UserSessionIDs(ctx context.Context, userID string) (ids []string, truncated bool, err error) {
	res, err := s.QueryPrefix(ctx, s.t.Main, model.UserPK(userID), model.PrefixSession, QueryOptions{Projection: []string{"PK", "SK"}})
	if err != nil {
		return nil, false, fmt.Errorf("list sessions of user %s: %w", userID, err)
	}
	for _, it := range res.Items {
		k, err := itemKey(it)
		if err != nil {
			return nil, false, err
		}
		if p, err := model.ParseKey(k); err == nil && p.Kind == model.KindUserSession {
			ids = append(ids, p.SessionID)
		}
	}
	return ids, res.Truncated, nil
}

// DeleteUserSessions removes every session of a user except keep (the
// caller's own, removed last by DeleteSessionPointerFirst): the session items
// first, then their pointers, so a session never outlives its pointer. It is
// safe to re-run.
func (s *Store) DeleteUserSessions(ctx context.Context, userID, keep string) error {
	for {
		ids, truncated, err := s.UserSessionIDs(ctx, userID)
		if err != nil {
			return err
		}
		var sessions, pointers []model.Key
		for _, id := range ids {
			if id == keep {
				continue
			}
			sessions = append(sessions, model.SessionKey(id))
			pointers = append(pointers, model.UserSessionKey(userID, id))
		}
		if err := s.BatchDelete(ctx, s.t.Sessions, sessions); err != nil {
			return fmt.Errorf("delete sessions of user %s: %w", userID, err)
		}
		if err := s.BatchDelete(ctx, s.t.Main, pointers); err != nil {
			return fmt.Errorf("delete session pointers of user %s: %w", userID, err)
		}
		if !truncated || len(pointers) == 0 {
			return nil
		}
	}
}

// DeleteSessionPointerFirst removes a session's pointer and then the
// session: the order for the caller's own session at the end of account
// deletion, so that if it stops in between the session still works and the
// deletion can be re-run with it.
func (s *Store) DeleteSessionPointerFirst(ctx context.Context, userID, sessionID string) error {
	if err := s.Delete(ctx, s.t.Main, model.UserSessionKey(userID, sessionID)); err != nil {
		return fmt.Errorf("delete session pointer of user %s: %w", userID, err)
	}
	if err := s.Delete(ctx, s.t.Sessions, model.SessionKey(sessionID)); err != nil {
		return fmt.Errorf("delete session of user %s: %w", userID, err)
	}
	return nil
}

// PutOAuthState stores a pending login state; model.ErrConflict if it
// exists.
func (s *Store) PutOAuthState(ctx context.Context, st *model.OAuthState) error {
	if err := s.PutIfAbsent(ctx, s.t.Sessions, st); err != nil {
		return fmt.Errorf("put oauth state: %w", err)
	}
	return nil
}

// ConsumeOAuthState deletes a login state (by the SessionHash of the state)
// and returns it, atomically, so a state can be used once only. It returns model.ErrNotFound when the state
// does not exist or was already used. It does not check expiry.
func (s *Store) ConsumeOAuthState(ctx context.Context, stateHash string) (model.OAuthState, error) {
	out, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.t.Sessions), Key: s.keyAV(s.t.Sessions, model.OAuthStateKey(stateHash)),
		ReturnValues: types.ReturnValueAllOld,
	})
	if err != nil {
		return model.OAuthState{}, fmt.Errorf("consume oauth state: %w", translate(err))
	}
	if len(out.Attributes) == 0 {
		return model.OAuthState{}, fmt.Errorf("consume oauth state: %w", model.ErrNotFound)
	}
	var st model.OAuthState
	if err := Unmarshal(out.Attributes, &st); err != nil {
		return model.OAuthState{}, fmt.Errorf("consume oauth state: %w", err)
	}
	return st, nil
}

// ModelMeta reads a model's metadata; model.ErrNotFound for an unknown model.
func (s *Store) ModelMeta(ctx context.Context, modelID string) (model.ModelMeta, error) {
	var m model.ModelMeta
	if err := s.Get(ctx, s.t.Main, model.ModelMetaKey(modelID), &m); err != nil {
		return model.ModelMeta{}, fmt.Errorf("model %s: %w", modelID, err)
	}
	return m, nil
}

// SeedModel writes a model's parts and then its metadata where they differ
// from what is stored, and removes stored parts beyond meta.PartCount. It
// returns how many items it changed (0 when everything matched, so re-seeding
// changes nothing and emits no stream records). It returns an error matching
// model.ErrConflict when the stored model was written by a newer catalog
// version.
func (s *Store) SeedModel(ctx context.Context, meta *model.ModelMeta, parts []model.ModelPart) (int, error) {
	var cur model.ModelMeta
	err := s.Get(ctx, s.t.Main, meta.ItemKey(), &cur)
	switch {
	case errors.Is(err, model.ErrNotFound):
	case err != nil:
		return 0, fmt.Errorf("seed model %s: %w", meta.ModelID, err)
	case cur.CatalogVersion > meta.CatalogVersion:
		return 0, fmt.Errorf("seed model %s: stored catalog version %d is newer than %d: %w",
			meta.ModelID, cur.CatalogVersion, meta.CatalogVersion, model.ErrConflict)
	}
	changed := 0
	existing, _, err := QueryEntities[model.ModelPart](ctx, s, s.t.Main, model.ModelPK(meta.ModelID), model.PrefixPart, QueryOptions{})
	if err != nil {
		return 0, fmt.Errorf("seed model %s: %w", meta.ModelID, err)
	}
	stored := map[int]model.ModelPart{}
	var stale []model.Key
	for _, p := range existing {
		stored[p.PartIndex] = p
		if p.PartIndex >= meta.PartCount {
			stale = append(stale, p.ItemKey())
		}
	}
	for i := range parts {
		p := &parts[i]
		p.Stamp()
		if old, ok := stored[p.PartIndex]; ok && reflect.DeepEqual(old, *p) {
			continue
		}
		if err := s.Put(ctx, s.t.Main, p); err != nil {
			return changed, fmt.Errorf("seed model %s: %w", meta.ModelID, err)
		}
		changed++
	}
	if err := s.BatchDelete(ctx, s.t.Main, stale); err != nil {
		return changed, fmt.Errorf("seed model %s: remove parts beyond %d: %w", meta.ModelID, meta.PartCount, err)
	}
	changed += len(stale)
	meta.Stamp()
	if reflect.DeepEqual(cur, *meta) {
		return changed, nil
	}
	cond := expression.Or(expression.AttributeNotExists(expression.Name("PK")),
		expression.Name("catalogVersion").LessThanEqual(expression.Value(meta.CatalogVersion)))
	if err := s.PutIf(ctx, s.t.Main, meta, cond); err != nil {
		return changed, fmt.Errorf("seed model %s: %w", meta.ModelID, err)
	}
	return changed + 1, nil
}

// ErrMilestoneLimit is returned (wrapped, matching model.ErrConflict) by
// CreateMilestone when the user has model.MaxMilestonesPerUser milestones.
var ErrMilestoneLimit = fmt.Errorf("%d milestones per user at most: %w", model.MaxMilestonesPerUser, model.ErrConflict)

// milestoneCreateRetries bounds CreateMilestone's attempts when the count
// moves under it (concurrent creations by the same user).
const milestoneCreateRetries = 5

// CreateMilestone writes a new milestone and counts it
// (model.MilestoneCount) in one transaction conditioned on the count read,
// so concurrent creations never exceed model.MaxMilestonesPerUser. A count
// that does not exist yet (a user from before the cap) starts from the
// milestones in the user's MILESTONE# range (keys only). It returns
// ErrMilestoneLimit at the cap, model.ErrConflict if the milestone's id is
// taken or the count kept moving, and ErrUserDeleted (the milestone and the
// count are removed again) when the account was deleted meanwhile.
func (s *Store) CreateMilestone(ctx context.Context, m *model.Milestone) error {
	for range milestoneCreateRetries {
		var cnt model.MilestoneCount
		err := s.Get(ctx, s.t.Main, model.MilestoneCountKey(m.UserID), &cnt)
		cond := expression.Name("count").Equal(expression.Value(cnt.Count))
		switch {
		case errors.Is(err, model.ErrNotFound):
			n, err := s.countMilestones(ctx, m.UserID)
			if err != nil {
				return fmt.Errorf("create milestone %s: %w", m.MilestoneID, err)
			}
			cnt = model.MilestoneCount{UserID: m.UserID, Count: n}
			cond = expression.AttributeNotExists(expression.Name("PK"))
		case err != nil:
			return fmt.Errorf("create milestone %s: %w", m.MilestoneID, err)
		}
		if cnt.Count >= model.MaxMilestonesPerUser {
			return fmt.Errorf("create milestone %s: user %s has %d: %w", m.MilestoneID, m.UserID, cnt.Count, ErrMilestoneLimit)
		}
		cnt.Count++
		cnt.UpdatedAtUtc = s.Now().UTC()
		put, err := s.TransactPutIfAbsent(s.t.Main, m)
		if err != nil {
			return fmt.Errorf("create milestone %s: %w", m.MilestoneID, err)
		}
		item, err := Marshal(&cnt)
		if err != nil {
			return fmt.Errorf("create milestone %s: %w", m.MilestoneID, err)
		}
		ex, err := expression.NewBuilder().WithCondition(cond).Build()
		if err != nil {
			return fmt.Errorf("create milestone %s: build condition: %w", m.MilestoneID, err)
		}
		count := types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.t.Main), Item: item,
			ConditionExpression: ex.Condition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values()}}
		err = s.Transact(ctx, []types.TransactWriteItem{put, count}, "")
		var te *model.TransactionError
		switch {
		case err == nil:
			if err := s.checkDeleted(ctx, m.UserID, m.ItemKey()); err != nil {
				_ = s.Delete(ctx, s.t.Main, cnt.ItemKey())
				return fmt.Errorf("create milestone %s: %w", m.MilestoneID, err)
			}
			return nil
		case errors.As(err, &te) && slices.Contains(te.FailedIndexes(), 0):
			return fmt.Errorf("create milestone %s: id taken: %w", m.MilestoneID, err)
		case errors.As(err, &te) && slices.Contains(te.FailedIndexes(), 1), errors.Is(err, model.ErrRetryable):
			continue // the count moved (a concurrent creation): read it again
		default:
			return fmt.Errorf("create milestone %s: %w", m.MilestoneID, err)
		}
	}
	return fmt.Errorf("create milestone %s: the milestone count kept moving: %w", m.MilestoneID, model.ErrConflict)
}

// countMilestones counts the milestones (not awards) of a user's
// MILESTONE# range, keys only.
func (s *Store) countMilestones(ctx context.Context, userID string) (int, error) {
	res, err := s.QueryPrefix(ctx, s.t.Main, model.UserPK(userID), model.PrefixMilestone, QueryOptions{Projection: []string{"PK", "SK"}})
	if err != nil {
		return 0, fmt.Errorf("count milestones of user %s: %w", userID, err)
	}
	n := 0
	for _, it := range res.Items {
		k, err := itemKey(it)
		if err != nil {
			return 0, err
		}
		if p, err := model.ParseKey(k); err == nil && p.Kind == model.KindMilestone {
			n++
		}
	}
	return n, nil
}

// MilestoneWithAwards is a milestone and the awards minted for it, in part
// order.
type MilestoneWithAwards struct {
	Milestone model.Milestone
	Awards    []model.Award
}

// MilestonesWithAwards reads a user's milestones and their awards with one Query of
// the user's partition (begins_with MILESTONE#, or MILESTONE#{milestoneID}
// when milestoneID is not empty), in key order. Truncated reports the
// guardrail stopped the read. Items of other milestones sharing the prefix
// are dropped; an item written by newer code fails the read (fail closed).
func (s *Store) MilestonesWithAwards(ctx context.Context, userID, milestoneID string) (ms []MilestoneWithAwards, truncated bool, err error) {
	prefix := model.PrefixMilestone
	if milestoneID != "" {
		prefix = model.MilestoneSK(milestoneID)
	}
	res, err := s.QueryPrefix(ctx, s.t.Main, model.UserPK(userID), prefix, QueryOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("milestones of user %s: %w", userID, err)
	}
	index := map[string]int{}
	for _, it := range res.Items {
		k, err := itemKey(it)
		if err != nil {
			return nil, false, err
		}
		p, err := model.ParseKey(k)
		if err != nil {
			return nil, false, fmt.Errorf("milestones of user %s: %w", userID, err)
		}
		if milestoneID != "" && p.MilestoneID != milestoneID {
			continue
		}
		switch p.Kind {
		case model.KindMilestone:
			var m model.Milestone
			if err := Unmarshal(it, &m); err != nil {
				return nil, false, fmt.Errorf("milestones of user %s: %w", userID, err)
			}
			index[m.MilestoneID] = len(ms)
			ms = append(ms, MilestoneWithAwards{Milestone: m, Awards: []model.Award{}})
		case model.KindAward:
			i, ok := index[p.MilestoneID]
			if !ok {
				continue // an award sorts after its milestone; none means the milestone is gone
			}
			var a model.Award
			if err := Unmarshal(it, &a); err != nil {
				return nil, false, fmt.Errorf("milestones of user %s: %w", userID, err)
			}
			ms[i].Awards = append(ms[i].Awards, a)
		}
	}
	return ms, res.Truncated, nil
}

// DeleteAthleteOwnerOf removes the athlete → user mapping only if it still
// points at userID, so re-running a deletion never unlinks the athlete from
// a user it has since joined. A missing mapping or one owned by another user
// is not an error.
func (s *Store) DeleteAthleteOwnerOf(ctx context.Context, athleteID int64, userID string) error {
	err := s.DeleteIf(ctx, s.t.Main, model.AthleteOwnerKey(athleteID), expression.Name("userId").Equal(expression.Value(userID)))
	if err != nil && !isConflict(err) {
		return fmt.Errorf("delete owner of athlete %d for user %s: %w", athleteID, userID, err)
	}
	return nil
}

// DeleteUserItems deletes the items of a user's partition whose sort key
// begins with prefix (all of them when empty) and for which skip returns
// false, in batches of 25, page after page until none is left. It returns how
// many it deleted; re-running it is harmless.
func (s *Store) DeleteUserItems(ctx context.Context, userID, prefix string, skip func(model.ParsedKey) bool) (int, error) {
	deleted := 0
	for {
		res, err := s.QueryPrefix(ctx, s.t.Main, model.UserPK(userID), prefix, QueryOptions{Projection: []string{"PK", "SK"}})
		if err != nil {
			return deleted, fmt.Errorf("delete items of user %s: %w", userID, err)
		}
		var keys []model.Key
		for _, it := range res.Items {
			k, err := itemKey(it)
			if err != nil {
				return deleted, err
			}
			if skip != nil {
				if p, err := model.ParseKey(k); err == nil && skip(p) {
					continue
				}
			}
			keys = append(keys, k)
		}
		if err := s.BatchDelete(ctx, s.t.Main, keys); err != nil {
			return deleted, fmt.Errorf("delete items of user %s: %w", userID, err)
		}
		deleted += len(keys)
		if !res.Truncated || len(keys) == 0 {
			return deleted, nil
		}
	}
}
