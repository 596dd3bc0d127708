package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/commitcollect/backend/model"
)

// TestLocalStackEnvFindsTheStacksTokenKey: an operator command pointed at a
// local stack's DynamoDB Local reads the token key the way the stack does
// (CC_DATA_DIR's key file), else the running stack's file for that
// endpoint (key and table prefix); the environment always wins, and a
// command without DYNAMODB_ENDPOINT (AWS) reads nothing local. Protection:
// LocalStackEnv (without it `make redrive` after `make run` has no sealer
// for the parked worker jobs' tokens).
func TestLocalStackEnvFindsTheStacksTokenKey(t *testing.T) {
	dataDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dataDir, TokenKeyFile), []byte("data-dir-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	running := "http://127.0.0.1:1" + model.NewID()[:4]
	path, err := WriteStackFile(running, func(k string) string {
		return map[string]string{"CC_TOKEN_KEY": "running-stack-key", "CC_TABLE_PREFIX": "dev-"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(path) })
	for _, tc := range []struct {
		name             string
		env              map[string]string
		wantKey, wantPfx string
	}{
		{"AWS: nothing local", map[string]string{"CC_DATA_DIR": dataDir}, "", ""},
		{"the stack's data dir", map[string]string{"DYNAMODB_ENDPOINT": "http://127.0.0.1:9", "CC_DATA_DIR": dataDir}, "data-dir-key", ""},
		{"the running stack's file", map[string]string{"DYNAMODB_ENDPOINT": running}, "running-stack-key", "dev-"},
		{"the environment wins", map[string]string{"DYNAMODB_ENDPOINT": running, "CC_TOKEN_KEY": "mine", "CC_TABLE_PREFIX": "x-"}, "mine", "x-"},
		{"another endpoint's stack", map[string]string{"DYNAMODB_ENDPOINT": "http://127.0.0.1:9"}, "", ""},
	} {
		get := LocalStackEnv(func(k string) string { return tc.env[k] })
		if key, pfx := get("CC_TOKEN_KEY"), get("CC_TABLE_PREFIX"); key != tc.wantKey || pfx != tc.wantPfx {
			t.Errorf("%s: key %q prefix %q, want %q %q", tc.name, key, pfx, tc.wantKey, tc.wantPfx)
		}
	}
}
