package main

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/secrets"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

// TestSealTokensRewritesPlainConnections: users listed through the users
// index whose connections hold plain tokens are rewritten sealed; a second
// run finds nothing left to do.
func TestSealTokensRewritesPlainConnections(t *testing.T) {
	db, _ := dynamolocal.Clients(t)
	tables := dynamolocal.MustCreateTables(t, db)
	prefix := strings.TrimSuffix(tables.Main, dynamo.BaseMain)
	key := secrets.NewLocalKey()
	env := map[string]string{"DYNAMODB_ENDPOINT": dynamolocal.Endpoint(t), "CC_TOKEN_KEY": key}
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	getenv := func(k string) string { return env[k] }
	ctx := context.Background()

	users := []string{"u-plain-1", "u-plain-2", "u-plain-3"}
	for i, u := range users {
		p := &model.Profile{UserID: u, AthleteID: int64(i + 1)}
		av, err := dynamo.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		k := keys.StravaConnectionKey(u)
		conn := dynamo.Item{
			"PK": &types.AttributeValueMemberS{Value: k.PK}, "SK": &types.AttributeValueMemberS{Value: k.SK},
			"entityType": &types.AttributeValueMemberS{Value: string(model.EntityStravaConnection)}, "schemaVersion": &types.AttributeValueMemberN{Value: "1"},
			"userId": &types.AttributeValueMemberS{Value: u}, "tokenVersion": &types.AttributeValueMemberN{Value: "1"},
			"accessToken": &types.AttributeValueMemberS{Value: "plain-access-" + u}, "refreshToken": &types.AttributeValueMemberS{Value: "plain-refresh-" + u},
		}
		for _, it := range []dynamo.Item{av, conn} {
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tables.Main), Item: it}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rep, err := run(ctx, []string{"-table-prefix", prefix}, getenv)
	if err != nil || rep.Users != len(users) || rep.Sealed != len(users) {
		t.Fatalf("first run: %+v, %v; want %d users listed and sealed", rep, err, len(users))
	}
	if rep, err := run(ctx, []string{"-table-prefix", prefix}, getenv); err != nil || rep.Sealed != 0 {
		t.Fatalf("second run: %+v, %v; want 0 sealed", rep, err)
	}
	k, _ := secrets.ParseLocalKey(key)
	p, _ := secrets.NewLocalKeyProvider(k)
	st := store.New(db, tables)
	st.DB.Secrets = secrets.NewSealer(p)
	for _, u := range users {
		c, err := st.Connections.StravaConnection(ctx, u)
		if err != nil || c.AccessToken != "plain-access-"+u || c.SealedTokens == nil || c.PlainAccessToken != "" {
			t.Fatalf("%s after the run: %+v, %v; want the same tokens, sealed", u, c, err)
		}
	}
}
