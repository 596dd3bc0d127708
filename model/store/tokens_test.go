package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/secrets"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// rawConnection reads a user's connection item as DynamoDB holds it.
func rawConnection(t *testing.T, s *store.Adapters, userID string) dynamo.Item {
	t.Helper()
	k := keys.StravaConnectionKey(userID)
	out, err := s.DB.Client().GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(s.DB.Tables().Main), ConsistentRead: aws.Bool(true),
		Key: dynamo.Item{"PK": &types.AttributeValueMemberS{Value: k.PK}, "SK": &types.AttributeValueMemberS{Value: k.SK}},
	})
	if err != nil || out.Item == nil {
		t.Fatalf("raw connection of %s: %v (found %v)", userID, err, out != nil && out.Item != nil)
	}
	return out.Item
}

// assertNoSecret fails when any attribute of item (at any depth, any type)
// contains one of the secrets.
func assertNoSecret(t *testing.T, item dynamo.Item, secrets ...string) {
	t.Helper()
	var b strings.Builder
	var walk func(types.AttributeValue)
	walk = func(av types.AttributeValue) {
		switch v := av.(type) {
		case *types.AttributeValueMemberM:
			for k, x := range v.Value {
				b.WriteString(k + "=")
				walk(x)
			}
		case *types.AttributeValueMemberL:
			for _, x := range v.Value {
				walk(x)
			}
		case *types.AttributeValueMemberS:
			b.WriteString(v.Value + " ")
		case *types.AttributeValueMemberB:
			b.Write(v.Value)
		default:
			fmt.Fprintf(&b, "%v ", v)
		}
	}
	walk(&types.AttributeValueMemberM{Value: item})
	for _, sec := range secrets {
		if strings.Contains(b.String(), sec) {
			t.Errorf("stored item contains the secret %q", sec)
		}
	}
}

// TestConnectionTokensAreSealedAtRest: every way a connection's tokens are
// written (first login, returning login, refresh, a plain Put) stores them
// sealed, and reads give them back.
func TestConnectionTokensAreSealedAtRest(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	check := func(step, access, refresh string) {
		t.Helper()
		item := rawConnection(t, s, "u1")
		assertNoSecret(t, item, access, refresh)
		if _, ok := item["sealedTokens"]; !ok {
			t.Errorf("%s: no sealedTokens attribute", step)
		}
		c, err := s.Connections.StravaConnection(ctx, "u1")
		if err != nil || c.AccessToken != access || c.RefreshToken != refresh {
			t.Fatalf("%s: read back %+v, %v; want the tokens %q, %q", step, c, err, access, refresh)
		}
	}
	p, c := newUser("u1", 42)
	c.AccessToken, c.RefreshToken = "access-first-login", "refresh-first-login"
	if err := s.Users.CreateUser(ctx, p, c); err != nil {
		t.Fatal(err)
	}
	check("create user", "access-first-login", "refresh-first-login")

	_, c = newUser("u1", 42)
	c.AccessToken, c.RefreshToken = "access-second-login", "refresh-second-login"
	if err := s.Connections.SaveLoginTokens(ctx, c); err != nil {
		t.Fatal(err)
	}
	check("save login tokens", "access-second-login", "refresh-second-login")

	if _, err := s.Connections.SaveRefreshedToken(ctx, "u1", c.TokenVersion, "access-refreshed", "refresh-refreshed", now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	check("save refreshed token", "access-refreshed", "refresh-refreshed")

	_, c = newUser("u1", 42)
	c.AccessToken, c.RefreshToken = "access-put", "refresh-put"
	if err := s.DB.Put(ctx, s.DB.Tables().Main, c); err != nil {
		t.Fatal(err)
	}
	check("put", "access-put", "refresh-put")
}

// TestSealedTokensDoNotOpenOnAnotherUsersItem: a sealed pair copied onto
// another user's connection (a stolen item, a mixed-up restore) is refused,
// because the user id is part of the encryption context.
func TestSealedTokensDoNotOpenOnAnotherUsersItem(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	for i, u := range []string{"victim", "thief"} {
		p, c := newUser(u, int64(100+i))
		if err := s.Users.CreateUser(ctx, p, c); err != nil {
			t.Fatal(err)
		}
	}
	thief := rawConnection(t, s, "thief")
	thief["sealedTokens"] = rawConnection(t, s, "victim")["sealedTokens"]
	if _, err := s.DB.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.DB.Tables().Main), Item: thief}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Connections.StravaConnection(ctx, "thief"); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("read the thief's connection holding the victim's sealed tokens: %+v, %v; want ErrInvalid", c, err)
	}
}

// TestPlainConnectionIsReadAndSealedByMigration: a schema version 1 item
// (plain text tokens) is still read, and SealConnection rewrites it
// sealed, once.
func TestPlainConnectionIsReadAndSealedByMigration(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	k := keys.StravaConnectionKey("old")
	legacy := dynamo.Item{
		"PK": &types.AttributeValueMemberS{Value: k.PK}, "SK": &types.AttributeValueMemberS{Value: k.SK},
		"entityType":    &types.AttributeValueMemberS{Value: string(model.EntityStravaConnection)},
		"schemaVersion": &types.AttributeValueMemberN{Value: "1"},
		"userId":        &types.AttributeValueMemberS{Value: "old"},
		"athleteId":     &types.AttributeValueMemberN{Value: "7"},
		"accessToken":   &types.AttributeValueMemberS{Value: "plain-access"},
		"refreshToken":  &types.AttributeValueMemberS{Value: "plain-refresh"},
		"tokenVersion":  &types.AttributeValueMemberN{Value: "3"},
	}
	if _, err := s.DB.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.DB.Tables().Main), Item: legacy}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Connections.StravaConnection(ctx, "old")
	if err != nil || c.AccessToken != "plain-access" || c.RefreshToken != "plain-refresh" {
		t.Fatalf("read a plain connection: %+v, %v; want its tokens", c, err)
	}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for run, want := range []bool{true, false} {
		done, err := s.Connections.SealConnection(ctx, "old", now)
		if err != nil || done != want {
			t.Fatalf("migration run %d: rewrote %v, %v; want %v", run+1, done, err, want)
		}
	}
	item := rawConnection(t, s, "old")
	assertNoSecret(t, item, "plain-access", "plain-refresh")
	if v := item["schemaVersion"].(*types.AttributeValueMemberN).Value; v != "2" {
		t.Errorf("schemaVersion after migration = %s; want 2", v)
	}
	c, err = s.Connections.StravaConnection(ctx, "old")
	if err != nil || c.AccessToken != "plain-access" || c.RefreshToken != "plain-refresh" || c.TokenVersion != 3 {
		t.Fatalf("read after migration: %+v, %v; want the same tokens at tokenVersion 3", c, err)
	}
	if done, err := s.Connections.SealConnection(ctx, "nobody", now); done || err != nil {
		t.Fatalf("user without a connection: %v, %v; want false, nil", done, err)
	}
}

// TestStoreWithoutSealerRefusesToWriteTokens: tokens are never written in
// plain text, even by a store wired without a key.
func TestStoreWithoutSealerRefusesToWriteTokens(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	s.DB.Secrets = nil
	ctx := context.Background()
	p, c := newUser("u1", 42)
	if err := s.Users.CreateUser(ctx, p, c); !errors.Is(err, dynamo.ErrNoSealer) {
		t.Fatalf("create user without a sealer: %v; want ErrNoSealer", err)
	}
	if err := s.Connections.SaveLoginTokens(ctx, c); !errors.Is(err, dynamo.ErrNoSealer) {
		t.Fatalf("save login tokens without a sealer: %v; want ErrNoSealer", err)
	}
	if _, err := s.Connections.SaveRefreshedToken(ctx, "u1", 1, "a", "r", time.Now(), time.Now()); !errors.Is(err, dynamo.ErrNoSealer) {
		t.Fatalf("save refreshed token without a sealer: %v; want ErrNoSealer", err)
	}
}

// copyConnection puts the raw connection item of from under to's key, with
// its userId attribute set to userIDAttr.
func copyConnection(t *testing.T, s *store.Adapters, from, to, userIDAttr string) {
	t.Helper()
	item := rawConnection(t, s, from)
	k := keys.StravaConnectionKey(to)
	item["PK"], item["SK"] = &types.AttributeValueMemberS{Value: k.PK}, &types.AttributeValueMemberS{Value: k.SK}
	item["userId"] = &types.AttributeValueMemberS{Value: userIDAttr}
	if _, err := s.DB.Client().PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(s.DB.Tables().Main), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// sealLegacy overwrites userID's connection tokens with a format 1 pair, as
// older code sealed it: bound to the userId attribute, not the key.
func sealLegacy(t *testing.T, s *store.Adapters, userID, access, refresh string) {
	t.Helper()
	ctx := context.Background()
	sealed, err := s.DB.Secrets.Seal(ctx, secrets.Context{UserID: userID, Purpose: model.PurposeStravaTokens},
		[]byte(fmt.Sprintf(`{"a":%q,"r":%q}`, access, refresh)))
	if err != nil || sealed.Format != secrets.SealedFormatV1 {
		t.Fatalf("seal legacy: format %d, %v", sealed.Format, err)
	}
	av, err := attributevalue.Marshal(sealed)
	if err != nil {
		t.Fatal(err)
	}
	item := rawConnection(t, s, userID)
	item["sealedTokens"] = av
	if _, err := s.DB.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.DB.Tables().Main), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// TestCopiedConnectionDoesNotOpen: the encryption context is the item's key
// (the user parsed from its PK), not its userId attribute: a whole
// connection item copied under another user's key does not open, whether
// its userId attribute was edited or not, in format 2 and in the legacy
// format 1; a format 1 item under its own key still opens until
// SealConnection rewrites it as format 2.
func TestCopiedConnectionDoesNotOpen(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	for i, u := range []string{"victim", "legacy"} {
		p, c := newUser(u, int64(300+i))
		c.AccessToken, c.RefreshToken = "access-"+u, "refresh-"+u
		if err := s.Users.CreateUser(ctx, p, c); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(step, user string) {
		t.Helper()
		c, err := s.Connections.StravaConnection(ctx, user)
		if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "copied or moved") {
			t.Fatalf("%s: read %s's connection: %+v, %v; want ErrInvalid saying it was sealed for another item", step, user, c, err)
		}
	}
	if item := rawConnection(t, s, "victim"); item["sealedTokens"].(*types.AttributeValueMemberM).Value["v"].(*types.AttributeValueMemberN).Value != "2" {
		t.Fatalf("new connection sealed as %v, want format 2", item["sealedTokens"])
	}
	copyConnection(t, s, "victim", "thief1", "victim")
	refused("format 2 copied, userId attribute kept", "thief1")
	copyConnection(t, s, "victim", "thief2", "thief2")
	refused("format 2 copied, userId attribute edited", "thief2")

	sealLegacy(t, s, "legacy", "access-legacy", "refresh-legacy")
	c, err := s.Connections.StravaConnection(ctx, "legacy")
	if err != nil || c.AccessToken != "access-legacy" || c.RefreshToken != "refresh-legacy" {
		t.Fatalf("format 1 under its own key: %+v, %v; want it opened", c, err)
	}
	copyConnection(t, s, "legacy", "thief3", "legacy")
	refused("format 1 copied, userId attribute kept", "thief3")
	copyConnection(t, s, "legacy", "thief4", "thief4")
	refused("format 1 copied, userId attribute edited", "thief4")
	if done, err := s.Connections.SealConnection(ctx, "thief3", time.Now()); done || !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("migrating a copied format 1 item: rewrote %v, %v; want it refused", done, err)
	}

	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for run, want := range []bool{true, false} {
		if done, err := s.Connections.SealConnection(ctx, "legacy", now); err != nil || done != want {
			t.Fatalf("migration run %d: rewrote %v, %v; want %v", run+1, done, err, want)
		}
	}
	if v := rawConnection(t, s, "legacy")["sealedTokens"].(*types.AttributeValueMemberM).Value["v"].(*types.AttributeValueMemberN).Value; v != "2" {
		t.Fatalf("after migration: format %s, want 2", v)
	}
	if c, err := s.Connections.StravaConnection(ctx, "legacy"); err != nil || c.AccessToken != "access-legacy" || c.RefreshToken != "refresh-legacy" {
		t.Fatalf("after migration: %+v, %v; want the same tokens", c, err)
	}
	copyConnection(t, s, "legacy", "thief5", "legacy")
	refused("migrated item copied", "thief5")
}
