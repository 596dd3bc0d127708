package scale_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/scale"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

// TestScale runs the scale simulation (see the package doc): the reduced
// run when CC_SCALE=reduced (`make test`), the full one when CC_SCALE=full
// (`make scale`); CC_SCALE_ENV ("NAME=value …") overrides product knobs.
// It prints the report and fails only when work was lost (a webhook's or a
// backfill's activity never written, an event never acknowledged) or the
// report's last line is malformed; the targets are printed, never asserted.
func TestScale(t *testing.T) {
	var s scale.Settings
	switch os.Getenv("CC_SCALE") {
	case "reduced":
		s = scale.Reduced
	case "full":
		s = scale.Full
	default:
		t.Skip("the scale simulation runs with CC_SCALE=reduced (make test) or CC_SCALE=full (make scale)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	e, err := scale.Start(ctx, s, dynamolocal.Endpoint(t), dynamolocal.UniquePrefix(), strings.Fields(os.Getenv("CC_SCALE_ENV")), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r, err := e.Run(ctx, uint64(time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r.Print(&out)
	os.Stdout.WriteString(out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; !scale.LastLinePattern.MatchString(last) {
		t.Errorf("last line %q does not match %s", last, scale.LastLinePattern)
	}
	if r.Lost > 0 || r.NotDelivered > 0 {
		t.Errorf("work lost: %d activities never written, %d events never acknowledged", r.Lost, r.NotDelivered)
	}
	if r.Webhooks == 0 || len(r.Windows) == 0 || len(r.HotKeys) == 0 {
		t.Errorf("nothing measured: %d webhooks, %d windows, %d tables with writes", r.Webhooks, len(r.Windows), len(r.HotKeys))
	}
}
