package model

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/keys"
)

func TestKeyRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given Key
		want  keys.ParsedKey
	}{
		{"profile", keys.ProfileKey("u1"), keys.ParsedKey{Kind: keys.KindProfile, UserID: "u1"}},
		{"connection", keys.StravaConnectionKey("u1"), keys.ParsedKey{Kind: keys.KindStravaConnection, UserID: "u1"}},
		{"sync state", keys.SyncStateKey("u1"), keys.ParsedKey{Kind: keys.KindSyncState, UserID: "u1"}},
		{"user guard", keys.UserGuardKey("u1"), keys.ParsedKey{Kind: keys.KindUserGuard, UserID: "u1"}},
		{"milestone count", keys.MilestoneCountKey("u1"), keys.ParsedKey{Kind: keys.KindMilestoneCount, UserID: "u1"}},
		{"workout", keys.WorkoutKey("u1", 12345678901), keys.ParsedKey{Kind: keys.KindWorkout, UserID: "u1", ActivityID: 12345678901}},
		{"milestone", keys.MilestoneKey("u1", "m-9"), keys.ParsedKey{Kind: keys.KindMilestone, UserID: "u1", MilestoneID: "m-9"}},
		{"award", keys.AwardKey("u1", "m-9", 7), keys.ParsedKey{Kind: keys.KindAward, UserID: "u1", MilestoneID: "m-9", PartIndex: 7}},
		{"award 98", keys.AwardKey("u1", "m-9", 98), keys.ParsedKey{Kind: keys.KindAward, UserID: "u1", MilestoneID: "m-9", PartIndex: 98}},
		{"model meta", keys.ModelMetaKey("rocket"), keys.ParsedKey{Kind: keys.KindModelMeta, ModelID: "rocket"}},
		{"model part", keys.ModelPartKey("rocket", 3), keys.ParsedKey{Kind: keys.KindModelPart, ModelID: "rocket", PartIndex: 3}},
		{"athlete owner", keys.AthleteOwnerKey(42), keys.ParsedKey{Kind: keys.KindAthleteOwner, AthleteID: 42}},
		{"session", keys.SessionKey("abc"), keys.ParsedKey{Kind: keys.KindSession, SessionID: "abc"}},
		{"user audit", keys.AuditKey(keys.UserPK("u1"), time.Unix(1700000000, 0), "r1"), keys.ParsedKey{Kind: keys.KindAudit, UserID: "u1"}},
		{"athlete audit", keys.AuditKey(keys.AthletePK(42), time.Unix(1700000000, 0), "r1"), keys.ParsedKey{Kind: keys.KindAudit, AthleteID: 42}},
		{"athlete reads", keys.AthleteReadsKey(42, time.Date(2026, 3, 2, 6, 15, 0, 0, time.UTC)), keys.ParsedKey{Kind: keys.KindAthleteReads, AthleteID: 42}},
		{"athlete day reads", keys.AthleteDayReadsKey(42, time.Date(2026, 3, 2, 6, 15, 0, 0, time.UTC)), keys.ParsedKey{Kind: keys.KindAthleteReads, AthleteID: 42}},
		{"unverified reads", keys.UnverifiedReadsKey(42, time.Date(2026, 3, 2, 6, 15, 0, 0, time.UTC)), keys.ParsedKey{Kind: keys.KindAthleteReads, AthleteID: 42}},
		{"unverified day reads", keys.UnverifiedDayReadsKey(42, time.Date(2026, 3, 2, 6, 15, 0, 0, time.UTC)), keys.ParsedKey{Kind: keys.KindAthleteReads, AthleteID: 42}},
		{"rate limit is not a domain item", keys.RateLimitKey(), keys.ParsedKey{Kind: keys.KindUnknown}},
		{"parked is not a domain item", keys.ParkedKey("PROJECTOR", "x"), keys.ParsedKey{Kind: keys.KindUnknown}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := keys.ParseKey(tt.given)
			if err != nil {
				t.Fatalf("ParseKey(%s): %v", tt.given, err)
			}
			if got != tt.want {
				t.Fatalf("ParseKey(%s) = %+v, want %+v", tt.given, got, tt.want)
			}
		})
	}
}

func TestKeyShapes(t *testing.T) {
	t.Parallel()
	tests := []struct{ got, want string }{
		{keys.UserPK("u1"), "USER#u1"},
		{keys.SyncStateKey("u1").SK, "SYNC#STRAVA"},
		{keys.SyncJobKey("backfill", "u1", time.Unix(1700000000, 0)), "STRAVA#SYNC#backfill#u1#1700000000"},
		{keys.SyncRestartKey("u1", time.Unix(0, 5)), "STRAVA#SYNC#restart#u1#5"},
		{keys.WorkoutSK(99), "WORKOUT#STRAVA#99"},
		{keys.MilestoneSK("m1"), "MILESTONE#m1"},
		{keys.AwardSK("m1", 3), "MILESTONE#m1#AWARD#03"},
		{keys.AwardSKPrefix("m1"), "MILESTONE#m1#AWARD#"},
		{keys.PartSK(4), "PART#04"},
		{keys.AthletePK(5), "STRAVA#ATHLETE#5"},
		{keys.SessionKey("s").PK, "SESSION#s"},
		{keys.AuditSK(time.Unix(1700000000, 0), "r"), "AUDIT#1700000000#r"},
		{keys.CorrelationPK("c"), "CORR#c"},
		{keys.EventMonthPK("AWARD_MINTED", time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC)), "EVENT#AWARD_MINTED#202603"},
		{keys.WebhookIdempotencyKey("activity", 1, "create", 2, 3, nil), "STRAVA#WEBHOOK#activity#1#create#2#3"},
		{keys.BurstLeaseKey(2), "STRAVA#BURSTLEASE#2"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	// The users index spreads profiles over every shard deterministically.
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		pk := keys.UserListPK(string(rune('a'+i%26)) + string(rune('0'+i/26)))
		seen[pk] = true
	}
	if len(seen) != keys.UserListShards {
		t.Errorf("users index used %d shards, want %d", len(seen), keys.UserListShards)
	}
	// The shard is stored in the index, so the mapping must not change
	// between releases: pinned values (FNV-1a of the user id, mod 8).
	for user, want := range map[string]string{"u1": "USERS#3", "u2": "USERS#6", "athlete-42": "USERS#1"} {
		if got := keys.UserListPK(user); got != want {
			t.Errorf("keys.UserListPK(%q): got %q, want %q", user, got, want)
		}
	}
}

func TestParseKeyRejects(t *testing.T) {
	t.Parallel()
	for _, k := range []Key{
		{PK: "USER#", SK: "PROFILE"},
		{PK: "USER#u1", SK: "WORKOUT#STRAVA#abc"},
		{PK: "USER#u1", SK: "WORKOUT#STRAVA#-4"},
		{PK: "USER#u1", SK: "MILESTONE#m1#AWARD#x"},
		{PK: "USER#u1", SK: "MILESTONE#"},
		{PK: "USER#u1", SK: "SOMETHING"},
		{PK: "MODEL#m", SK: "PART#z"},
		{PK: "STRAVA#ATHLETE#0", SK: "OWNER"},
		{PK: "SESSION#", SK: "META"},
	} {
		if _, err := keys.ParseKey(k); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseKey(%s): got %v, want ErrInvalid", k, err)
		}
	}
}

func TestCheckSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given Meta
		want  error
	}{
		{"current", Meta{EntityWorkout, 1}, nil},
		{"legacy without meta", Meta{}, nil},
		{"newer fails closed", Meta{EntityWorkout, 2}, ErrUnsupportedSchema},
		{"wrong type", Meta{EntityMilestone, 1}, ErrInvalid},
		{"negative", Meta{EntityWorkout, -1}, ErrInvalid},
	}
	for _, tt := range tests {
		err := CheckSchema(tt.given, EntityWorkout)
		if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestNormalizeLegacyMilestone(t *testing.T) {
	t.Parallel()
	m := &Milestone{Key: keys.MilestoneKey("u", "m")}
	if err := m.Normalize(); err != nil {
		t.Fatal(err)
	}
	if m.Status != StatusActive || m.SportTypes == nil || m.SchemaVersion != 1 || m.EntityType != EntityMilestone {
		t.Fatalf("got %+v", m)
	}
}

func TestStampSetsIndexKeys(t *testing.T) {
	t.Parallel()
	c := &StravaConnection{UserID: "u1", AthleteID: 42}
	c.Stamp()
	if c.PK != "USER#u1" || c.AthleteGSI1PK != "STRAVA#ATHLETE#42" || c.AthleteGSI1SK != "USER#u1" {
		t.Fatalf("connection keys: %+v", c)
	}
	p := &Profile{UserID: "u1"}
	p.Stamp()
	if p.UserListPK != keys.UserListPK("u1") || p.UserListSK != "u1" {
		t.Fatalf("profile index keys: %+v", p)
	}
	at := time.Date(2026, 3, 9, 1, 2, 3, 0, time.UTC)
	a := NewAuditEntry(keys.UserPK("u1"), "u1", "AWARD_MINTED", "corr-1", "req-1", at, nil)
	if a.CorrelationPK != "CORR#corr-1" || a.EventMonthPK != "EVENT#AWARD_MINTED#202603" || a.CorrelationSK != a.SK ||
		a.ExpiresAt != at.Add(90*24*time.Hour).Unix() {
		t.Fatalf("audit keys: %+v", a)
	}
	// Filed under an athlete, the entry names a Strava id no account
	// explains: it expires within days, not 90.
	if n := NewAuditEntry(keys.AthletePK(42), "", "ATHLETE_NOT_LINKED", "c", "r", at, nil); n.ExpiresAt != at.Add(3*24*time.Hour).Unix() {
		t.Fatalf("athlete-filed entry expires at %d, want 3 days after %s", n.ExpiresAt, at)
	}
}

func TestValidationErrorCollects(t *testing.T) {
	t.Parallel()
	var v ValidationError
	if v.Err() != nil {
		t.Fatal("empty validation error is not nil")
	}
	v.Add("target", "must be > 0, got %d", -1)
	if !errors.Is(v.Err(), ErrInvalid) || v.Error() != "invalid: target: must be > 0, got -1" {
		t.Fatalf("validation error: %v", v.Err())
	}
}

func TestAwardMintedAuditKeyRoundTrip(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 2, 27, 8, 0, 0, 0, time.UTC)
	k := keys.AwardMintedAuditKey("u1", "m-9", created, 7)
	if want := (Key{PK: "USER#u1", SK: "AUDIT#1772179200#mint-m-9-07"}); k != want {
		t.Fatalf("key: got %v, want %v", k, want)
	}
	if p, err := keys.ParseKey(k); err != nil || p.Kind != keys.KindAudit {
		t.Fatalf("ParseKey: got %+v, %v; want an audit key", p, err)
	}
	e := NewAwardMintedAudit("u1", "m-9", created, 7, "AWARD_MINTED", "c", created.AddDate(0, 1, 0), nil)
	if e.ItemKey() != k || e.SK != k.SK || e.CorrelationSK != k.SK {
		t.Fatalf("entry key: got %v (GSI1SK %s), want %v", e.ItemKey(), e.CorrelationSK, k)
	}
	tests := []struct {
		name      string
		sk        string
		milestone string
		keyAt     time.Time
		want      int
		ok        bool
	}{
		{"its own part", k.SK, "m-9", created, 7, true},
		{"part 98", keys.AwardMintedAuditKey("u1", "m-9", created, 98).SK, "m-9", created, 98, true},
		{"a milestone whose id starts the same", keys.AwardMintedAuditKey("u1", "m-9-01", created, 3).SK, "m-9", created, 0, false},
		{"another creation second", k.SK, "m-9", created.Add(time.Second), 0, false},
		{"another audit entry", keys.AuditSK(created, "abc"), "m-9", created, 0, false},
		{"not a part index", keys.AuditSK(created, "mint-m-9-x1"), "m-9", created, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := keys.ParseAwardMintedAuditSK(tt.sk, tt.milestone, tt.keyAt)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("keys.ParseAwardMintedAuditSK(%q): got %d %v, want %d %v", tt.sk, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestOutboxPendingKeys(t *testing.T) {
	t.Parallel()
	key := keys.WebhookIdempotencyKey("activity", 1, "create", 2, 3, nil)
	shard := keys.OutboxPendingPK(key, keys.DefaultOutboxShards)
	if shard != keys.OutboxPendingPK(key, keys.DefaultOutboxShards) {
		t.Fatal("the shard of a key must be stable")
	}
	found := false
	for i := range keys.DefaultOutboxShards {
		found = found || keys.OutboxPendingShardPK(i) == shard
	}
	if !found {
		t.Fatalf("got shard %q, want one of the %d shard partitions", shard, keys.DefaultOutboxShards)
	}
	now := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		due     time.Time
		wantDue bool
	}{
		{"long past", time.Unix(0, 0), true},
		{"a millisecond ago", now.Add(-time.Millisecond), true},
		{"now", now, true},
		{"a millisecond ahead", now.Add(time.Millisecond), false},
		{"a year ahead", now.AddDate(1, 0, 0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sk := keys.OutboxPendingSK(tt.due, key)
			if got := sk < keys.OutboxDueBefore(now); got != tt.wantDue {
				t.Fatalf("due %v at %v: got %v (sk %s, bound %s), want %v", tt.due, now, got, sk, keys.OutboxDueBefore(now), tt.wantDue)
			}
		})
	}
}

func TestAthleteReadsKeyWindows(t *testing.T) {
	t.Parallel()
	a := keys.AthleteReadsKey(7, time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC))
	b := keys.AthleteReadsKey(7, time.Date(2026, 3, 2, 6, 0, 10, 0, time.UTC)) // a 10-second simulator window
	c := keys.AthleteReadsKey(8, time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC))
	if a == b || a == c || a.SK != "READS#20260302060000" {
		t.Fatalf("got %s, %s, %s; want one key per athlete and window start", a, b, c)
	}
}

// Two edits of one activity within the same second are two events (their
// updates differ); a redelivery of one (same updates, in any order) is the
// same event.
func TestWebhookIdempotencyKeyTellsSameSecondEditsApart(t *testing.T) {
	t.Parallel()
	key := func(u map[string]string) string {
		return keys.WebhookIdempotencyKey("activity", 117, "update", 301, 1700000000, u)
	}
	renamed, retyped := key(map[string]string{"title": "T1"}), key(map[string]string{"title": "T2"})
	both := key(map[string]string{"title": "T1", "type": "Ride"})
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"different titles", renamed, retyped, false},
		{"an extra field", renamed, both, false},
		{"a redelivery", both, key(map[string]string{"type": "Ride", "title": "T1"}), true},
		{"no updates is the bare key", key(nil), "STRAVA#WEBHOOK#activity#117#update#301#1700000000", true},
		{"no updates differs from some", key(nil), renamed, false},
		{"a value is not confused with a name", key(map[string]string{"a": "b=c"}), key(map[string]string{"a=b": "c"}), false},
	}
	for _, tt := range tests {
		if (tt.a == tt.b) != tt.same {
			t.Errorf("%s: %q vs %q, same=%v", tt.name, tt.a, tt.b, tt.a == tt.b)
		}
	}
}

func TestParseOutboxPendingSK(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 11, 25, 12, 15, 0, 123000000, time.UTC)
	got, ok := keys.ParseOutboxPendingSK(keys.OutboxPendingSK(due, "STRAVA#WEBHOOK#x"))
	if !ok || !got.Equal(due) {
		t.Errorf("round trip: got %s %v, want %s", got, ok, due)
	}
	for _, bad := range []string{"", "abc", "12#x", "00000000000000x#k"} {
		if _, ok := keys.ParseOutboxPendingSK(bad); ok {
			t.Errorf("%q: parsed, want refused", bad)
		}
	}
}

func TestSyncReadsShardAllowance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ allowed, shards int }{{0, 8}, {1, 8}, {7, 8}, {8, 8}, {250, 8}, {5, 1}, {5, 0}} {
		sum, lo, hi := 0, c.allowed, 0
		for i := range max(1, c.shards) {
			n := keys.SyncReadsShardAllowance(c.allowed, c.shards, i)
			sum, lo, hi = sum+n, min(lo, n), max(hi, n)
		}
		if sum != c.allowed || hi-lo > 1 {
			t.Errorf("allowed %d over %d shards: parts sum to %d (min %d, max %d), want %d with parts one apart at most", c.allowed, c.shards, sum, lo, hi, c.allowed)
		}
	}
	for _, c := range []struct{ capReads, want int }{{0, 1}, {500, 1}, {1999, 1}, {2000, 2}, {270000, 8}} {
		if got := keys.SyncReadsShardsFor(c.capReads); got != c.want {
			t.Errorf("keys.SyncReadsShardsFor(%d) = %d, want %d", c.capReads, got, c.want)
		}
	}
	if got := keys.SyncReadsTries(12345, 1); len(got) != 1 || got[0] != 0 {
		t.Errorf("keys.SyncReadsTries over one shard = %v, want [0]", got)
	}
	seen := map[int]bool{}
	for pick := range uint64(64) {
		got := keys.SyncReadsTries(pick*2654435761, 8)
		if len(got) != 2 || got[0] == got[1] || min(got[0], got[1]) < 0 || max(got[0], got[1]) >= 8 {
			t.Fatalf("keys.SyncReadsTries(%d, 8) = %v, want two different shards of 8", pick, got)
		}
		seen[got[0]] = true
	}
	if len(seen) != 8 {
		t.Errorf("first tries fell on %d of 8 shards, want all", len(seen))
	}
	if a, b := keys.SyncReadsKey(time.Unix(0, 0), 24*time.Hour, 0), keys.SyncReadsKey(time.Unix(0, 0), 24*time.Hour, 1); a.PK == b.PK {
		t.Errorf("shards 0 and 1 share the partition %q", a.PK)
	}
}

// TestOutboxKeysSayWhoseWorkTheyAre: the sweeper shares work out by what an
// outbox key says; each parser reads back what its builder wrote.
func TestOutboxKeysSayWhoseWorkTheyAre(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given string
		want  string
	}{
		{"create", keys.WebhookIdempotencyKey("activity", 123, "create", 42, 1700000000, nil), "{activity 123 create 42} true"},
		{"update with updates", keys.WebhookIdempotencyKey("activity", 9, "update", 7, 1, map[string]string{"title": "x"}), "{activity 9 update 7} true"},
		{"deauthorization", keys.WebhookIdempotencyKey("athlete", 7, "update", 7, 1, map[string]string{"authorized": "false"}), "{athlete 7 update 7} true"},
		{"a sync key is not a webhook's", keys.SyncJobKey("backfill", "u1", time.Unix(1, 0)), "{ 0  0} false"},
		{"garbage", "STRAVA#WEBHOOK#activity#x#create#1#2", "{ 0  0} false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, ok := keys.ParseWebhookIdempotencyKey(tt.given)
			if got := fmt.Sprint(k, " ", ok); got != tt.want {
				t.Fatalf("ParseWebhookIdempotencyKey(%s) = %s, want %s", tt.given, got, tt.want)
			}
		})
	}
	for _, k := range []string{keys.SyncJobKey("reconcile", "u9", time.Unix(5, 0)), keys.SyncRestartKey("u9", time.Unix(0, 5))} {
		if u, ok := keys.ParseSyncJobKey(k); !ok || u != "u9" {
			t.Fatalf("ParseSyncJobKey(%s) = %q, %v; want u9", k, u, ok)
		}
	}
	if _, ok := keys.ParseSyncJobKey(keys.WebhookIdempotencyKey("activity", 1, "create", 2, 3, nil)); ok {
		t.Fatal("a webhook key parsed as a sync key")
	}
}

// TestWorkoutDateSKRoundTrip: a workout's date key reads back as the start
// it orders by, with or without its local day, and nothing else reads as
// one (a page cursor is checked with it). Protection:
// keys.ParseWorkoutDateSK's checks.
func TestWorkoutDateSKRoundTrip(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 1, 19, 0, 0, 123, time.UTC)
	for _, day := range []string{"", "2026-03-02"} {
		sk := keys.WorkoutDateSK(start, 987654321, day)
		if got, ok := keys.ParseWorkoutDateSK(sk); !ok || !got.Equal(start) {
			t.Errorf("ParseWorkoutDateSK(%q) = %v, %v; want %v", sk, got, ok, start)
		}
	}
	good := keys.WorkoutDateSK(start, 7, "2026-03-02")
	for _, bad := range []string{"", "WORKOUT#", good + "#x", strings.Replace(good, "2026-03-01T", "2026-13-01T", 1),
		strings.Replace(good, "0000000000000000007", "000000000000000000x", 1), strings.TrimSuffix(good, "-02") + "-2",
		keys.MilestoneSK("m1"), strings.Replace(good, "T19:00:00", " 19:00:00", 1)} {
		if _, ok := keys.ParseWorkoutDateSK(bad); ok {
			t.Errorf("ParseWorkoutDateSK(%q) took it for a workout's date key", bad)
		}
	}
}
