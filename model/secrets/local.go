package secrets

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/commitcollect/backend/model"
)

// LocalKeyPrefix starts the key id of every LocalKeyProvider key, so a stored
// secret says which kind of provider wrapped it.
const LocalKeyPrefix = "local:"

// LocalKeyProvider wraps data keys with AES-256-GCM under a master key from
// configuration (CC_TOKEN_KEY), with the context as additional data. It is
// the KeyProvider of `make run` and the tests; in AWS the master key stays in
// KMS instead.
type LocalKeyProvider struct {
	master []byte
	id     string
}

// NewLocalKeyProvider returns a provider over a 32-byte master key. Its key
// id is "local:" and the first 16 hex digits of the key's SHA-256, which
// names the key without revealing it.
func NewLocalKeyProvider(master []byte) (*LocalKeyProvider, error) {
	if len(master) != DataKeySize {
		return nil, fmt.Errorf("local token key: %d bytes, want %d: %w", len(master), DataKeySize, model.ErrInvalid)
	}
	sum := sha256.Sum256(master)
	return &LocalKeyProvider{master: append([]byte(nil), master...), id: LocalKeyPrefix + hex.EncodeToString(sum[:8])}, nil
}

// ParseLocalKey decodes a CC_TOKEN_KEY value: standard base64 of 32 bytes.
func ParseLocalKey(b64 string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil || len(k) != DataKeySize {
		return nil, fmt.Errorf("CC_TOKEN_KEY must be base64 of %d bytes: %w", DataKeySize, model.ErrInvalid)
	}
	return k, nil
}

// NewLocalKey returns a fresh random master key, base64-encoded.
func NewLocalKey() string {
	k := make([]byte, DataKeySize)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (Go 1.24+)
	return base64.StdEncoding.EncodeToString(k)
}

// LoadOrCreateLocalKey reads the base64 master key kept in path, creating
// the file (mode 0600) with a new key when it does not exist, so a local
// stack keeps opening what it sealed across restarts.
func LoadOrCreateLocalKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("create token key %s: %w", path, err)
		}
		if err := os.WriteFile(path, []byte(NewLocalKey()+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("create token key %s: %w", path, err)
		}
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read token key %s: %w", path, err)
	}
	k, err := ParseLocalKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("token key %s: %w", path, err)
	}
	return k, nil
}

// KeyID is the id stored with every secret this provider wraps.
func (p *LocalKeyProvider) KeyID() string { return p.id }

// GenerateDataKey implements KeyProvider: a random data key, wrapped as
// nonce || AES-GCM(master, key, ec.AAD()).
func (p *LocalKeyProvider) GenerateDataKey(_ context.Context, ec Context) (DataKey, error) {
	key := make([]byte, DataKeySize)
	if _, err := rand.Read(key); err != nil {
		return DataKey{}, fmt.Errorf("local data key: %w", err)
	}
	aead, err := newAEAD(p.master)
	if err != nil {
		return DataKey{}, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return DataKey{}, fmt.Errorf("local data key nonce: %w", err)
	}
	return DataKey{Plaintext: key, Wrapped: aead.Seal(nonce, nonce, key, ec.AAD()), KeyID: p.id}, nil
}

// DecryptDataKey implements KeyProvider. It returns an error matching
// ErrUndecryptable for a key wrapped by another master key or under another
// context.
func (p *LocalKeyProvider) DecryptDataKey(_ context.Context, keyID string, wrapped []byte, ec Context) ([]byte, error) {
	if keyID != p.id {
		return nil, fmt.Errorf("local data key: wrapped by %q, this key is %q: %w", keyID, p.id, ErrUndecryptable)
	}
	aead, err := newAEAD(p.master)
	if err != nil {
		return nil, err
	}
	n := aead.NonceSize()
	if len(wrapped) < n {
		return nil, fmt.Errorf("local data key: too short: %w", ErrUndecryptable)
	}
	key, err := aead.Open(nil, wrapped[:n], wrapped[n:], ec.AAD())
	if err != nil {
		return nil, fmt.Errorf("local data key: %w", ErrUndecryptable)
	}
	return key, nil
}
