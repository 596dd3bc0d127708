// Package kms is the AWS KMS KeyProvider for model/secrets: data keys come
// from GenerateDataKey (AES_256) and are unwrapped with Decrypt, both with
// the secret's context (userId, purpose) as encryption context, so KMS
// refuses to unwrap a data key for any other item and CloudTrail records
// which user's secret each call was for. The IAM policy (terraform) allows
// only these two actions, only with an encryption context.
package kms

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskms "github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/commitcollect/backend/model/secrets"
)

// API is the part of the KMS client the provider uses (*kms.Client).
type API interface {
	GenerateDataKey(ctx context.Context, in *awskms.GenerateDataKeyInput, opts ...func(*awskms.Options)) (*awskms.GenerateDataKeyOutput, error)
	Decrypt(ctx context.Context, in *awskms.DecryptInput, opts ...func(*awskms.Options)) (*awskms.DecryptOutput, error)
}

// Provider is a secrets.KeyProvider backed by one KMS key.
type Provider struct {
	api   API
	keyID string
}

var _ secrets.KeyProvider = (*Provider)(nil)

// New returns a provider generating data keys under keyID (a key id, ARN or
// alias; CC_TOKEN_KMS_KEY).
func New(api API, keyID string) *Provider { return &Provider{api: api, keyID: keyID} }

// GenerateDataKey implements secrets.KeyProvider. The returned KeyID is the
// key's ARN as KMS reports it.
func (p *Provider) GenerateDataKey(ctx context.Context, ec secrets.Context) (secrets.DataKey, error) {
	out, err := p.api.GenerateDataKey(ctx, &awskms.GenerateDataKeyInput{
		KeyId: aws.String(p.keyID), KeySpec: types.DataKeySpecAes256, EncryptionContext: ec.Map(),
	})
	if err != nil {
		return secrets.DataKey{}, fmt.Errorf("kms generate data key for %s: %w", ec, err)
	}
	return secrets.DataKey{Plaintext: out.Plaintext, Wrapped: out.CiphertextBlob, KeyID: aws.ToString(out.KeyId)}, nil
}

// DecryptDataKey implements secrets.KeyProvider. KMS checks the encryption
// context and that the data key was wrapped by keyID; its refusals
// (InvalidCiphertextException, IncorrectKeyException) match
// secrets.ErrUndecryptable.
func (p *Provider) DecryptDataKey(ctx context.Context, keyID string, wrapped []byte, ec secrets.Context) ([]byte, error) {
	out, err := p.api.Decrypt(ctx, &awskms.DecryptInput{
		CiphertextBlob: wrapped, EncryptionContext: ec.Map(), KeyId: aws.String(keyID),
	})
	var invalid *types.InvalidCiphertextException
	var incorrect *types.IncorrectKeyException
	switch {
	case errors.As(err, &invalid), errors.As(err, &incorrect):
		return nil, fmt.Errorf("kms decrypt data key for %s: %v: %w", ec, err, secrets.ErrUndecryptable)
	case err != nil:
		return nil, fmt.Errorf("kms decrypt data key for %s: %w", ec, err)
	}
	return out.Plaintext, nil
}
