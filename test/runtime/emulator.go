// Package runtime runs the three Lambda bootstraps (api, worker, projector)
// under AWS's Runtime Interface Emulator, with the environment Terraform
// gives each function, against DynamoDB Local and the Strava simulator, and
// drives them with the event shapes AWS delivers: API Gateway HTTP API v2
// requests, the api's asynchronous invoke of the worker (through a shim that
// speaks the Lambda Invoke API, and SSM GetParameter for the secrets
// Terraform passes by reference), and DynamoDB stream batches read from
// DynamoDB Local's real stream with the event source mapping's filter
// criteria applied.
//
// The emulator comes from the Go module proxy: make lambda-rie (a step of
// make test) builds it into .cache/bin/aws-lambda-rie, which the tests find
// there or through CC_LAMBDA_RIE; without either they skip with a notice.
package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvRIE names the environment variable holding the emulator binary's path.
const EnvRIE = "CC_LAMBDA_RIE"

// Report is one REPORT line of the emulator.
type Report struct {
	Function   string
	RequestID  string
	InitMs     float64 // Init Duration: only on the cold start, else 0
	DurationMs float64
	// MaxMemoryMB is what the emulator prints as Max Memory Used. The
	// emulator copies the configured memory size there (it cannot measure
	// it); PeakRSSKB measures the bootstrap instead.
	MaxMemoryMB int
}

// Emulator is one running aws-lambda-rie with one bootstrap. It serves one
// invocation at a time, like one Lambda execution environment.
type Emulator struct {
	Name string
	url  string
	cmd  *exec.Cmd
	done chan struct{}

	invokeMu sync.Mutex // one invocation at a time

	mu      sync.Mutex
	reports []Report
	log     bytes.Buffer
}

// FunctionError is what a handler returned as an error (the runtime's
// error response) or the emulator's refusal.
type FunctionError struct {
	Function string
	Status   int
	Body     string
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("%s: function error (HTTP %d): %s", e.Function, e.Status, e.Body)
}

var reportLine = regexp.MustCompile(`^REPORT RequestId: (\S+)\s+(?:Init Duration: ([0-9.]+) ms\s+)?Duration: ([0-9.]+) ms\s+Billed Duration: \S+ ms\s+Memory Size: \d+ MB\s+Max Memory Used: (\d+) MB`)

// StartEmulator runs rie with bootstrap (an executable) and env as the
// function's whole environment. Both of the emulator's addresses are free
// loopback ports, so several emulators run side by side. The process (and
// the bootstrap it starts) is stopped when the test ends; its output is
// logged when the test failed.
func StartEmulator(tb testing.TB, rie, bootstrap, name string, env map[string]string) *Emulator {
	tb.Helper()
	invokeAddr, apiAddr := freeAddr(tb), freeAddr(tb)
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", invokeAddr, "--runtime-api-address", apiAddr, bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	e := &Emulator{Name: name, url: "http://" + invokeAddr, cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start emulator for %s: %v", name, err)
	}
	go e.scan(pr)
	go func() {
		_ = cmd.Wait()
		_ = pw.Close()
		close(e.done)
	}()
	tb.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-e.done
		}
		if tb.Failed() {
			tb.Logf("--- %s emulator output:\n%s", name, e.Output())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", invokeAddr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return e
		}
		select {
		case <-e.done:
			tb.Fatalf("emulator for %s exited at start:\n%s", name, e.Output())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("emulator for %s did not listen on %s within 15s", name, invokeAddr)
		}
	}
}

func (e *Emulator) scan(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		e.mu.Lock()
		e.log.WriteString(line)
		e.log.WriteByte('\n')
		if m := reportLine.FindStringSubmatch(line); m != nil {
			rep := Report{Function: e.Name, RequestID: m[1]}
			rep.InitMs, _ = strconv.ParseFloat(m[2], 64)
			rep.DurationMs, _ = strconv.ParseFloat(m[3], 64)
			rep.MaxMemoryMB, _ = strconv.Atoi(m[4])
			e.reports = append(e.reports, rep)
		}
		e.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
}

// Output returns everything the emulator and the bootstrap printed.
func (e *Emulator) Output() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.log.String()
}

// Reports returns the REPORT lines seen so far.
func (e *Emulator) Reports() []Report {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Report(nil), e.reports...)
}

// Invoke sends payload as a synchronous invocation and returns the
// function's response. A handler error comes back as *FunctionError.
func (e *Emulator) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	e.invokeMu.Lock()
	defer e.invokeMu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/2015-03-31/functions/function/invocations", bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", e.Name, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", e.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: read response: %w", e.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &FunctionError{Function: e.Name, Status: resp.StatusCode, Body: string(body)}
	}
	var fe struct {
		ErrorType    string `json:"errorType"`
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal(body, &fe) == nil && fe.ErrorMessage != "" {
		return nil, &FunctionError{Function: e.Name, Status: resp.StatusCode, Body: string(body)}
	}
	return body, nil
}

// PeakRSSKB is the bootstrap's peak resident set size (VmHWM of the
// emulator's child process), in KiB; 0 when it cannot be read.
func (e *Emulator) PeakRSSKB() int {
	pid := e.cmd.Process.Pid
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces, so split after ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		st, err := os.ReadFile(filepath.Join(filepath.Dir(s), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				return kb
			}
		}
	}
	return 0
}

func freeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}
