package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store"
)

// SeedHistory stores n workouts of userID (activity ids from first on, with
// names as long as Strava's usual ones), eight batch writers at once.
func SeedHistory(ctx context.Context, st *store.Adapters, userID string, athleteID, first int64, n int) error {
	start := time.Date(2020, 1, 1, 6, 0, 0, 0, time.UTC)
	const writers, batch = 8, 25
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := w * batch; lo < n; lo += writers * batch {
				var items []model.Entity
				for i := lo; i < min(lo+batch, n); i++ {
					id := first + int64(i)
					items = append(items, &model.Workout{UserID: userID, AthleteID: athleteID, ActivityID: id,
						Name: fmt.Sprintf("Morning Run along the river %d", i), SportType: "Run", DistanceMeters: 10012.5,
						TotalElevationGain: 87.3, MovingTimeSeconds: 3120, StartDateUtc: start.Add(time.Duration(i) * 2 * time.Hour),
						CreatedAtUtc: start, UpdatedAtUtc: start})
				}
				if err := st.DB.BatchPut(ctx, st.DB.Tables().Main, items); err != nil {
					errs <- fmt.Errorf("seed workouts from %d: %w", first+int64(lo), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
