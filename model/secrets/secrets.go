// Package secrets seals secrets at the item level with envelope encryption:
// each secret is encrypted with AES-256-GCM (crypto/cipher, no cipher of our
// own) under a data key, and the data key is wrapped by a KeyProvider — AWS
// KMS in AWS (model/secrets/kms), a key from configuration locally and in
// tests (LocalKeyProvider). Both run the same Sealer code and produce the
// same stored format (model.SealedSecret).
//
// Every data key is bound to a Context: user + purpose are KMS's
// encryption context when the key is generated and unwrapped, and with the
// item's key (format 2) they are the AEAD's additional data, so a ciphertext
// moved to another item, or a whole item copied under another user's key,
// does not open. Format 1 secrets (no item key) are still opened.
//
// The Sealer caches briefly in a warm process: a data key is reused for
// sealing the same context for at most EncryptTTL and EncryptUses seals,
// and unwrapped data keys are kept for DecryptTTL keyed by the wrapped key
// (and its context), so a warm worker does not call KMS for every token.
package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/commitcollect/backend/model"
)

// DataKeySize is the size of a data key: AES-256.
const DataKeySize = 32

// Defaults of the Sealer's cache.
const (
	DefaultEncryptTTL  = 5 * time.Minute
	DefaultEncryptUses = 100
	DefaultDecryptTTL  = 5 * time.Minute
	maxCached          = 1024
)

// ErrUndecryptable is returned (wrapped, and matching model.ErrInvalid) when a
// sealed secret does not open: wrong context, wrong key, tampered bytes or an
// unknown format.
var ErrUndecryptable = fmt.Errorf("sealed secret does not open: %w", model.ErrInvalid)

// DataKey is a fresh data key: the plaintext to encrypt with, the same key
// wrapped by the provider (stored next to the ciphertext) and the id of the
// provider's key that wrapped it.
type DataKey struct {
	Plaintext []byte
	Wrapped   []byte
	KeyID     string
}

// KeyProvider makes and unwraps data keys bound to a context. In AWS it is
// KMS (GenerateDataKey / Decrypt with the context as encryption context);
// locally it is LocalKeyProvider.
type KeyProvider interface {
	// GenerateDataKey returns a new DataKeySize-byte data key bound to ec.
	GenerateDataKey(ctx context.Context, ec Context) (DataKey, error)
	// DecryptDataKey unwraps a data key made by GenerateDataKey under keyID
	// and ec; it fails (matching ErrUndecryptable where the provider can
	// tell) for any other context or key.
	DecryptDataKey(ctx context.Context, keyID string, wrapped []byte, ec Context) ([]byte, error)
}

// Sealer seals and opens secrets with data keys from a KeyProvider. It is
// safe for concurrent use.
type Sealer struct {
	p KeyProvider
	// EncryptTTL and EncryptUses bound how long and how often one data key
	// seals secrets of one context.
	EncryptTTL  time.Duration
	EncryptUses int
	// DecryptTTL bounds how long an unwrapped data key is kept.
	DecryptTTL time.Duration
	// Now is the clock; tests may replace it.
	Now func() time.Time

	mu  sync.Mutex
	enc map[string]*encKey
	dec map[string]decKey
}

type encKey struct {
	dk      DataKey
	created time.Time
	uses    int
}

type decKey struct {
	key     []byte
	created time.Time
}

// NewSealer returns a Sealer over p with the default cache bounds.
func NewSealer(p KeyProvider) *Sealer {
	return &Sealer{
		p: p, EncryptTTL: DefaultEncryptTTL, EncryptUses: DefaultEncryptUses, DecryptTTL: DefaultDecryptTTL,
		Now: time.Now, enc: map[string]*encKey{}, dec: map[string]decKey{},
	}
}

// Seal encrypts plaintext under a data key bound to ec.
func (s *Sealer) Seal(ctx context.Context, ec Context, plaintext []byte) (model.SealedSecret, error) {
	dk, err := s.encryptionKey(ctx, ec)
	if err != nil {
		return model.SealedSecret{}, fmt.Errorf("seal %s: %w", ec, err)
	}
	aead, err := newAEAD(dk.Plaintext)
	if err != nil {
		return model.SealedSecret{}, fmt.Errorf("seal %s: %w", ec, err)
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return model.SealedSecret{}, fmt.Errorf("seal %s: nonce: %w", ec, err)
	}
	return model.SealedSecret{
		Format: ec.Format(), KeyID: dk.KeyID, WrappedKey: dk.Wrapped, Nonce: nonce,
		Ciphertext: aead.Seal(nil, nonce, plaintext, ec.AAD()),
	}, nil
}

// Open decrypts a sealed secret under ec, as its format says: a format 1
// secret under ec without its Item, a format 2 one under ec whole (ec must
// name the item's key). It returns an error matching ErrUndecryptable (and
// model.ErrInvalid) when the secret was sealed under another context or
// key, was tampered with, or has an unknown format.
func (s *Sealer) Open(ctx context.Context, ec Context, sealed model.SealedSecret) ([]byte, error) {
	switch sealed.Format {
	case SealedFormatV1:
		ec.Item = ""
	case SealedFormatV2:
		if ec.Item == "" {
			return nil, fmt.Errorf("open %s: format 2 is bound to an item key and none was given: %w", ec, ErrUndecryptable)
		}
	default:
		return nil, fmt.Errorf("open %s: format %d: %w", ec, sealed.Format, ErrUndecryptable)
	}
	key, err := s.decryptionKey(ctx, ec, sealed)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", ec, err)
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", ec, err)
	}
	if len(sealed.Nonce) != aead.NonceSize() {
		return nil, fmt.Errorf("open %s: nonce size %d: %w", ec, len(sealed.Nonce), ErrUndecryptable)
	}
	pt, err := aead.Open(nil, sealed.Nonce, sealed.Ciphertext, ec.AAD())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", ec, ErrUndecryptable)
	}
	return pt, nil
}

func (s *Sealer) encryptionKey(ctx context.Context, ec Context) (DataKey, error) {
	id := string(ec.AAD())
	now := s.Now()
	s.mu.Lock()
	if e, ok := s.enc[id]; ok && e.uses < s.EncryptUses && now.Sub(e.created) < s.EncryptTTL {
		e.uses++
		dk := e.dk
		s.mu.Unlock()
		return dk, nil
	}
	s.mu.Unlock()
	dk, err := s.p.GenerateDataKey(ctx, ec)
	if err != nil {
		return DataKey{}, fmt.Errorf("generate data key: %w", err)
	}
	if len(dk.Plaintext) != DataKeySize {
		return DataKey{}, fmt.Errorf("generate data key: %d bytes, want %d", len(dk.Plaintext), DataKeySize)
	}
	s.mu.Lock()
	if len(s.enc) >= maxCached {
		clear(s.enc)
	}
	s.enc[id] = &encKey{dk: dk, created: now, uses: 1}
	// The key we just made also opens what it seals.
	s.putDec(ec, dk.KeyID, dk.Wrapped, dk.Plaintext, now)
	s.mu.Unlock()
	return dk, nil
}

func decCacheKey(ec Context, keyID string, wrapped []byte) string {
	return string(ec.AAD()) + "\x00" + keyID + "\x00" + string(wrapped)
}

// putDec must be called with s.mu held.
func (s *Sealer) putDec(ec Context, keyID string, wrapped, key []byte, now time.Time) {
	if len(s.dec) >= maxCached {
		clear(s.dec)
	}
	s.dec[decCacheKey(ec, keyID, wrapped)] = decKey{key: key, created: now}
}

func (s *Sealer) decryptionKey(ctx context.Context, ec Context, sealed model.SealedSecret) ([]byte, error) {
	id := decCacheKey(ec, sealed.KeyID, sealed.WrappedKey)
	now := s.Now()
	s.mu.Lock()
	if d, ok := s.dec[id]; ok && now.Sub(d.created) < s.DecryptTTL {
		s.mu.Unlock()
		return d.key, nil
	}
	s.mu.Unlock()
	key, err := s.p.DecryptDataKey(ctx, sealed.KeyID, sealed.WrappedKey, ec)
	if err != nil {
		return nil, fmt.Errorf("decrypt data key (key %s): %w", sealed.KeyID, err)
	}
	if len(key) != DataKeySize {
		return nil, fmt.Errorf("decrypt data key: %d bytes: %w", len(key), ErrUndecryptable)
	}
	s.mu.Lock()
	s.putDec(ec, sealed.KeyID, sealed.WrappedKey, key, now)
	s.mu.Unlock()
	return key, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("aes: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("gcm: %w", err)
	}
	return aead, nil
}
