package app

import (
	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/deletion"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs/scheduler"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/model/store/milestones"
	"github.com/commitcollect/backend/model/store/periodlog"
	"github.com/commitcollect/backend/model/store/purge"
	"github.com/commitcollect/backend/model/store/sessions"
)

// BFFStores hands the BFF each DynamoDB adapter it uses, behind its ports.
func BFFStores(st *store.Adapters) bff.Stores {
	ss, pl := sessions.New(st.DB), periodlog.New(st.DB)
	return bff.Stores{Sessions: ss, Profiles: st.Users, Connections: st.Connections, Athletes: st.Users, Guards: st.Guard,
		Revoked: purge.New(st), Audits: st.Audits, Milestones: st.Milestones, Periods: milestones.NewPeriods(st.DB),
		Removals: st.Collection, Collection: st.Collection,
		Deletions: deletion.Stores{Guard: st.Guard, Users: st.Users, Connections: st.Connections, Parked: st.Parked,
			Audits: st.Audits, Sessions: ss},
		Syncs: limits.New(st), Exports: st.Users, PeriodLog: pl, Zones: pl}
}

// SyncerStores hands a sync job each DynamoDB adapter it uses.
func SyncerStores(st *store.Adapters) syncjobs.SyncerStores {
	lim := limits.New(st)
	return syncjobs.SyncerStores{States: lim, Outbox: st.Outbox, Workouts: st.Workouts, Guard: st.Guard, Connections: st.Connections,
		Pacing: lim, Audits: st.Audits}
}

// SchedulerStores hands the sync scheduler each DynamoDB adapter it uses.
func SchedulerStores(st *store.Adapters) scheduler.Stores {
	lim := limits.New(st)
	return scheduler.Stores{States: lim, Connections: st.Connections, Milestones: st.Milestones, Log: st.Workouts,
		Outbox: st.Outbox, Users: st.Users, Cursor: lim}
}
