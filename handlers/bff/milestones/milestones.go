// Package milestones serves the athlete's milestones (POST, GET, DELETE
// /v1/milestones…): validation names every bad field (400
// fields:[{field,message}]), partCount is copied from the model, and reads
// show the projected progress with the period it covers and a status that
// says ended once the period is over everywhere. handlers/bff mounts it
// behind the session check.
package milestones

import (
	"context"
	"log/slog"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ports"
)

// Creator creates milestones (and reads the model a milestone needs).
type Creator interface {
	// ModelMeta reads a model; model.ErrNotFound for an unknown one.
	ModelMeta(ctx context.Context, modelID string) (model.ModelMeta, error)
	// CreateMilestone writes a new milestone within the user's limit
	// (model.ErrMilestoneLimit past it).
	CreateMilestone(ctx context.Context, m *model.Milestone) error
}

// Reader reads a user's milestones with their awards (all of them, or the
// one named).
type Reader interface {
	MilestonesWithAwards(ctx context.Context, userID, milestoneID string) ([]ports.MilestoneWithAwards, bool, error)
}

// Deleter deletes a milestone, keeping its awards in the collection
// (model.ErrNotFound when there is none).
type Deleter interface {
	DeleteMilestone(ctx context.Context, userID, milestoneID string) error
}

// Store is the milestones adapter as the milestone routes use it: create,
// read. Deleting goes through the collection (Deps.Deleter).
type Store interface {
	Creator
	Reader
}

// Handler serves the milestone routes. Its methods have the shape of the
// BFF's session-checked routes (handlers/bff.Handler.authed).
type Handler struct {
	st        Store
	deleter   Deleter
	periods   PeriodReader
	zones     Zones
	now       func() time.Time
	publicURL string
	// backfill asks for the history a new milestone may reach into; it
	// never fails the request.
	backfill func(ctx context.Context, log *slog.Logger, userID, reason string)
}

// Deps are what a Handler reads and calls besides its store.
type Deps struct {
	// Deleter deletes a milestone, keeping its awards (the collection
	// adapter).
	Deleter Deleter
	// Periods reads a series' periods, a page at a time.
	Periods PeriodReader
	// Zones say where the athlete is (a streak's today, a pace).
	Zones Zones
	// Now is the clock.
	Now func() time.Time
	// PublicURL prefixes the periods route's next page.
	PublicURL string
	// Backfill asks for the history a new milestone may reach into; it
	// never fails the request.
	Backfill func(ctx context.Context, log *slog.Logger, userID, reason string)
}

// New returns a Handler over st and d.
func New(st Store, d Deps) *Handler {
	return &Handler{st: st, deleter: d.Deleter, periods: d.Periods, zones: d.Zones, now: d.Now, publicURL: d.PublicURL, backfill: d.Backfill}
}
