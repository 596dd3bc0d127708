package chaos

import (
	"context"
	"io"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/scripts/rebuildkit"
	"github.com/commitcollect/backend/scripts/rebuildkit/wire"
)

// newVerifier is `make verify` for one user: the projector's own recompute
// from the stored workout log, without writing, adapted by the operator
// commands' wiring; it returns every drifting milestone value.
func newVerifier(st *store.Adapters) func(ctx context.Context, userID string) ([]rebuildkit.Drift, error) {
	recompute := wire.Recompute(app.ProjectorOf(st, io.Discard, nil))
	return func(ctx context.Context, userID string) ([]rebuildkit.Drift, error) {
		out, err := recompute(ctx, userID, true)
		return out.Drift, err
	}
}
