package rebuildkit

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
)

func TestParseEnvelope(t *testing.T) {
	t.Parallel()
	type want struct {
		kind, requestID, function, condition string
		invokes                              int
		errorMessage                         string
		correlationID                        string // of the Job in the payload
		batch                                *StreamBatch
	}
	tests := []struct {
		name    string
		given   string // file under testdata/sqs
		want    want
		wantErr error
	}{
		{
			name: "worker retries exhausted", given: "worker-retries-exhausted.json",
			want: want{kind: KindAsyncFailure, requestID: "e4b46cbf-b738-4a2c-8880-a18cdf61200e", function: "commitcollect-strava-worker",
				condition: "RetriesExhausted", invokes: 3, errorMessage: "fetch activity 13601284289: strava status 503: retryable",
				correlationID: "0f8c2a9e5b7d4e31a6c0d9b8e7f61234"},
		},
		{
			name: "worker event too old", given: "worker-event-age-exceeded.json",
			want: want{kind: KindAsyncFailure, requestID: "9a1d3c55-0b7e-4f7a-9d2b-5c6e7f8a9b0c", function: "commitcollect-strava-worker",
				condition: "EventAgeExceeded", invokes: 2, errorMessage: "Task timed out after 30.03 seconds",
				correlationID: "c0ffee00c0ffee00c0ffee00c0ffee00"},
		},
		{
			name: "projector batch", given: "projector-stream-batch.json",
			want: want{kind: KindStreamFailure, requestID: "316aa6d0-8154-4b5d-9af7-85d5f4a6bc81", function: "commitcollect-projector",
				condition: "RetryAttemptsExhausted", invokes: 10, batch: &StreamBatch{
					ShardID: "shardId-00000001773468000000-864758bb", StartSequenceNumber: "800000000003126276362",
					EndSequenceNumber: "800000000003126276371", BatchSize: 7,
					ApproximateArrivalOfFirstRecord: time.Date(2026, 3, 14, 6, 13, 19, 0, time.UTC),
					ApproximateArrivalOfLastRecord:  time.Date(2026, 3, 14, 6, 13, 21, 0, time.UTC),
					StreamARN:                       "arn:aws:dynamodb:ap-southeast-2:123456789012:table/CommitCollect/stream/2026-03-01T00:04:06.388",
				}},
		},
		{
			name: "projector records too old", given: "projector-record-age-exceeded.json",
			want: want{kind: KindStreamFailure, requestID: "aa11bb22-cc33-4d44-8e55-ff6677889900", function: "commitcollect-projector",
				condition: "RecordAgeExceeded", invokes: 4, batch: &StreamBatch{
					ShardID: "shardId-00000001773468000000-864758bb", StartSequenceNumber: "900000000000000000001",
					EndSequenceNumber: "900000000000000000001", BatchSize: 1,
					ApproximateArrivalOfFirstRecord: time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC),
					ApproximateArrivalOfLastRecord:  time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC),
					StreamARN:                       "arn:aws:dynamodb:ap-southeast-2:123456789012:table/prod-CommitCollect/stream/2026-03-01T00:04:06.388",
				}},
		},
		{name: "a bare job is not an envelope", given: "raw-job-not-an-envelope.json", wantErr: model.ErrInvalid},
		{name: "an envelope without payload", given: "envelope-without-payload.json", wantErr: model.ErrInvalid},
		{name: "not json", given: "garbage.txt", wantErr: model.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile(filepath.Join("testdata", "sqs", tt.given))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseEnvelope(body)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got %+v, %v; want error %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := tt.want
			if got.Kind != w.kind || got.RequestID != w.requestID || got.FunctionName() != w.function ||
				got.Condition != w.condition || got.ApproximateInvokeCount != w.invokes || got.ErrorMessage != w.errorMessage {
				t.Fatalf("got %s %s %s %s %d %q, want %s %s %s %s %d %q", got.Kind, got.RequestID, got.FunctionName(), got.Condition,
					got.ApproximateInvokeCount, got.ErrorMessage, w.kind, w.requestID, w.function, w.condition, w.invokes, w.errorMessage)
			}
			if w.batch != nil {
				if got.Batch == nil || *got.Batch != *w.batch {
					t.Fatalf("batch: got %+v, want %+v", got.Batch, w.batch)
				}
				return
			}
			var job struct {
				CorrelationID string `json:"correlationId"`
				Event         struct {
					ObjectID int64 `json:"object_id"`
				} `json:"event"`
			}
			if err := json.Unmarshal(got.Payload, &job); err != nil || job.CorrelationID != w.correlationID || job.Event.ObjectID == 0 {
				t.Fatalf("payload: got %s (%v), want the worker job of correlation %s", got.Payload, err, w.correlationID)
			}
		})
	}
}

func TestSequenceNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		a, b  string
		less  bool
		valid bool
	}{
		{"shorter is smaller", "99", "100", true, true},
		{"same length compares digits", "800000000003126276362", "800000000003126276371", true, true},
		{"equal is not less", "42", "42", false, true},
		{"larger", "900000000000000000001", "800000000000000000001", false, true},
		{"zero padded (DynamoDB Local)", "000000000000000000055", "149", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := seqLess(tt.a, tt.b); got != tt.less {
				t.Fatalf("seqLess(%s, %s): got %v, want %v", tt.a, tt.b, got, tt.less)
			}
			if got := isSequenceNumber(tt.a) && isSequenceNumber(tt.b); got != tt.valid {
				t.Fatalf("valid: got %v, want %v", got, tt.valid)
			}
		})
	}
	for _, bad := range []string{"", "12a", "-1", " 1"} {
		if isSequenceNumber(bad) {
			t.Errorf("isSequenceNumber(%q): got true, want false", bad)
		}
	}
}
