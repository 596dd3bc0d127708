package ingest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/commitcollect/backend/test/ingesttest"
)

// BenchmarkWebhookAnswer times the webhook's answer to a new event of our
// subscription (one conditional write in the outbox, and the hand-off) and
// of another one (one conditional write, dropped): a guess of the id should
// take about as long as the right one. Here the hand-off is in-process; in
// AWS it is an asynchronous Lambda invoke, which only ours makes.
func BenchmarkWebhookAnswer(b *testing.B) {
	h := ingesttest.New(b)
	for _, sub := range []struct {
		name string
		id   int64
	}{{"ours", ingesttest.SubscriptionID}, {"another", ingesttest.SubscriptionID + 1000}} {
		b.Run(sub.name, func(b *testing.B) {
			base := time.Now().UnixNano()
			for i := 0; b.Loop(); i++ {
				ev := fmt.Appendf(nil, `{"object_type":"activity","object_id":%d,"aspect_type":"update","owner_id":6,"subscription_id":%d,"event_time":7}`,
					base+int64(i), sub.id)
				if resp, body := h.Post(ev); resp.StatusCode != http.StatusOK || body["status"] != "accepted" {
					b.Fatalf("%s: %d %v", sub.name, resp.StatusCode, body)
				}
			}
		})
	}
}
