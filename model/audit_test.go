package model_test

import (
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
)

// Routine audit entries (one per event) carry no index keys, so they land
// in neither audit index; the others carry both.
func TestRoutineAuditEntriesAreNotIndexed(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		given   *model.AuditEntry
		indexed bool
	}{
		{"routine", model.NewRoutineAuditEntry(keys.UserPK("u"), "u", "STRAVA_ACTIVITY_CREATE", "c", "r", at, nil), false},
		{"rare", model.NewAuditEntry(keys.UserPK("u"), "u", "STRAVA_ATHLETE_DEAUTHORIZED", "c", "r", at, nil), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := tt.given
			e.Stamp() // a second stamp (Marshal stamps) keeps the choice
			got := e.CorrelationPK != "" && e.CorrelationSK != "" && e.EventMonthPK != "" && e.EventMonthSK != ""
			none := e.CorrelationPK == "" && e.CorrelationSK == "" && e.EventMonthPK == "" && e.EventMonthSK == ""
			if got != tt.indexed || (!tt.indexed && !none) {
				t.Fatalf("got index keys %q %q %q %q, want indexed=%v", e.CorrelationPK, e.CorrelationSK, e.EventMonthPK, e.EventMonthSK, tt.indexed)
			}
		})
	}
}
