package config

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
