// # Routes (shapes in openapi.yaml)
//
//	GET  /auth/strava/login     stores a single-use login state (10 min, sessions table), binds
//	                            it to the browser (cc_oauth_state cookie), 302 to Strava's
//	                            authorize page with scope=read,activity:read_all
//	GET  /auth/strava/callback  checks the state against the cookie, then consumes it; refuses
//	                            error=access_denied and grants without activity:read or
//	                            activity:read_all (HTML page, nothing written); exchanges the
//	                            code (x/oauth2), links the athlete, sets cc_session, 302 to /
//	POST /auth/logout           deletes the session, clears the cookie (204)
//	GET  /v1/me                 {userId, athleteId, displayName, connected}
//	DELETE /v1/me               account deletion, 202 {status: deleted|incomplete, completed, stoppedAt?}
//	GET  /v1/models             the catalog (model/catalog)
//	POST /v1/milestones, GET /v1/milestones, GET /v1/milestones/{milestoneId}
//	                            milestones with projected progress and awards
//
// Sessions: cc_session is a 128-bit random id (HttpOnly, SameSite=Lax, Secure
// unless CC_PUBLIC_URL is plain http on a loopback host; plain http elsewhere
// is refused at start-up) backed by CommitCollectSessions
// (SESSION#{sha256(id)}/META, TTL expiresAtUtc, 14 days). TTL deletion is
// lazy, so expiry is checked on every read. Each session also has a pointer
// USER#{userId}/SESSION#{sha256(id)} in the main table (same expiry, TTL
// expiresAt) so a user's sessions can be found without a Scan. Every error is
// {"error":{"code","message","fields"?}}; invalid UTF-8 text is 400 naming the
// field, bodies over 64 KiB are 413.
//
// First login writes profile, Strava connection (tokens sealed) and
// STRAVA#ATHLETE#{id}/OWNER in one transaction (the owner mapping is
// conditional), so one athlete is never linked to two users; a login that
// loses the race joins the winner. A returning athlete keeps their user; the
// new tokens are stored with a conditional tokenVersion bump and the login's
// time as the grant (grantedAtUtc, what a deauthorization event is compared
// with). A confirmed deauthorization keeps the owner mapping, so an athlete
// reconnecting within the 30-day retention window gets the same user back:
// the login clears the guard's revocation (conditional on the one it read),
// removes expiresAt from every Strava workout (STRAVA_RECONNECTED), then
// saves the tokens; milestones and awards were never touched. While the
// connection is missing every login removes the expiry again, so a login
// that failed midway (503) is finished by the athlete's retry.
//
// Milestones: validation is model.MilestoneDefinition.Validate and names
// every bad field (400 fields:[{field,message}]); an unknown model is a bad
// modelId. partCount is copied from MODEL#{modelId}/META; the item is written
// with version 0, status active, writtenBy api and the projector picks it up
// from the stream. Reads are one Query of the user's partition (begins_with
// MILESTONE#…); value/target are in metres (distance, elevation), seconds
// (moving_time) or workouts (count); percent is rounded down to 0.1 and
// capped at 100; truncated and exactFromUtc come from the projector's
// guardrail. Another user's milestone id is 404. A user has at most
// model.MaxMilestonesPerUser (25) milestones, counted by USER#{id} /
// COUNT#MILESTONES in the creating transaction: past it POST answers 409
// milestone_limit, so a recompute's read of the MILESTONE# range (25 × (1 +
// 99 awards) = 2500 items, under its 3000-item guardrail) always sees every
// milestone and award.
//
// Account deletion runs these steps, each idempotent, and can be re-run with
// the same cookie after a stop at any of them: deauthorize (Strava,
// refreshing an expired token first; already revoked counts as done; if
// Strava is unreachable nothing is deleted) → guard (GUARD#USER#{id} marked
// deleted, kept 90 days: from now on every writer in flight, the worker's
// workout writes, the sync state and milestone creation, checks it
// after its write and removes what it wrote, so nothing written for the user
// outlives the deletion) → connection (connection, then the owner mapping
// only if it still points at this user) → user_data (workouts, milestones,
// awards, everything else in USER#{id}, batches of 25) → parked (the user's
// PARKED#WORKER / PARKED#PROJECTOR records, found by userId, or by athleteId
// when they name no user: a filtered Query of those small partitions) →
// audit (ACCOUNT_DELETED; the audit trail keeps its 90-day TTL) → profile
// (plus a final sweep of the partition) → sessions (the caller's own last,
// pointer first).
//
// CORS is off unless CC_CORS_ORIGINS lists the origin (credentials allowed;
// preflight on OPTIONS /v1/*).
package bff
