// Package dynamolocal gives tests DynamoDB Local (scripts/ddblocal starts
// it) and uniquely named tables on it.
//
// One DynamoDB Local process is started per test binary, on a free port, the
// first time a test asks for it; DYNAMODB_ENDPOINT overrides that with an
// endpoint already running. Under -short the tests that need it skip (the
// decisions' fast tests run there without Java); otherwise a missing
// DynamoDB Local fails them with how to install it.
package dynamolocal

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/commitcollect/backend/model/secrets"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/scripts/ddblocal"
)

// Server is a running DynamoDB Local (scripts/ddblocal).
type Server = ddblocal.Server

// Options configures Start.
type Options = ddblocal.Options

// Start launches DynamoDB Local (ddblocal.Start).
func Start(ctx context.Context, o Options) (*Server, error) { return ddblocal.Start(ctx, o) }

// Config returns an AWS config for a local endpoint (ddblocal.Config).
func Config(endpoint string) aws.Config { return ddblocal.Config(endpoint) }

// UniquePrefix returns a table-name prefix no other test run uses.
func UniquePrefix() string { return ddblocal.UniquePrefix() }

// ModuleRoot is the folder holding go.mod (ddblocal.ModuleRoot).
func ModuleRoot() (string, error) { return ddblocal.ModuleRoot() }

var (
	shared     *Server
	sharedErr  error
	sharedOnce sync.Once
)

// Endpoint returns the endpoint tests use: DYNAMODB_ENDPOINT when set, else a
// DynamoDB Local started once for this test binary. It fails tb with the
// install hint when DynamoDB Local is missing.
func Endpoint(tb testing.TB) string {
	tb.Helper()
	if ep := os.Getenv("DYNAMODB_ENDPOINT"); ep != "" {
		return ep
	}
	skipShort(tb)
	sharedOnce.Do(func() {
		shared, sharedErr = Start(context.Background(), Options{})
	})
	if sharedErr != nil {
		tb.Fatalf("dynamodb local: %v", sharedErr)
	}
	return shared.Endpoint
}

// skipShort skips tb under go test -short: the decisions' own tests (with
// function-field fakes) run there without Java; the adapters and the
// end-to-end paths need DynamoDB Local, which make test starts.
func skipShort(tb testing.TB) {
	if testing.Short() {
		tb.Skip("-short: needs DynamoDB Local (make test runs it)")
	}
}

// Main runs a package's tests and stops the shared DynamoDB Local afterwards;
// call it from TestMain: func TestMain(m *testing.M) { dynamolocal.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// Clients returns DynamoDB and DynamoDB Streams clients for the test endpoint.
func Clients(tb testing.TB) (*dynamodb.Client, *dynamodbstreams.Client) {
	tb.Helper()
	cfg := Config(Endpoint(tb))
	return dynamodb.NewFromConfig(cfg), dynamodbstreams.NewFromConfig(cfg)
}

// Private starts a DynamoDB Local of tb's own, stopped when tb ends, and
// returns a client of it. It is for tests of table administration (an
// index added to or dropped from an existing table): DynamoDB Local builds
// such an index in the background, and the shared instance, busy with every
// other test of a -race run, has left one CREATING for twenty minutes.
func Private(tb testing.TB) *dynamodb.Client {
	tb.Helper()
	db, _ := PrivateClients(tb)
	return db
}

// PrivateClients is Private with the streams client of the same DynamoDB
// Local.
func PrivateClients(tb testing.TB) (*dynamodb.Client, *dynamodbstreams.Client) {
	tb.Helper()
	skipShort(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	if err != nil {
		tb.Fatalf("dynamodb local: %v", err)
	}
	tb.Cleanup(s.Stop)
	cfg := Config(s.Endpoint)
	return dynamodb.NewFromConfig(cfg), dynamodbstreams.NewFromConfig(cfg)
}

// MustCreateTables creates the four tables as AWS has them, the main
// table's stream included, under a unique prefix and deletes them when the
// test ends.
func MustCreateTables(tb testing.TB, db *dynamodb.Client) dynamo.Tables {
	tb.Helper()
	return mustCreate(tb, db, true)
}

// MustCreateUnstreamedTables is MustCreateTables without the main table's
// stream, for tests that never read it. DynamoDB Local slows with every
// stream it has held, deleted tables' too: on one instance, 200 puts to a
// fresh table cost 0.6 CPU-s after 1 table with a stream and 2.3 after 40;
// without streams, 0.4 and 0.3.
func MustCreateUnstreamedTables(tb testing.TB, db *dynamodb.Client) dynamo.Tables {
	tb.Helper()
	return mustCreate(tb, db, false)
}

func mustCreate(tb testing.TB, db *dynamodb.Client, stream bool) dynamo.Tables {
	tb.Helper()
	t := dynamo.TableNames(UniquePrefix())
	specs := tableadmin.Specs(t)
	if !stream {
		for i := range specs {
			specs[i].StreamView = ""
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := tableadmin.CreateTablesFrom(ctx, db, specs); err != nil {
		tb.Fatalf("create tables: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := tableadmin.DeleteTables(ctx, db, t); err != nil {
			tb.Logf("delete tables: %v", err)
		}
	})
	return t
}

// NewStore is the usual test setup: a store over fresh tables without a
// stream (MustCreateUnstreamedTables) on the test endpoint. Tests that read
// the stream use NewStreamed.
func NewStore(tb testing.TB) *store.Adapters {
	tb.Helper()
	db, _ := Clients(tb)
	return storeOn(tb, db, MustCreateUnstreamedTables(tb, db))
}

// NewPrivateStore is NewStore on a DynamoDB Local of tb's own (Private), for
// a test that writes tens of thousands of items: when the package's tables
// still had streams, the shared instance spent about 250 CPU-seconds more on
// the long-life test's items than a fresh one (about 50).
func NewPrivateStore(tb testing.TB) *store.Adapters {
	tb.Helper()
	db := Private(tb)
	return storeOn(tb, db, MustCreateUnstreamedTables(tb, db))
}

// Streamed is a store over fresh tables with the streams client and the
// ARN of the main table's stream: for tests that read back what the store
// wrote as Lambda would be handed it.
type Streamed struct {
	Store   *store.Adapters
	Streams *dynamodbstreams.Client
	ARN     string
}

// NewStreamed is NewStore with its main table's stream.
func NewStreamed(tb testing.TB) Streamed {
	tb.Helper()
	db, streams := Clients(tb)
	st := storeOn(tb, db, MustCreateTables(tb, db))
	arn, err := tableadmin.StreamARN(context.Background(), db, st.DB.Tables())
	if err != nil {
		tb.Fatalf("stream of the main table: %v", err)
	}
	return Streamed{Store: st, Streams: streams, ARN: arn}
}

// storeOn is a store over tables t with a sealer of its own.
func storeOn(tb testing.TB, db *dynamodb.Client, t dynamo.Tables) *store.Adapters {
	tb.Helper()
	st := store.New(db, t)
	st.DB.Secrets = NewSealer(tb)
	return st
}

// NewSealer returns a token sealer over a fresh random local key: the same
// envelope code and stored format as KMS in AWS.
func NewSealer(tb testing.TB) *secrets.Sealer {
	tb.Helper()
	k, err := secrets.ParseLocalKey(secrets.NewLocalKey())
	if err != nil {
		tb.Fatal(err)
	}
	p, err := secrets.NewLocalKeyProvider(k)
	if err != nil {
		tb.Fatal(err)
	}
	return secrets.NewSealer(p)
}
