package model

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
