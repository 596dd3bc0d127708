package model

import "time"

// Physical bounds of one workout. A Strava activity outside them cannot be a
// human-powered (or even a recorded) activity: it is refused at
// normalization as invalid data (ErrInvalid, audited with the reason, the
// job finished as rejected), never written, retried or parked. They are
// generous on purpose, about twice the most extreme real single activities:
//
//   - distance ≤ 10,000 km: the longest single recorded efforts (the Race
//     Across America, ~4,800 km; multi-week bikepacking races uploaded as one
//     activity) stay well below; a circumnavigation (40,000 km) does not.
//   - moving and elapsed time ≤ 31 days: a recording longer than a month is
//     not one activity.
//   - elevation gain ≤ 1,000 km: 31 days climbing at the vertical-kilometre
//     record pace (~1,000 m/h) is ~750 km.
//
// They also keep the projection's integer sums safe: 3,000 workouts
// (MaxWorkoutsToInspect) at the distance bound is 3e13 mm, far inside int64,
// and every value fits a DynamoDB number (which refuses beyond 1e125).
const (
	MaxWorkoutDistanceMeters  = 1e7
	MaxWorkoutElevationMeters = 1e6
	MaxWorkoutDuration        = 31 * 24 * time.Hour
)
