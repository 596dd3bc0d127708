package config_test

import (
	"strings"
	"testing"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/model/secrets"
)

func TestTokenKeySettings(t *testing.T) {
	t.Parallel()
	key := secrets.NewLocalKey()
	tests := []struct {
		name    string
		env     map[string]string
		need    config.Need
		wantErr string // "" = valid
	}{
		{"local key", map[string]string{"CC_TOKEN_KEY": key}, config.Need{Tokens: true}, ""},
		{"kms key", map[string]string{"CC_TOKEN_KMS_KEY": "arn:aws:kms:ap-southeast-2:111122223333:key/k"}, config.Need{Tokens: true}, ""},
		{"none but needed", map[string]string{}, config.Need{Tokens: true}, "CC_TOKEN_KMS_KEY (AWS) or CC_TOKEN_KEY (local) is required"},
		{"none and not needed", map[string]string{}, config.Need{}, ""},
		{"both", map[string]string{"CC_TOKEN_KEY": key, "CC_TOKEN_KMS_KEY": "alias/x"}, config.Need{Tokens: true}, "both set"},
		{"short local key", map[string]string{"CC_TOKEN_KEY": "c2hvcnQ="}, config.Need{Tokens: true}, "CC_TOKEN_KEY must be base64 of 32 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.FromEnv(func(k string) string { return tt.env[k] }, tt.need)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}
