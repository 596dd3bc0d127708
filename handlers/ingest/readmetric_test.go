package ingest_test

import (
	"testing"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/syncstate"
)

func TestReadClass(t *testing.T) {
	for _, tc := range []struct {
		job  ingest.Job
		want string
	}{
		{ingest.Job{Event: ingest.Event{ObjectType: "activity", AspectType: "create"}}, ingest.ReadClassWebhook},
		{ingest.Job{Event: ingest.Event{ObjectType: "activity", AspectType: "update"}}, ingest.ReadClassWebhook},
		{ingest.Job{Event: ingest.Event{ObjectType: "activity", AspectType: "delete"}}, ingest.ReadClassConfirm},
		{ingest.Job{Event: ingest.Event{ObjectType: "athlete", AspectType: "update"}}, ingest.ReadClassConfirm},
		{ingest.Job{Sync: &ingest.SyncJob{Mode: syncstate.SyncModeBackfill}}, ingest.ReadClassBackfill},
		{ingest.Job{Sync: &ingest.SyncJob{Mode: syncstate.SyncModeReconcile}}, ingest.ReadClassReconcile},
	} {
		if got := ingest.ReadClass(tc.job); got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.job.Event, got, tc.want)
		}
	}
}
