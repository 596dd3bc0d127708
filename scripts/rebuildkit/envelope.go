package rebuildkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/commitcollect/backend/model"
)

// Kinds of dead-letter message ParseEnvelope recognizes.
const (
	// KindAsyncFailure is the record Lambda sends to an asynchronous
	// invocation's on-failure destination (the worker's DLQ): the original
	// request payload, a worker Job, travels in requestPayload.
	KindAsyncFailure = "async-invoke-failure"
	// KindStreamFailure is the record a stream event source mapping sends to
	// its on-failure destination (the projector's DLQ): not the records, only
	// where they are (shard and sequence-number range).
	KindStreamFailure = "stream-batch-failure"
)

// StreamBatch locates a batch of stream records a projector invocation gave
// up on (DDBStreamBatchInfo).
type StreamBatch struct {
	ShardID                         string    `json:"shardId"`
	StartSequenceNumber             string    `json:"startSequenceNumber"`
	EndSequenceNumber               string    `json:"endSequenceNumber"`
	ApproximateArrivalOfFirstRecord time.Time `json:"approximateArrivalOfFirstRecord"`
	ApproximateArrivalOfLastRecord  time.Time `json:"approximateArrivalOfLastRecord"`
	BatchSize                       int       `json:"batchSize"`
	StreamARN                       string    `json:"streamArn"`
}

// Envelope is one dead-letter message: why Lambda gave up, and what on.
type Envelope struct {
	Kind      string
	Version   string
	Timestamp time.Time
	// RequestID, FunctionARN, Condition (RetriesExhausted, EventAgeExceeded,
	// RetryAttemptsExhausted, RecordAgeExceeded, …) and how many times
	// Lambda tried.
	RequestID              string
	FunctionARN            string
	Condition              string
	ApproximateInvokeCount int
	// FunctionError (Handled, Unhandled) and ErrorMessage come from the last
	// attempt, when Lambda recorded them.
	FunctionError string
	ErrorMessage  string
	// Payload is the worker Job (KindAsyncFailure).
	Payload json.RawMessage
	// Batch is the stream range (KindStreamFailure).
	Batch *StreamBatch
}

// FunctionName is the function's name without ARN prefix or qualifier.
func (e Envelope) FunctionName() string {
	// arn:aws:lambda:REGION:ACCOUNT:function:NAME[:QUALIFIER]
	parts := strings.Split(e.FunctionARN, ":")
	if len(parts) >= 7 && parts[5] == "function" {
		return parts[6]
	}
	return e.FunctionARN
}

type wireEnvelope struct {
	Version        string    `json:"version"`
	Timestamp      time.Time `json:"timestamp"`
	RequestContext *struct {
		RequestID              string `json:"requestId"`
		FunctionARN            string `json:"functionArn"`
		Condition              string `json:"condition"`
		ApproximateInvokeCount int    `json:"approximateInvokeCount"`
	} `json:"requestContext"`
	ResponseContext *struct {
		StatusCode    int    `json:"statusCode"`
		FunctionError string `json:"functionError"`
	} `json:"responseContext"`
	RequestPayload  json.RawMessage `json:"requestPayload"`
	ResponsePayload json.RawMessage `json:"responsePayload"`
	Batch           *StreamBatch    `json:"DDBStreamBatchInfo"`
}

// ParseEnvelope decodes an SQS message body written by a Lambda on-failure
// destination. It returns an error matching model.ErrInvalid for anything
// else (including a bare payload, as an old-style DLQ would hold), so the
// caller leaves the message in the queue for a human.
func ParseEnvelope(body []byte) (Envelope, error) {
	var w wireEnvelope
	if err := json.Unmarshal(body, &w); err != nil {
		return Envelope{}, fmt.Errorf("parse dead-letter message: %v: %w", err, model.ErrInvalid)
	}
	if w.RequestContext == nil {
		return Envelope{}, fmt.Errorf("parse dead-letter message: no requestContext, not a Lambda failure record: %w", model.ErrInvalid)
	}
	e := Envelope{
		Version: w.Version, Timestamp: w.Timestamp,
		RequestID: w.RequestContext.RequestID, FunctionARN: w.RequestContext.FunctionARN,
		Condition: w.RequestContext.Condition, ApproximateInvokeCount: w.RequestContext.ApproximateInvokeCount,
	}
	if w.ResponseContext != nil {
		e.FunctionError = w.ResponseContext.FunctionError
	}
	if len(w.ResponsePayload) > 0 {
		var rp struct {
			ErrorMessage string `json:"errorMessage"`
		}
		if json.Unmarshal(w.ResponsePayload, &rp) == nil {
			e.ErrorMessage = rp.ErrorMessage
		}
	}
	payload := bytes.TrimSpace(w.RequestPayload)
	switch {
	case w.Batch != nil:
		b := *w.Batch
		if b.ShardID == "" || b.StreamARN == "" || !isSequenceNumber(b.StartSequenceNumber) || !isSequenceNumber(b.EndSequenceNumber) ||
			seqLess(b.EndSequenceNumber, b.StartSequenceNumber) {
			return Envelope{}, fmt.Errorf("parse dead-letter message %s: incomplete DDBStreamBatchInfo %+v: %w", e.RequestID, b, model.ErrInvalid)
		}
		e.Kind, e.Batch = KindStreamFailure, &b
	case len(payload) > 0 && !bytes.Equal(payload, []byte("null")):
		e.Kind, e.Payload = KindAsyncFailure, json.RawMessage(payload)
	default:
		return Envelope{}, fmt.Errorf("parse dead-letter message %s: neither requestPayload nor DDBStreamBatchInfo: %w", e.RequestID, model.ErrInvalid)
	}
	return e, nil
}

// isSequenceNumber reports whether s is a stream sequence number (decimal
// digits; DynamoDB Local pads them with zeros).
func isSequenceNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// seqLess compares two stream sequence numbers numerically (they are
// decimal strings of varying length).
func seqLess(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
