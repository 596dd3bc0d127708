package model

// Entity types of the sync items (model/syncstate).
const (
	EntitySyncState       EntityType = "SYNC_STATE"
	EntitySyncReads       EntityType = "SYNC_READS"
	EntityReconcileCursor EntityType = "RECONCILE_CURSOR"
)
