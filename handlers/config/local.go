package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Defaults of the local stack's addresses.
const (
	DefaultHTTPAddr = "127.0.0.1:8080"
	DefaultSimAddr  = "127.0.0.1:8090"
)

// Local is what the local stack (`make run`, scripts/runkit) reads on top
// of Config: nothing in AWS reads it.
type Local struct {
	// HTTPAddr is where the API listens (CC_HTTP_ADDR, default
	// DefaultHTTPAddr; port 0 picks a free one).
	HTTPAddr string
	// SimAddr is where the Strava simulator listens (CC_STRAVA_SIM_ADDR,
	// default DefaultSimAddr).
	SimAddr string
	// DataDir keeps DynamoDB Local's tables, the stream checkpoints and the
	// local token key across runs (CC_DATA_DIR; empty: in memory).
	DataDir string
}

// LocalFromEnv reads the local stack's variables, with their defaults.
func LocalFromEnv(getenv func(string) string) Local {
	or := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	return Local{HTTPAddr: or("CC_HTTP_ADDR", DefaultHTTPAddr), SimAddr: or("CC_STRAVA_SIM_ADDR", DefaultSimAddr), DataDir: getenv("CC_DATA_DIR")}
}

// TokenKeyFile is the file in CC_DATA_DIR that keeps the local stack's
// token key.
const TokenKeyFile = "token.key"

// stackKeys are what a running local stack records for the operator
// commands (WriteStackFile): its table prefix and token key.
var stackKeys = []string{"CC_TABLE_PREFIX", "CC_TOKEN_KEY"}

// StackFile is where a running local stack whose DynamoDB Local listens at
// endpoint records its table prefix and token key (0600, in the temporary
// directory, removed when the stack stops): the endpoint names it, so a
// command pointed at that DynamoDB Local finds it.
func StackFile(endpoint string) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(strings.TrimRight(endpoint, "/")))
	return filepath.Join(os.TempDir(), "commitcollect-stack-"+name+".env")
}

// WriteStackFile records get's table prefix and token key in
// StackFile(endpoint) and returns its path.
func WriteStackFile(endpoint string, get func(string) string) (string, error) {
	var b strings.Builder
	for _, k := range stackKeys {
		fmt.Fprintf(&b, "%s=%s\n", k, get(k))
	}
	path := StackFile(endpoint)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return "", fmt.Errorf("write local stack file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write local stack file: %w", err)
	}
	return path, nil
}

// LocalStackEnv completes getenv for an operator command (scripts/) the way
// the local stack completes its own environment, so a command pointed at
// the stack's DynamoDB Local (DYNAMODB_ENDPOINT) opens its tokens: with no
// token key named, the key kept in CC_DATA_DIR (TokenKeyFile), else the
// running stack's (StackFile of that endpoint, which also gives its table
// prefix when none is named). Without DYNAMODB_ENDPOINT (AWS) it is getenv.
func LocalStackEnv(getenv func(string) string) func(string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	endpoint := getenv("DYNAMODB_ENDPOINT")
	if endpoint == "" || getenv("CC_TOKEN_KEY") != "" || getenv("CC_TOKEN_KMS_KEY") != "" {
		return getenv
	}
	found := map[string]string{}
	if dir := getenv("CC_DATA_DIR"); dir != "" {
		if b, err := os.ReadFile(filepath.Join(dir, TokenKeyFile)); err == nil {
			found["CC_TOKEN_KEY"] = strings.TrimSpace(string(b))
		}
	}
	if b, err := os.ReadFile(StackFile(endpoint)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && slices.Contains(stackKeys, k) && found[k] == "" && v != "" {
				found[k] = v
			}
		}
	}
	return func(k string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return found[k]
	}
}
