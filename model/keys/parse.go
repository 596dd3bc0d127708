package keys

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ItemKind classifies a key of the CommitCollect table.
type ItemKind int

// The kinds of item ParseKey recognizes.
const (
	KindUnknown ItemKind = iota
	KindProfile
	KindStravaConnection
	KindWorkout
	KindMilestone
	KindAward
	KindModelMeta
	KindModelPart
	KindAthleteOwner
	KindSession
	KindAudit
	KindUserSession
	KindOAuthState
	KindAthleteReads
	KindSyncState
	KindUserGuard
	KindMilestoneCount
)

// ParsedKey is what ParseKey learned from a key.
type ParsedKey struct {
	Kind        ItemKind
	UserID      string
	ActivityID  int64
	MilestoneID string
	PartIndex   int
	ModelID     string
	AthleteID   int64
	SessionID   string
}

// ParseKey classifies a key and extracts its identifiers. It returns an error
// matching ErrInvalid for a key it cannot read.
func ParseKey(k Key) (ParsedKey, error) {
	var (
		p   ParsedKey
		why string
	)
	switch {
	case strings.HasPrefix(k.PK, PrefixUser):
		p, why = parseUserKey(strings.TrimPrefix(k.PK, PrefixUser), k.SK)
	case strings.HasPrefix(k.PK, PrefixModel):
		p, why = parseModelKey(strings.TrimPrefix(k.PK, PrefixModel), k.SK)
	case strings.HasPrefix(k.PK, PrefixStravaAthlete):
		p, why = parseAthleteKey(strings.TrimPrefix(k.PK, PrefixStravaAthlete), k.SK)
	case strings.HasPrefix(k.PK, PrefixSession):
		id := strings.TrimPrefix(k.PK, PrefixSession)
		if id == "" || k.SK != SKMeta {
			why = "session"
		}
		p = ParsedKey{Kind: KindSession, SessionID: id}
	case strings.HasPrefix(k.PK, PrefixOAuthState):
		if strings.TrimPrefix(k.PK, PrefixOAuthState) == "" || k.SK != SKMeta {
			why = "oauth state"
		}
		p = ParsedKey{Kind: KindOAuthState}
	default:
		return ParsedKey{Kind: KindUnknown}, nil
	}
	if why != "" {
		return ParsedKey{}, fmt.Errorf("parse key %s: %s: %w", k, why, ErrInvalid)
	}
	return p, nil
}

// parseUserKey parses the sort key of an item in USER#{user}; why says what
// is wrong when it cannot.
func parseUserKey(user, sk string) (p ParsedKey, why string) {
	if user == "" || strings.Contains(user, sep) {
		return p, "user id"
	}
	p.UserID = user
	switch {
	case sk == SKProfile:
		p.Kind = KindProfile
	case sk == SKStravaConnection:
		p.Kind = KindStravaConnection
	case sk == SKSyncStrava:
		p.Kind = KindSyncState
	case sk == SKMilestoneCount:
		p.Kind = KindMilestoneCount
	case sk == SKGuard:
		p.Kind = KindUserGuard
	case strings.HasPrefix(sk, PrefixWorkoutStrava):
		id, err := strconv.ParseInt(strings.TrimPrefix(sk, PrefixWorkoutStrava), 10, 64)
		if err != nil || id <= 0 {
			return p, "activity id"
		}
		p.Kind, p.ActivityID = KindWorkout, id
	case strings.HasPrefix(sk, PrefixMilestone):
		rest := strings.TrimPrefix(sk, PrefixMilestone)
		if i := strings.Index(rest, awardInfix); i >= 0 {
			n, err := strconv.Atoi(rest[i+len(awardInfix):])
			if err != nil || n < 0 || i == 0 {
				return p, "award"
			}
			p.Kind, p.MilestoneID, p.PartIndex = KindAward, rest[:i], n
		} else {
			if rest == "" || strings.Contains(rest, sep) {
				return p, "milestone id"
			}
			p.Kind, p.MilestoneID = KindMilestone, rest
		}
	case strings.HasPrefix(sk, PrefixAudit):
		p.Kind = KindAudit
	case strings.HasPrefix(sk, PrefixSession):
		id := strings.TrimPrefix(sk, PrefixSession)
		if id == "" || strings.Contains(id, sep) {
			return p, "session id"
		}
		p.Kind, p.SessionID = KindUserSession, id
	default:
		return p, "unknown user item"
	}
	return p, ""
}

// parseModelKey parses the sort key of an item in MODEL#{modelID}.
func parseModelKey(modelID, sk string) (p ParsedKey, why string) {
	p.ModelID = modelID
	if modelID == "" {
		return p, "model id"
	}
	switch {
	case sk == SKMeta:
		p.Kind = KindModelMeta
	case strings.HasPrefix(sk, PrefixPart):
		n, err := strconv.Atoi(strings.TrimPrefix(sk, PrefixPart))
		if err != nil || n < 0 {
			return p, "part index"
		}
		p.Kind, p.PartIndex = KindModelPart, n
	default:
		return p, "unknown model item"
	}
	return p, ""
}

// parseAthleteKey parses the sort key of an item in STRAVA#ATHLETE#{id}.
func parseAthleteKey(athlete, sk string) (p ParsedKey, why string) {
	id, err := strconv.ParseInt(athlete, 10, 64)
	if err != nil || id <= 0 {
		return p, "athlete id"
	}
	p.AthleteID = id
	switch {
	case sk == SKOwner:
		p.Kind = KindAthleteOwner
	case strings.HasPrefix(sk, PrefixAudit):
		p.Kind = KindAudit
	case strings.HasPrefix(sk, PrefixAthleteReads):
		if _, err := time.Parse(athleteReadsLayout, strings.TrimPrefix(sk, PrefixAthleteReads)); err != nil {
			return p, "athlete reads window"
		}
		p.Kind = KindAthleteReads
	case strings.HasPrefix(sk, PrefixAthleteDayReads):
		if _, err := time.Parse(dayLayout, strings.TrimPrefix(sk, PrefixAthleteDayReads)); err != nil {
			return p, "athlete reads day"
		}
		p.Kind = KindAthleteReads
	case strings.HasPrefix(sk, PrefixUnverifiedReads):
		if _, err := time.Parse(athleteReadsLayout, strings.TrimPrefix(sk, PrefixUnverifiedReads)); err != nil {
			return p, "unverified reads window"
		}
		p.Kind = KindAthleteReads
	case strings.HasPrefix(sk, PrefixUnverifiedDayReads):
		if _, err := time.Parse(dayLayout, strings.TrimPrefix(sk, PrefixUnverifiedDayReads)); err != nil {
			return p, "unverified reads day"
		}
		p.Kind = KindAthleteReads
	default:
		return p, "unknown athlete item"
	}
	return p, ""
}
