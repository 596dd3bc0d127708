package secrets

import (
	"strconv"
	"strings"
)

// Envelope formats: AES-256-GCM under a per-context data key, the data key
// wrapped by a key provider (KMS in AWS, a configured key locally),
// additional data = SecretContext.AAD().
const (
	// SealedFormatV1 binds the secret to {userId, purpose}, where userId
	// was the item's userId attribute when it was sealed (before secrets
	// were bound to the item's key). Still opened, under the user of the
	// key the item is read at, until `make sealtokens` rewrites it.
	SealedFormatV1 = 1
	// SealedFormatV2 binds the secret to the item's key: {userId, purpose}
	// with userId parsed from the item's PK, plus the whole key (PK and SK)
	// in the additional data. A whole item copied under another key does
	// not open, whatever its attributes say.
	SealedFormatV2 = 2
)

// Context binds a sealed secret (model.SealedSecret) to the item it belongs to: the user
// and the purpose (KMS's encryption context, Map) and, for format 2, the
// item's key (with them, the AEAD's additional data, AAD).
type Context struct {
	// UserID is the user the item's key belongs to (parsed from its PK).
	UserID  string
	Purpose string
	// Item is the item's key (Key.String()); empty for a format 1 context.
	Item string
}

// Format is the envelope format a secret sealed under c has: 2 when c
// names the item's key, 1 otherwise.
func (c Context) Format() int {
	if c.Item != "" {
		return SealedFormatV2
	}
	return SealedFormatV1
}

// Map is the context as a KMS encryption context (keys userId, purpose).
func (c Context) Map() map[string]string {
	return map[string]string{"userId": c.UserID, "purpose": c.Purpose}
}

// AAD is the context as additional authenticated data: a fixed label (per
// format) and the values, each length-prefixed by the separator-free
// encoding below so that no two contexts render alike. A format 1 context
// renders exactly as before format 2 existed.
func (c Context) AAD() []byte {
	var b strings.Builder
	vals := []string{c.Purpose, c.UserID}
	if c.Item == "" {
		b.WriteString("commitcollect/sealed/v1")
	} else {
		b.WriteString("commitcollect/sealed/v2")
		vals = append(vals, c.Item)
	}
	for _, v := range vals {
		b.WriteByte(0)
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return []byte(b.String())
}

// String renders the context for cache keys and error messages (no secret in
// it).
func (c Context) String() string {
	if c.Item != "" {
		return c.Purpose + "/" + c.UserID + " at " + c.Item
	}
	return c.Purpose + "/" + c.UserID
}
