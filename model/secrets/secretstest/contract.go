// Package secretstest is the contract every secrets.KeyProvider passes: the
// local provider and the KMS adapter run the same suite.
package secretstest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/secrets"
)

// Contract checks p: data keys round-trip under their context only, and a
// Sealer over p opens what it sealed and nothing moved, altered or sealed
// for another context. Refusals must match secrets.ErrUndecryptable.
func Contract(t *testing.T, p secrets.KeyProvider) {
	t.Helper()
	ctx := context.Background()
	alice := secrets.Context{UserID: "alice", Purpose: model.PurposeStravaTokens}
	bob := secrets.Context{UserID: "bob", Purpose: model.PurposeStravaTokens}
	other := secrets.Context{UserID: "alice", Purpose: "other"}

	t.Run("data key round trip", func(t *testing.T) {
		dk, err := p.GenerateDataKey(ctx, alice)
		if err != nil {
			t.Fatalf("generate: %v", err)
		}
		if len(dk.Plaintext) != secrets.DataKeySize || dk.KeyID == "" || len(dk.Wrapped) == 0 {
			t.Fatalf("data key: %d bytes, key id %q, wrapped %d bytes; want %d bytes, an id, a wrapped key",
				len(dk.Plaintext), dk.KeyID, len(dk.Wrapped), secrets.DataKeySize)
		}
		if bytes.Contains(dk.Wrapped, dk.Plaintext) {
			t.Fatal("the wrapped key contains the plaintext key")
		}
		got, err := p.DecryptDataKey(ctx, dk.KeyID, dk.Wrapped, alice)
		if err != nil || !bytes.Equal(got, dk.Plaintext) {
			t.Fatalf("decrypt: %x, %v; want the generated key", got, err)
		}
		for name, ec := range map[string]secrets.Context{"other user": bob, "other purpose": other} {
			if _, err := p.DecryptDataKey(ctx, dk.KeyID, dk.Wrapped, ec); !errors.Is(err, secrets.ErrUndecryptable) {
				t.Errorf("decrypt under %s: %v; want ErrUndecryptable", name, err)
			}
		}
		bad := bytes.Clone(dk.Wrapped)
		bad[len(bad)-1] ^= 1
		if _, err := p.DecryptDataKey(ctx, dk.KeyID, bad, alice); !errors.Is(err, secrets.ErrUndecryptable) {
			t.Errorf("decrypt a tampered key: %v; want ErrUndecryptable", err)
		}
	})

	t.Run("sealer", func(t *testing.T) {
		s := secrets.NewSealer(p)
		secret := []byte(`{"a":"access-token","r":"refresh-token"}`)
		sealed, err := s.Seal(ctx, alice, secret)
		if err != nil {
			t.Fatalf("seal: %v", err)
		}
		if sealed.Format != secrets.SealedFormatV1 || sealed.KeyID == "" || bytes.Contains(sealed.Ciphertext, []byte("access-token")) {
			t.Fatalf("sealed: format %d, key id %q; want format %d, a key id, no plaintext", sealed.Format, sealed.KeyID, secrets.SealedFormatV1)
		}
		// A fresh Sealer has no cache: it must unwrap through the provider.
		for name, s := range map[string]*secrets.Sealer{"same sealer": s, "fresh sealer": secrets.NewSealer(p)} {
			got, err := s.Open(ctx, alice, sealed)
			if err != nil || !bytes.Equal(got, secret) {
				t.Errorf("%s: open: %q, %v; want %q", name, got, err, secret)
			}
			if _, err := s.Open(ctx, bob, sealed); !errors.Is(err, secrets.ErrUndecryptable) {
				t.Errorf("%s: open a ciphertext moved to bob's item: %v; want ErrUndecryptable", name, err)
			}
		}
		tampered := sealed
		tampered.Ciphertext = bytes.Clone(sealed.Ciphertext)
		tampered.Ciphertext[0] ^= 1
		if _, err := secrets.NewSealer(p).Open(ctx, alice, tampered); !errors.Is(err, secrets.ErrUndecryptable) {
			t.Errorf("open a tampered ciphertext: %v; want ErrUndecryptable", err)
		}
	})
}
