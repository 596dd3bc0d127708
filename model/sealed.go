package model

import (
	"strconv"
	"strings"
)

// SealedFormatV1 is the only envelope format so far: AES-256-GCM under a
// per-context data key, the data key wrapped by a key provider (KMS in AWS,
// a configured key locally), additional data = SecretContext.AAD().
const SealedFormatV1 = 1

// PurposeStravaTokens names the secret held by a Strava connection (the
// access and refresh token pair).
const PurposeStravaTokens = "strava-tokens"

// SealedSecret is a secret encrypted at the item level with envelope
// encryption. It carries everything needed to open it except the key
// provider's master key: the format version, the id of the master key that
// wrapped the data key, the wrapped data key, the nonce and the ciphertext.
// It can only be opened under the SecretContext it was sealed with, so a
// ciphertext copied onto another user's item does not open.
type SealedSecret struct {
	Format     int    `dynamodbav:"v"`
	KeyID      string `dynamodbav:"keyId"`
	WrappedKey []byte `dynamodbav:"wrappedKey"`
	Nonce      []byte `dynamodbav:"nonce"`
	Ciphertext []byte `dynamodbav:"ciphertext"`
}

// SecretContext binds a sealed secret to the item it belongs to: the user
// and the purpose. It is KMS's encryption context and the AEAD's additional
// data.
type SecretContext struct {
	UserID  string
	Purpose string
}

// Map is the context as a KMS encryption context (keys userId, purpose).
func (c SecretContext) Map() map[string]string {
	return map[string]string{"userId": c.UserID, "purpose": c.Purpose}
}

// AAD is the context as additional authenticated data: a fixed label and
// the two values, each length-prefixed by the separator-free encoding below
// so that no two contexts render alike.
func (c SecretContext) AAD() []byte {
	var b strings.Builder
	b.WriteString("commitcollect/sealed/v1")
	for _, v := range []string{c.Purpose, c.UserID} {
		b.WriteByte(0)
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return []byte(b.String())
}

// String renders the context for cache keys and error messages (no secret in
// it).
func (c SecretContext) String() string { return c.Purpose + "/" + c.UserID }
