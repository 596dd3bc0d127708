package model

import (
	"crypto/rand"
	"encoding/hex"
)

// NewID returns a random 128-bit identifier as 32 hex characters, for users,
// milestones, sessions, correlation and request ids.
func NewID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
