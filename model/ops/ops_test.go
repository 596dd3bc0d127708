package ops_test

import (
	"errors"
	"testing"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
)

func TestIdempotencyRecordNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given ops.IdempotencyRecord
		want  ops.OutboxStatus
	}{
		{"schema 1 (before the outbox) reads as done", ops.IdempotencyRecord{Meta: model.Meta{EntityType: model.EntityIdempotency, SchemaVersion: 1}}, ops.OutboxDone},
		{"legacy without meta reads as done", ops.IdempotencyRecord{}, ops.OutboxDone},
		{"schema 2 received stays received", ops.IdempotencyRecord{Meta: model.Meta{EntityType: model.EntityIdempotency, SchemaVersion: 2}, Status: ops.OutboxReceived}, ops.OutboxReceived},
		{"schema 2 parked stays parked", ops.IdempotencyRecord{Meta: model.Meta{EntityType: model.EntityIdempotency, SchemaVersion: 2}, Status: ops.OutboxParked}, ops.OutboxParked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := tt.given
			if err := r.Normalize(); err != nil {
				t.Fatal(err)
			}
			if r.Status != tt.want || r.SchemaVersion != model.SchemaVersions[model.EntityIdempotency] {
				t.Fatalf("got status %q at schema %d, want %q at %d", r.Status, r.SchemaVersion, tt.want, model.SchemaVersions[model.EntityIdempotency])
			}
		})
	}
	newer := ops.IdempotencyRecord{Meta: model.Meta{EntityType: model.EntityIdempotency, SchemaVersion: 3}}
	if err := newer.Normalize(); !errors.Is(err, model.ErrUnsupportedSchema) {
		t.Fatalf("got %v, want model.ErrUnsupportedSchema", err)
	}
}
