package terraform

import (
	"strings"
	"testing"
)

// TestTokenKeyChecksFailWhenBroken breaks one protection of the token key
// per case in a copy of terraform/, plans and applies it offline, and
// requires CheckDeployed (checkTokenKey) to name it (runBroken: the cases
// share one copy). The api's and the
// worker's SealStravaTokens statements are alike: the first (the api's) is
// broken.
func TestTokenKeyChecksFailWhenBroken(t *testing.T) {
	t.Parallel()
	const cc = "modules/commitcollect/main.tf"
	runBroken(t, []brokenCase{
		{1, "encryption context purpose condition removed", cc,
			"    { test = \"StringEquals\", variable = \"kms:EncryptionContext:purpose\", values = [\"strava-tokens\"] },\n", "",
			`api policy statement "SealStravaTokens" on the token key: condition StringEquals kms:EncryptionContext:purpose`},
		{1, "any encryption context keys", cc, `values = ["purpose", "userId"]`, `values = ["purpose", "userId", "other"]`,
			"condition ForAllValues:StringEquals kms:EncryptionContextKeys"},
		{1, "via-service condition that denies direct calls", cc, `variable = "kms:ViaService", values = ["true"]`,
			`variable = "kms:ViaService", values = ["false"]`, "condition Null kms:ViaService"},
		{1, "encrypt granted too", cc, `actions   = ["kms:GenerateDataKey", "kms:Decrypt"]`, `actions   = ["kms:GenerateDataKey", "kms:Decrypt", "kms:Encrypt"]`,
			"api policy on the token key"},
		{1, "no rotation", cc, "enable_key_rotation     = true", "enable_key_rotation     = false", "enable_key_rotation must be true"},
		{1, "projector gets the token key", cc, "environment        = local.common_env", "environment        = merge(local.common_env, local.tokens_env)",
			"function projector: has CC_TOKEN_KMS_KEY = true, want false"},
	})
}

// TestIAMDiffKMS: a grant on a key counts as used only by a call whose
// encryption context satisfies its conditions, and only grants conditioned
// on kms:ViaService are left to AWS (grantedForAWS): an unused direct grant
// on the token key is reported.
func TestIAMDiffKMS(t *testing.T) {
	t.Parallel()
	const tokenKey, tableKey = "arn:aws:kms:r:1:key/token", "arn:aws:kms:r:1:key/table"
	cond := map[string]map[string]StringOrList{}
	for test, vars := range TokenKeyConditions {
		cond[test] = map[string]StringOrList{}
		for k, v := range vars {
			cond[test][k] = v
		}
	}
	pols := map[string][]Policy{"worker": {{Statement: []PolicyStatement{
		{Sid: "SealStravaTokens", Effect: "Allow", Action: TokenKeyActions, Resource: StringOrList{tokenKey}, Condition: cond},
		{Sid: "TableKey", Effect: "Allow", Action: StringOrList{"kms:Decrypt"}, Resource: StringOrList{tableKey},
			Condition: map[string]map[string]StringOrList{"StringEquals": {"kms:ViaService": {"dynamodb.r.amazonaws.com"}}}},
	}}}}
	ec := map[string]string{"purpose": "strava-tokens", "userId": "u1"}
	tests := []struct {
		name                    string
		used                    []Used
		wantMissing, wantUnused string
	}{
		{name: "both actions with the context", used: []Used{{"kms:GenerateDataKey", tokenKey, ec}, {"kms:Decrypt", tokenKey, ec}}},
		{name: "decrypt never called", used: []Used{{"kms:GenerateDataKey", tokenKey, ec}},
			wantUnused: `worker: the role grants kms:Decrypt on ` + tokenKey},
		{name: "another purpose", used: []Used{{"kms:GenerateDataKey", tokenKey, ec}, {"kms:Decrypt", tokenKey, map[string]string{"purpose": "x", "userId": "u1"}}},
			wantMissing: "worker: the code calls kms:Decrypt on " + tokenKey + " with encryption context", wantUnused: "grants kms:Decrypt on " + tokenKey},
		{name: "an extra context key", used: []Used{{"kms:GenerateDataKey", tokenKey, map[string]string{"purpose": "strava-tokens", "userId": "u1", "x": "y"}}, {"kms:Decrypt", tokenKey, ec}},
			wantMissing: "worker: the code calls kms:GenerateDataKey on " + tokenKey, wantUnused: "grants kms:GenerateDataKey on " + tokenKey},
		{name: "no context", used: []Used{{"kms:GenerateDataKey", tokenKey, nil}, {"kms:Decrypt", tokenKey, ec}},
			wantMissing: "worker: the code calls kms:GenerateDataKey on " + tokenKey, wantUnused: "grants kms:GenerateDataKey on " + tokenKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			missing, unused := IAMDiff(pols, map[string][]Used{"worker": tt.used})
			for _, c := range []struct {
				got  []string
				want string
			}{{missing, tt.wantMissing}, {unused, tt.wantUnused}} {
				joined := strings.Join(c.got, "\n")
				if (c.want == "") != (joined == "") || !strings.Contains(joined, c.want) {
					t.Errorf("got %q, want one mentioning %q", c.got, c.want)
				}
			}
		})
	}
}
