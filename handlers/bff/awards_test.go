package bff_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff/collection"
	"github.com/commitcollect/backend/model"
)

// TestAwardsPagesRefuseBadInput: GET /v1/awards refuses a bad limit, a
// cursor that is not base64, one that is no key and one longer than any
// key (400 naming the field), and another user's cursor only pages the
// caller's own awards. Protections: respond.ParsePage, the cursor's shape
// check in CollectedAwards, the query's own partition.
func TestAwardsPagesRefuseBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	sids := map[string]string{"u1": e.user("u1", 1), "u2": e.user("u2", 2)}
	for user := range sids {
		var awards []model.Award
		for i := range 3 {
			a := model.Award{UserID: user, MilestoneID: "m-" + user, ModelID: "saturn-v", PartIndex: i, PartName: "part",
				AwardedAtUtc: time.Date(2026, 3, 1+i, 8, 0, 0, 0, time.UTC), ActivityID: int64(i + 1)}
			if err := e.st.Put(ctx, e.st.Tables().Main, &a); err != nil {
				t.Fatal(err)
			}
			awards = append(awards, a)
		}
		if err := e.st.CollectAwards(ctx, awards); err != nil {
			t.Fatal(err)
		}
	}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, bad := range []struct{ query, field string }{
		{"?limit=0", "limit"}, {"?limit=1001", "limit"}, {"?limit=two", "limit"}, {"?cursor=!!!", "cursor"},
		{"?cursor=" + enc("USER#u1#MILESTONE#m"), "cursor"}, {"?cursor=" + enc(strings.Repeat("A", 1025)), "cursor"},
	} {
		r := e.do(http.MethodGet, "/v1/awards"+bad.query, sids["u1"], nil)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"field":"`+bad.field+`"`) {
			t.Errorf("GET /v1/awards%s: %d %s, want 400 naming %s", bad.query, r.status, r.body, bad.field)
		}
	}
	var p collection.AwardsPage
	e.do(http.MethodGet, "/v1/awards?limit=1", sids["u2"], nil).json(t, &p)
	cursor := p.Next[strings.Index(p.Next, "cursor=")+len("cursor="):]
	r := e.do(http.MethodGet, "/v1/awards?limit=10&cursor="+cursor, sids["u1"], nil)
	r.json(t, &p)
	if r.status != http.StatusOK || len(p.Awards) == 0 {
		t.Fatalf("u1 with u2's cursor: %d %s", r.status, r.body)
	}
	for _, a := range p.Awards {
		if a.MilestoneID != "m-u1" {
			t.Fatalf("u1 with u2's cursor read %+v: another user's award", a)
		}
	}
}
