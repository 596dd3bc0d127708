package bff_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/handlers/bff/collection"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/dynamo"
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
			if err := e.st.DB.Put(ctx, e.st.DB.Tables().Main, &a); err != nil {
				t.Fatal(err)
			}
			awards = append(awards, a)
		}
		if err := e.st.Collection.CollectAwards(ctx, awards); err != nil {
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

// TestCollectionCountsOlderEntriesIntoItsSummary: a collection of 30
// entries filed before the summary and 2 filed since: GET /v1/collection
// answers every one (10 parts owned, 22 duplicates), and its first read
// completes the summary, so later reads are one Query of the summary
// whatever the collection's size. Protection: the read's SummarizeCollection
// (without it the summary never completes and every read counts the
// entries).
func TestCollectionCountsOlderEntriesIntoItsSummary(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	sid := e.user("u1", 1)
	at := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for i := range 30 { // filed by an older release: no summary counts them
		a := &model.Award{UserID: "u1", MilestoneID: "old", ModelID: "saturn-v", PartIndex: i % 10, AwardedAtUtc: at.Add(time.Duration(i) * time.Hour), Collected: true}
		item, err := dynamo.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		k := a.CollectedKey()
		item["PK"], item["SK"] = &types.AttributeValueMemberS{Value: k.PK}, &types.AttributeValueMemberS{Value: k.SK}
		if _, err := e.st.DB.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.st.DB.Tables().Main), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	var legacy []model.Award
	for i := range 2 {
		a := model.Award{UserID: "u1", MilestoneID: "m1", ModelID: "saturn-v", PartIndex: i, AwardedAtUtc: at.AddDate(0, 1, i)}
		if err := e.st.DB.Put(ctx, e.st.DB.Tables().Main, &a); err != nil {
			t.Fatal(err)
		}
		legacy = append(legacy, a)
	}
	if err := e.st.Collection.CollectAwards(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for range 2 {
		r := e.do(http.MethodGet, "/v1/collection", sid, nil)
		var got struct{ Models []collection.ModelJSON }
		r.json(t, &got)
		if r.status != http.StatusOK || len(got.Models) != 1 || len(got.Models[0].Owned) != 10 || got.Models[0].Duplicates != 22 {
			t.Fatalf("GET /v1/collection: %d %s; want saturn-v's 10 parts and 22 duplicates", r.status, r.body)
		}
		bodies = append(bodies, string(r.body))
		if _, complete, err := e.st.Collection.CollectionSummary(ctx, "u1"); err != nil || !complete {
			t.Fatalf("after a read the summary is complete %v (%v); want the older entries counted", complete, err)
		}
	}
	if bodies[0] != bodies[1] {
		t.Fatalf("the summary answers %s, the entries answered %s", bodies[1], bodies[0])
	}
}
