package app

import (
	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/model/store/milestones"
	"github.com/commitcollect/backend/model/store/periodlog"
	"github.com/commitcollect/backend/model/store/sessions"
)

// BFFStores hands the DynamoDB adapter to each of the BFF's ports (the
// composite literal is the check that it satisfies every one).
func BFFStores(st *store.Store) bff.Stores {
	ss, pl := sessions.New(st.DB), periodlog.New(st.DB)
	return bff.Stores{Sessions: ss, Logins: NewRevocations(st), Profiles: st, Milestones: st, Periods: milestones.NewPeriods(st.DB), Collection: st,
		Deletions: deletionStore{st, ss}, Syncs: limits.New(st), Exports: st, PeriodLog: pl, Zones: pl}
}

// deletionStore is what an account deletion removes: the user's data
// (store) and sign-ins (sessions).
type deletionStore struct {
	*store.Store
	*signIns
}

// signIns names the sessions' store where it is embedded beside the store.
type signIns = sessions.Store

// Ingestion is the DynamoDB adapter as ingestion's ports see it: the
// store's rooms and the Strava budget's state (model/store/limits).
type Ingestion struct {
	*store.Store
	*budget
}

// budget names the budget's store where it is embedded beside the store.
type budget = limits.Store

// IngestionOf pairs st with the Strava budget's state over it.
func IngestionOf(st *store.Store) Ingestion { return Ingestion{Store: st, budget: limits.New(st)} }

// SyncerStores hands a sync job each DynamoDB adapter it uses.
func SyncerStores(st *store.Store) syncjobs.SyncerStores {
	lim := limits.New(st)
	return syncjobs.SyncerStores{States: lim, Outbox: st.Outbox, Workouts: st.Workouts, Guard: st.Guard, Connections: st.Connections,
		Pacing: lim, Audits: st.Audits}
}

// SchedulerStores hands the sync scheduler each DynamoDB adapter it uses.
func SchedulerStores(st *store.Store) syncjobs.SchedulerStores {
	lim := limits.New(st)
	return syncjobs.SchedulerStores{States: lim, Connections: st.Connections, Milestones: st.Milestones, Log: st.Workouts,
		Outbox: st.Outbox, Users: st.Users, Cursor: lim}
}
