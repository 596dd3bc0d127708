package streams_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/streams"
)

// BenchmarkWriteToHandler measures end-to-end stream lag on DynamoDB Local:
// from the start of a workout write (PutItem, or BatchWriteItem for 100) to
// the moment a running Reader hands the record to its handler. ns/op is the
// time until the last record of the write arrived; p50-ms and p95-ms are the
// per-record lag percentiles, and ms/record (batch of 100) is ns/op spread
// over the batch. Before each write the benchmark pauses for a
// random part of the poll interval (not timed), so writes land at random
// points of the reader's poll cycle, as real traffic does: with the default
// 200ms interval the lag is about half the interval plus one GetRecords.
func BenchmarkWriteToHandler(b *testing.B) {
	for _, c := range []struct {
		records int
		poll    time.Duration
	}{
		{1, 200 * time.Millisecond}, // the Reader's default poll interval
		{1, 20 * time.Millisecond},
		{100, 200 * time.Millisecond},
	} {
		b.Run(fmt.Sprintf("records=%d/poll=%s", c.records, c.poll), func(b *testing.B) { benchWriteToHandler(b, c.records, c.poll) })
	}
}

type delivery struct {
	sk string
	at time.Time
}

func benchWriteToHandler(b *testing.B, records int, poll time.Duration) {
	e := newEnv(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan delivery, 4*records+16)
	r := streams.NewReader(e.api, e.arn, streams.Options{PollInterval: poll, Logger: slog.New(slog.DiscardHandler)})
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			at := time.Now()
			for _, rec := range ev.Records {
				got <- delivery{rec.Change.Keys["SK"].String(), at}
			}
			return events.DynamoDBEventResponse{}, nil
		})
	}()
	// wait collects the deliveries of ids and returns their arrival times.
	wait := func(ids []int64) []time.Time {
		pending := make(map[string]bool, len(ids))
		for _, id := range ids {
			pending[keys.WorkoutSK(id)] = true
		}
		var ats []time.Time
		timeout := time.After(30 * time.Second)
		for len(pending) > 0 {
			select {
			case d := <-got:
				if !pending[d.sk] {
					b.Fatalf("unexpected record %s", d.sk)
				}
				delete(pending, d.sk)
				ats = append(ats, d.at)
			case err := <-done:
				b.Fatalf("reader stopped with %d records pending: %v", len(pending), err)
			case <-timeout:
				b.Fatalf("%d records not delivered within 30s", len(pending))
			}
		}
		return ats
	}
	write := func(ids []int64) {
		es := make([]model.Entity, len(ids))
		for i, id := range ids {
			es[i] = &model.Workout{UserID: "u1", ActivityID: id, SportType: "Run", DistanceMeters: 5000,
				StartDateUtc: time.Unix(1700000000+id, 0).UTC()}
		}
		var err error
		if len(es) == 1 {
			err = e.s.DB.Put(ctx, e.s.DB.Tables().Main, es[0])
		} else {
			err = e.s.DB.BatchPut(ctx, e.s.DB.Tables().Main, es)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	// Warm up: the reader has found the shard and holds an iterator.
	write([]int64{1})
	wait([]int64{1})

	next := int64(2)
	var lags []time.Duration
	for b.Loop() {
		b.StopTimer()
		ids := make([]int64, records)
		for i := range ids {
			ids[i] = next
			next++
		}
		time.Sleep(rand.N(poll))
		b.StartTimer()

		start := time.Now()
		write(ids)
		for _, at := range wait(ids) {
			lags = append(lags, at.Sub(start))
		}
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("reader: %v", err)
	}
	slices.Sort(lags)
	pct := func(q float64) float64 { return float64(lags[int(q*float64(len(lags)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	if records > 1 {
		b.ReportMetric(float64(b.Elapsed())/float64(time.Millisecond)/float64(len(lags)), "ms/record")
	}
}
