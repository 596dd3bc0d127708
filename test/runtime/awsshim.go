package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// AWS is a test shim for the two AWS APIs the functions call besides
// DynamoDB: Lambda Invoke (the api's asynchronous hand-off to the worker)
// and SSM GetParameter (the secrets Terraform passes as *_PARAM). Point a
// function at it with AWS_ENDPOINT_URL_LAMBDA and AWS_ENDPOINT_URL_SSM.
//
// An Event invocation is answered 202 as Lambda does, then delivered to the
// target emulator in the background, one at a time, with Lambda's async
// retry policy (the function is tried up to 1+Retries times).
type AWS struct {
	URL string

	// Retries is how often a failed async invocation is retried (Lambda's
	// default and the worker's maximum_retry_attempts: 2).
	Retries int

	params    map[string]string
	functions map[string]*Emulator

	queue   chan asyncInvoke
	pending sync.WaitGroup

	mu       sync.Mutex
	calls    map[string]int // "lambda:Invoke(Event)", "ssm:GetParameter", …
	failures []error        // async invocations that failed for good
}

type asyncInvoke struct {
	fn      *Emulator
	payload []byte
}

// NewAWS starts the shim: params are the SSM parameters (name or ARN →
// value). Functions are added with Register.
func NewAWS(tb testing.TB, params map[string]string) *AWS {
	tb.Helper()
	a := &AWS{Retries: 2, params: params, functions: map[string]*Emulator{}, queue: make(chan asyncInvoke, 1000), calls: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(a.serve))
	a.URL = srv.URL
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go a.deliver(ctx, stopped)
	tb.Cleanup(func() {
		cancel()
		<-stopped
		srv.Close()
	})
	return a
}

// Register makes e reachable as the Lambda function name.
func (a *AWS) Register(name string, e *Emulator) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.functions[name] = e
}

// Calls returns how often each API operation was called.
func (a *AWS) Calls() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.calls))
	for k, v := range a.calls {
		out[k] = v
	}
	return out
}

// Wait blocks until every accepted async invocation was delivered (or ctx
// ends) and returns the failures so far (an invocation that still failed
// after the retries).
func (a *AWS) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { a.pending.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("async invocations still pending: %w", ctx.Err())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return errors.Join(a.failures...)
}

func (a *AWS) count(op string) {
	a.mu.Lock()
	a.calls[op]++
	a.mu.Unlock()
}

func (a *AWS) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		a.ssm(w, target, body)
		return
	}
	// Lambda Invoke (REST JSON): POST /2015-03-31/functions/{FunctionName}/invocations
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/2015-03-31/functions/")
	name, ok2 := strings.CutSuffix(rest, "/invocations")
	if r.Method != http.MethodPost || !ok || !ok2 {
		awsError(w, http.StatusNotFound, "UnknownOperationException", "unknown operation "+r.Method+" "+r.URL.Path)
		return
	}
	name, _ = url.PathUnescape(name)
	if i := strings.LastIndex(name, ":function:"); i >= 0 { // an ARN
		name = strings.SplitN(name[i+len(":function:"):], ":", 2)[0]
	}
	a.mu.Lock()
	fn, found := a.functions[name]
	a.mu.Unlock()
	if !found {
		a.count("lambda:Invoke(unknown function)")
		awsError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+name)
		return
	}
	switch typ := r.Header.Get("X-Amz-Invocation-Type"); typ {
	case "Event":
		a.count("lambda:Invoke(Event)")
		a.pending.Add(1)
		a.queue <- asyncInvoke{fn: fn, payload: body}
		w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("shim-%d", time.Now().UnixNano()))
		w.WriteHeader(http.StatusAccepted)
	case "", "RequestResponse":
		a.count("lambda:Invoke(RequestResponse)")
		out, err := fn.Invoke(r.Context(), body)
		var fe *FunctionError
		if errors.As(err, &fe) {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, fe.Body)
			return
		}
		if err != nil {
			awsError(w, http.StatusBadGateway, "ServiceException", err.Error())
			return
		}
		_, _ = w.Write(out)
	default:
		awsError(w, http.StatusBadRequest, "InvalidParameterValueException", "invocation type "+typ+" is not emulated")
	}
}

// deliver runs the async invocations one after another, as the queue of
// one function with reserved concurrency 1 would.
func (a *AWS) deliver(ctx context.Context, stopped chan<- struct{}) {
	defer close(stopped)
	for {
		select {
		case <-ctx.Done():
			return
		case inv := <-a.queue:
			var err error
			for attempt := 0; attempt <= a.Retries; attempt++ {
				if _, err = inv.fn.Invoke(ctx, inv.payload); err == nil {
					break
				}
				a.count("async retry")
			}
			if err != nil {
				a.mu.Lock()
				a.failures = append(a.failures, fmt.Errorf("async invoke of %s failed after %d retries: %w", inv.fn.Name, a.Retries, err))
				a.mu.Unlock()
			}
			a.pending.Done()
		}
	}
}

// ssm serves the JSON 1.1 protocol's GetParameter.
func (a *AWS) ssm(w http.ResponseWriter, target string, body []byte) {
	if target != "AmazonSSM.GetParameter" {
		a.count("ssm:" + target)
		awsError(w, http.StatusBadRequest, "UnknownOperationException", target+" is not emulated")
		return
	}
	a.count("ssm:GetParameter")
	var in struct {
		Name           string
		WithDecryption bool
	}
	if err := json.Unmarshal(body, &in); err != nil {
		awsError(w, http.StatusBadRequest, "ValidationException", err.Error())
		return
	}
	v, ok := a.params[in.Name]
	if !ok {
		awsError(w, http.StatusBadRequest, "ParameterNotFound", "parameter "+in.Name+" not found")
		return
	}
	if !in.WithDecryption {
		v = "(encrypted)"
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(map[string]any{"Parameter": map[string]any{
		"ARN": in.Name, "Name": in.Name, "Type": "SecureString", "Value": v, "Version": 1, "DataType": "text",
	}})
}

func awsError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Errortype", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}
