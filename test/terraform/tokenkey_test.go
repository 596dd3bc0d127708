package terraform

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenKeyCheckFailsWhenBroken breaks one protection of the token key
// per case and requires Check to name it.
func TestTokenKeyCheckFailsWhenBroken(t *testing.T) {
	t.Parallel()
	const cc = "modules/commitcollect/main.tf"
	tests := []struct {
		name, old, new, wantInErr string
	}{
		{name: "projector gets the token key", old: "environment        = local.common_env", new: "environment        = merge(local.common_env, local.tokens_env)",
			wantInErr: "module projector: gets CC_TOKEN_KMS_KEY"},
		{name: "no rotation", old: "enable_key_rotation     = true", new: "enable_key_rotation     = false",
			wantInErr: "enable_key_rotation must be true"},
		{name: "any encryption context", old: `values   = ["strava-tokens"]`, new: `values   = ["*"]`,
			wantInErr: "condition StringEquals kms:EncryptionContext:purpose"},
		{name: "via-service condition that denies direct calls", old: "variable = \"kms:ViaService\"\n      values   = [\"true\"]",
			new: "variable = \"kms:ViaService\"\n      values   = [\"false\"]", wantInErr: "condition Null kms:ViaService"},
		{name: "encrypt granted too", old: `actions   = ["kms:GenerateDataKey", "kms:Decrypt"]`, new: `actions   = ["kms:GenerateDataKey", "kms:Decrypt", "kms:Encrypt"]`,
			wantInErr: "policy on local.token_kms_key_arn: got"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := copyTree(t)
			// The first occurrence: the api's policy (the worker's is the same).
			p := filepath.Join(dir, cc)
			b, err := os.ReadFile(p)
			if err != nil || !strings.Contains(string(b), tt.old) {
				t.Fatalf("mutation target %q not in %s (%v)", tt.old, cc, err)
			}
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), tt.old, tt.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := Check(dir, DefaultLayout)
			if err != nil {
				t.Fatal(err)
			}
			joined := strings.Join(got, "\n")
			if !strings.Contains(joined, tt.wantInErr) {
				t.Fatalf("got violations:\n%s\nwant one mentioning %q", joined, tt.wantInErr)
			}
		})
	}
}
