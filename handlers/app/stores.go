package app

import (
	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/model/store"
)

// BFFStores hands the DynamoDB adapter to each of the BFF's ports (the
// composite literal is the check that it satisfies every one).
func BFFStores(st *store.Store) bff.Stores {
	return bff.Stores{Sessions: st, Logins: NewRevocations(st), Profiles: st, Milestones: st, Collection: st, Deletions: st, Syncs: st, Exports: st}
}
