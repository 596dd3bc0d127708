package app_test

import (
	"encoding/json"
	"testing"

	"github.com/commitcollect/backend/handlers/app"
)

// TestTheSweepersScheduleInputChoosesItsTask: the reconciliation schedule's
// constant input runs a reconciliation step; the minutely schedule's event,
// and anything else, runs a sweep.
func TestTheSweepersScheduleInputChoosesItsTask(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"reconcile task", `{"task":"reconcile"}`, true},
		{"EventBridge scheduled event", `{"version":"0","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`, false},
		{"another task", `{"task":"sweep"}`, false},
		{"not an object", `"reconcile"`, false},
		{"empty", ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := app.IsReconcileTask(json.RawMessage(tt.in)); got != tt.want {
				t.Fatalf("IsReconcileTask(%s) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
