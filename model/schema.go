package model

import (
	"fmt"
	"time"

	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/keys"
)

// SchemaVersions is the current schema version of each entity type. Bump one
// only with a migration in that type's Normalize and a test of the old shape.
var SchemaVersions = map[EntityType]int{
	EntityProfile:          1,
	EntityStravaConnection: 2, // 2: tokens sealed (SealedTokens); 1: plain text
	EntityAthleteOwner:     1,
	EntityWorkout:          1,
	EntityMilestone:        1,
	EntityMilestonePeriod:  1,
	EntityAward:            1,
	EntityModelMeta:        1,
	EntityModelPart:        1,
	EntitySession:          1,
	EntityAudit:            1,
	EntityIdempotency:      2,
	EntityRateLimit:        1,
	EntityParked:           1,
	EntityAthleteReads:     1,
	EntityAthleteDayReads:  1,
	EntityUserGuard:        1,
	EntityMilestoneCount:   1,
	EntityUserSession:      1,
	EntityOAuthState:       1,
	EntitySyncState:        1,
	EntitySyncReads:        1,
	EntityReconcileCursor:  1,
}

// CheckSchema validates an item's meta against the entity type the reader
// expects. Items without entityType or schemaVersion are legacy (version 0)
// and are accepted for normalization; a newer version fails closed with a
// *SchemaVersionError.
func CheckSchema(m Meta, want EntityType) error {
	if m.EntityType != "" && m.EntityType != want {
		return fmt.Errorf("read %s: entityType is %q: %w", want, m.EntityType, ErrInvalid)
	}
	if cur := SchemaVersions[want]; m.SchemaVersion > cur {
		return &SchemaVersionError{EntityType: want, Got: m.SchemaVersion, Supported: cur}
	}
	if m.SchemaVersion < 0 {
		return fmt.Errorf("read %s: schemaVersion %d: %w", want, m.SchemaVersion, ErrInvalid)
	}
	return nil
}

// CurrentMeta is the Meta an entity of type t is stamped with.
func CurrentMeta(t EntityType) Meta { return current(t) }

// NormalizeMeta checks a stored item's Meta against want (see normalize).
func NormalizeMeta(m *Meta, want EntityType) error { return normalize(m, want) }

func current(t EntityType) Meta { return Meta{EntityType: t, SchemaVersion: SchemaVersions[t]} }

// normalize checks the meta and upgrades it to the current version.
func normalize(m *Meta, want EntityType) error {
	if err := CheckSchema(*m, want); err != nil {
		return err
	}
	*m = current(want)
	return nil
}

// ItemKey implements Entity.
func (p *Profile) ItemKey() Key { return keys.ProfileKey(p.UserID) }

// Stamp implements Entity.
func (p *Profile) Stamp() {
	p.Key, p.Meta = p.ItemKey(), current(EntityProfile)
	p.UserListPK, p.UserListSK = keys.UserListPK(p.UserID), p.UserID
}

// Normalize implements Entity.
func (p *Profile) Normalize() error { return normalize(&p.Meta, EntityProfile) }

// ItemKey implements Entity.
func (c *StravaConnection) ItemKey() Key { return keys.StravaConnectionKey(c.UserID) }

// Stamp implements Entity.
func (c *StravaConnection) Stamp() {
	c.Key, c.Meta = c.ItemKey(), current(EntityStravaConnection)
	c.AthleteGSI1PK, c.AthleteGSI1SK = keys.AthletePK(c.AthleteID), keys.UserPK(c.UserID)
}

// Normalize implements Entity.
// Version 1 kept the tokens in plain text: they are moved into the
// in-memory AccessToken and RefreshToken (Plain* stay set so the store can
// tell the item still needs sealing). Version 2 items are opened by the
// store (SealedTokens).
func (c *StravaConnection) Normalize() error {
	if err := CheckSchema(c.Meta, EntityStravaConnection); err != nil {
		return err
	}
	if c.SchemaVersion < 2 && c.SealedTokens == nil {
		c.AccessToken, c.RefreshToken = c.PlainAccessToken, c.PlainRefreshToken
	}
	c.Meta = current(EntityStravaConnection)
	return nil
}

// HasScope reports whether the connection was granted scope.
func (c *StravaConnection) HasScope(scope string) bool {
	for _, s := range c.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// ItemKey implements Entity.
func (o *AthleteOwner) ItemKey() Key { return keys.AthleteOwnerKey(o.AthleteID) }

// Stamp implements Entity.
func (o *AthleteOwner) Stamp() { o.Key, o.Meta = o.ItemKey(), current(EntityAthleteOwner) }

// Normalize implements Entity.
func (o *AthleteOwner) Normalize() error { return normalize(&o.Meta, EntityAthleteOwner) }

// ItemKey implements Entity.
func (w *Workout) ItemKey() Key { return keys.WorkoutKey(w.UserID, w.ActivityID) }

// Stamp implements Entity.
// Every written workout with a start date gets its date-ordered index key.
func (w *Workout) Stamp() {
	w.Key, w.Meta = w.ItemKey(), current(EntityWorkout)
	w.DateSK = ""
	if !w.StartDateUtc.IsZero() {
		day, _ := calendar.LocalDay(w.StartDateLocal)
		w.DateSK = keys.WorkoutDateSK(w.StartDateUtc, w.ActivityID, day)
	}
}

// Normalize implements Entity. Legacy (v0) workouts predate movingTimeSeconds
// and userId; the user is recovered from the key.
func (w *Workout) Normalize() error {
	if err := normalize(&w.Meta, EntityWorkout); err != nil {
		return err
	}
	if w.UserID == "" && w.PK != "" {
		if p, err := keys.ParseKey(w.Key); err == nil && p.Kind == keys.KindWorkout {
			w.UserID = p.UserID
			if w.ActivityID == 0 {
				w.ActivityID = p.ActivityID
			}
		}
	}
	return nil
}

// ItemKey implements Entity.
func (m *Milestone) ItemKey() Key {
	if m.PeriodOf != "" {
		return keys.SeriesPeriodKey(m.UserID, m.MilestoneID, m.PeriodOf)
	}
	return keys.MilestoneKey(m.UserID, m.MilestoneID)
}

// Stamp implements Entity.
func (m *Milestone) Stamp() { m.Key, m.Meta = m.ItemKey(), current(m.entityType()) }

// entityType is a period item's or a milestone's.
func (m *Milestone) entityType() EntityType {
	if m.PeriodOf != "" {
		return EntityMilestonePeriod
	}
	return EntityMilestone
}

// Normalize implements Entity. Legacy (v0) milestones may lack a status
// (active) and a sportTypes list (all sports).
func (m *Milestone) Normalize() error {
	if err := normalize(&m.Meta, m.entityType()); err != nil {
		return err
	}
	if m.Status == "" {
		m.Status = StatusActive
	}
	if m.SportTypes == nil {
		m.SportTypes = []string{}
	}
	return nil
}

// ItemKey implements Entity.
func (a *Award) ItemKey() Key {
	if a.PeriodOf != "" {
		return keys.SeriesAwardKey(a.UserID, a.MilestoneID, a.PeriodOf, a.PartIndex)
	}
	return keys.AwardKey(a.UserID, a.MilestoneID, a.PartIndex)
}

// Stamp implements Entity.
func (a *Award) Stamp() { a.Key, a.Meta = a.ItemKey(), current(EntityAward) }

// Normalize implements Entity.
func (a *Award) Normalize() error { return normalize(&a.Meta, EntityAward) }

// ItemKey implements Entity.
func (m *ModelMeta) ItemKey() Key { return keys.ModelMetaKey(m.ModelID) }

// Stamp implements Entity.
func (m *ModelMeta) Stamp() { m.Key, m.Meta = m.ItemKey(), current(EntityModelMeta) }

// Normalize implements Entity.
func (m *ModelMeta) Normalize() error { return normalize(&m.Meta, EntityModelMeta) }

// ItemKey implements Entity.
func (p *ModelPart) ItemKey() Key { return keys.ModelPartKey(p.ModelID, p.PartIndex) }

// Stamp implements Entity.
func (p *ModelPart) Stamp() { p.Key, p.Meta = p.ItemKey(), current(EntityModelPart) }

// Normalize implements Entity.
func (p *ModelPart) Normalize() error { return normalize(&p.Meta, EntityModelPart) }

// ItemKey implements Entity.
func (s *Session) ItemKey() Key { return keys.SessionKey(s.SessionID) }

// Stamp implements Entity.
func (s *Session) Stamp() { s.Key, s.Meta = s.ItemKey(), current(EntitySession) }

// Normalize implements Entity.
func (s *Session) Normalize() error { return normalize(&s.Meta, EntitySession) }

// NewAuditEntry builds an audit entry about subjectPK (UserPK or AthletePK)
// with its correlation and event-month index keys and a 90-day TTL, or
// UnlinkedAuditRetentionDays for an entry filed under an athlete (its key
// names the athlete and no account explains it) (NewRoutineAuditEntry:
// without index keys).
func NewAuditEntry(subjectPK, userID, eventType, correlationID, requestID string, at time.Time, details map[string]string) *AuditEntry {
	days := time.Duration(AuditRetentionDays)
	if keys.IsAthletePK(subjectPK) {
		days = UnlinkedAuditRetentionDays
	}
	a := &AuditEntry{
		Key:           keys.AuditKey(subjectPK, at, requestID),
		UserID:        userID,
		EventType:     eventType,
		CorrelationID: correlationID,
		RequestID:     requestID,
		OccurredAtUtc: at.UTC(),
		Details:       details,
		ExpiresAt:     at.Add(days * 24 * time.Hour).Unix(),
	}
	a.Stamp()
	return a
}

// ItemKey implements Entity.
func (a *AuditEntry) ItemKey() Key {
	if a.KeyAtUtc != nil {
		return keys.AuditKey(a.PK, *a.KeyAtUtc, a.RequestID)
	}
	return keys.AuditKey(a.PK, a.OccurredAtUtc, a.RequestID)
}

// NewAwardMintedAudit builds the AWARD_MINTED audit entry of part partIndex
// of a user's milestone, keyed deterministically (AwardMintedAuditKey, keyAt
// = the milestone's createdAtUtc) while OccurredAtUtc, the event-month index
// and the TTL follow at, the instant of the mint.
func NewAwardMintedAudit(userID, milestoneID string, keyAt time.Time, partIndex int, eventType, correlationID string,
	at time.Time, details map[string]string) *AuditEntry {
	a := NewAuditEntry(keys.UserPK(userID), userID, eventType, correlationID, keys.AwardMintedRequestID(milestoneID, partIndex), at, details)
	k := keyAt.UTC()
	a.KeyAtUtc = &k
	a.Stamp()
	return a
}

// Stamp implements Entity.
func (a *AuditEntry) Stamp() {
	a.Key, a.Meta = a.ItemKey(), current(EntityAudit)
	corr := a.CorrelationID
	if corr == "" {
		corr = a.RequestID
	}
	if a.Routine {
		a.CorrelationPK, a.CorrelationSK, a.EventMonthPK, a.EventMonthSK = "", "", "", ""
		return
	}
	a.CorrelationPK, a.CorrelationSK = keys.CorrelationPK(corr), a.SK
	a.EventMonthPK, a.EventMonthSK = keys.EventMonthPK(a.EventType, a.OccurredAtUtc), a.SK
}

// NewRoutineAuditEntry is NewAuditEntry for a routine entry (see
// AuditEntry.Routine): no index keys.
func NewRoutineAuditEntry(subjectPK, userID, eventType, correlationID, requestID string, at time.Time, details map[string]string) *AuditEntry {
	a := NewAuditEntry(subjectPK, userID, eventType, correlationID, requestID, at, details)
	a.Routine = true
	a.Stamp()
	return a
}

// Normalize implements Entity.
func (a *AuditEntry) Normalize() error { return normalize(&a.Meta, EntityAudit) }

// ItemKey implements Entity.
func (g *UserGuard) ItemKey() Key { return keys.UserGuardKey(g.UserID) }

// Stamp implements Entity.
func (g *UserGuard) Stamp() { g.Key, g.Meta = g.ItemKey(), current(EntityUserGuard) }

// Normalize implements Entity.
func (g *UserGuard) Normalize() error { return normalize(&g.Meta, EntityUserGuard) }

// Compile-time checks that every stored type is an Entity.
var (
	_ Entity = (*Profile)(nil)
	_ Entity = (*StravaConnection)(nil)
	_ Entity = (*AthleteOwner)(nil)
	_ Entity = (*Workout)(nil)
	_ Entity = (*Milestone)(nil)
	_ Entity = (*Award)(nil)
	_ Entity = (*ModelMeta)(nil)
	_ Entity = (*ModelPart)(nil)
	_ Entity = (*Session)(nil)
	_ Entity = (*AuditEntry)(nil)
	_ Entity = (*UserGuard)(nil)
	_ Entity = (*MilestoneCount)(nil)
)

// ItemKey implements Entity.
func (c *MilestoneCount) ItemKey() Key { return keys.MilestoneCountKey(c.UserID) }

// Stamp implements Entity.
func (c *MilestoneCount) Stamp() { c.Key, c.Meta = c.ItemKey(), current(EntityMilestoneCount) }

// Normalize implements Entity.
func (c *MilestoneCount) Normalize() error { return normalize(&c.Meta, EntityMilestoneCount) }
