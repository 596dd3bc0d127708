package secrets_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/secrets"
	"github.com/commitcollect/backend/model/secrets/secretstest"
)

func localProvider(t *testing.T) *secrets.LocalKeyProvider {
	t.Helper()
	k, err := secrets.ParseLocalKey(secrets.NewLocalKey())
	if err != nil {
		t.Fatal(err)
	}
	p, err := secrets.NewLocalKeyProvider(k)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLocalProviderContract(t *testing.T) {
	t.Parallel()
	secretstest.Contract(t, localProvider(t))
}

func TestLocalProviderRefusesAnotherMasterKey(t *testing.T) {
	t.Parallel()
	ctx, ec := context.Background(), secrets.Context{UserID: "u", Purpose: model.PurposeStravaTokens}
	sealed, err := secrets.NewSealer(localProvider(t)).Seal(ctx, ec, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.NewSealer(localProvider(t)).Open(ctx, ec, sealed); !errors.Is(err, secrets.ErrUndecryptable) {
		t.Fatalf("open under another master key: %v; want ErrUndecryptable", err)
	}
}

func TestParseLocalKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, given string
		ok          bool
	}{
		{"fresh key", secrets.NewLocalKey(), true},
		{"not base64", "not base64!", false},
		{"16 bytes", "AAAAAAAAAAAAAAAAAAAAAA==", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := secrets.ParseLocalKey(tc.given)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseLocalKey: %v; want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestLoadOrCreateLocalKeyKeepsTheKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "data", "token.key")
	a, err := secrets.LoadOrCreateLocalKey(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := secrets.LoadOrCreateLocalKey(path)
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("second load: %v, same key %v; want the key created first", err, bytes.Equal(a, b))
	}
}

// countingProvider counts how often the Sealer goes to the provider (KMS
// calls in AWS).
type countingProvider struct {
	secrets.KeyProvider
	generated, decrypted atomic.Int32
}

func (c *countingProvider) GenerateDataKey(ctx context.Context, ec secrets.Context) (secrets.DataKey, error) {
	c.generated.Add(1)
	return c.KeyProvider.GenerateDataKey(ctx, ec)
}

func (c *countingProvider) DecryptDataKey(ctx context.Context, id string, w []byte, ec secrets.Context) ([]byte, error) {
	c.decrypted.Add(1)
	return c.KeyProvider.DecryptDataKey(ctx, id, w, ec)
}

func TestSealerCachesDataKeysBriefly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &countingProvider{KeyProvider: localProvider(t)}
	s := secrets.NewSealer(p)
	now := time.Unix(1_700_000_000, 0)
	s.Now = func() time.Time { return now }
	s.EncryptUses = 3
	alice := secrets.Context{UserID: "alice", Purpose: model.PurposeStravaTokens}
	bob := secrets.Context{UserID: "bob", Purpose: model.PurposeStravaTokens}

	var sealed []model.SealedSecret
	for range 4 {
		x, err := s.Seal(ctx, alice, []byte("t"))
		if err != nil {
			t.Fatal(err)
		}
		sealed = append(sealed, x)
	}
	if got := p.generated.Load(); got != 2 {
		t.Errorf("4 seals with EncryptUses 3: %d data keys; want 2", got)
	}
	if _, err := s.Seal(ctx, bob, []byte("t")); err != nil {
		t.Fatal(err)
	}
	if got := p.generated.Load(); got != 3 {
		t.Errorf("another context: %d data keys; want 3 (a key is never shared between contexts)", got)
	}
	for _, x := range sealed {
		if _, err := s.Open(ctx, alice, x); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.decrypted.Load(); got != 0 {
		t.Errorf("opening what this sealer sealed: %d unwraps; want 0 (cached)", got)
	}
	now = now.Add(s.DecryptTTL + s.EncryptTTL)
	if _, err := s.Open(ctx, alice, sealed[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(ctx, alice, []byte("t")); err != nil {
		t.Fatal(err)
	}
	if d, g := p.decrypted.Load(), p.generated.Load(); d != 1 || g != 4 {
		t.Errorf("after the TTLs: %d unwraps, %d data keys; want 1 and 4 (cache expired)", d, g)
	}
}

func TestSecretContextAADIsUnambiguous(t *testing.T) {
	t.Parallel()
	a := secrets.Context{UserID: "b", Purpose: "a/"}
	b := secrets.Context{UserID: "/b", Purpose: "a"}
	if bytes.Equal(a.AAD(), b.AAD()) {
		t.Fatalf("contexts %v and %v render the same additional data %q", a, b, a.AAD())
	}
}

// TestFormatFollowsTheItemKey: a context naming the item's key seals in
// format 2, which opens only under that key; a format 1 secret opens under
// a reader's context whatever item key it names (it was bound to the user
// only), and only for that user.
func TestFormatFollowsTheItemKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := secrets.NewSealer(localProvider(t))
	at := func(user string) secrets.Context {
		return secrets.Context{UserID: user, Purpose: model.PurposeStravaTokens, Item: "USER#" + user + " / STRAVA#CONNECTION"}
	}
	tests := []struct {
		name       string
		seal, open secrets.Context
		format     int
		opens      bool
	}{
		{"format 2 under its key", at("u"), at("u"), secrets.SealedFormatV2, true},
		{"format 2 under another item of the user", at("u"), secrets.Context{UserID: "u", Purpose: model.PurposeStravaTokens, Item: "USER#u / OTHER"}, secrets.SealedFormatV2, false},
		{"format 2 without an item key", at("u"), secrets.Context{UserID: "u", Purpose: model.PurposeStravaTokens}, secrets.SealedFormatV2, false},
		{"format 2 under another user's key", at("u"), at("v"), secrets.SealedFormatV2, false},
		{"format 1 read at its user's key", secrets.Context{UserID: "u", Purpose: model.PurposeStravaTokens}, at("u"), secrets.SealedFormatV1, true},
		{"format 1 read at another user's key", secrets.Context{UserID: "u", Purpose: model.PurposeStravaTokens}, at("v"), secrets.SealedFormatV1, false},
	}
	for _, tc := range tests {
		sealed, err := s.Seal(ctx, tc.seal, []byte("secret"))
		if err != nil || sealed.Format != tc.format {
			t.Fatalf("%s: sealed format %d, %v; want %d", tc.name, sealed.Format, err, tc.format)
		}
		pt, err := s.Open(ctx, tc.open, sealed)
		if got := err == nil && string(pt) == "secret"; got != tc.opens {
			t.Fatalf("%s: opened %v (%v), want %v", tc.name, got, err, tc.opens)
		}
		if !tc.opens && !errors.Is(err, secrets.ErrUndecryptable) {
			t.Fatalf("%s: got %v, want ErrUndecryptable", tc.name, err)
		}
	}
}
