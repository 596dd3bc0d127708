package milestones

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/commitcollect/backend/handlers/bff/respond"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/projections"
)

// Create serves POST /v1/milestones: the definition is validated as a
// whole (every bad field named, nothing created), partCount is copied from
// MODEL#{modelId}/META (an unknown model is a bad modelId), and the item
// is written with version 0, status active and writtenBy api; the projector
// picks it up from the stream. A user has at most
// model.MaxMilestonesPerUser milestones not deleted, counted in the
// creating transaction: past it the answer is 409 milestone_limit, so a
// recompute's read of the milestone range (25 × (1 + 99 awards) = 2,500
// items, under its 3,000-item guardrail) always sees every milestone and
// award.
func (h *Handler) Create(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	ctx := r.Context()
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		respond.Error(w, http.StatusUnsupportedMediaType, respond.CodeUnsupportedMediaType, "send the milestone as application/json")
		return
	}
	var req CreateRequest
	if err := respond.Decode(r, w, &req); err != nil {
		if errors.Is(err, respond.ErrBodyTooLarge) {
			respond.Error(w, http.StatusRequestEntityTooLarge, respond.CodePayloadTooLarge, err.Error())
			return
		}
		var ve *model.ValidationError
		errors.As(err, &ve)
		respond.Validation(w, ve)
		return
	}
	def, ve := req.definition()
	modelKnown, err := h.copyPartCount(r, &def, req.ModelID)
	if err != nil {
		respond.Fail(ctx, w, log, "read model", err)
		return
	}
	if err := def.Validate(); err != nil {
		var dv *model.ValidationError
		if !errors.As(err, &dv) {
			respond.Fail(ctx, w, log, "validate milestone", err)
			return
		}
		for _, f := range dv.Fields {
			switch {
			case f.Field == "partCount" && !modelKnown: // reported as modelId below
			case ve.has(f.Field) && parsedFields[f.Field]: // the parse error already names it
			default:
				ve.Fields = append(ve.Fields, f)
			}
		}
	}
	if !modelKnown && strings.TrimSpace(req.ModelID) != "" && !strings.Contains(req.ModelID, "#") {
		ve.Add("modelId", "unknown model %q (see GET /v1/models)", req.ModelID)
	}
	if ve.Err() != nil {
		respond.Validation(w, &ve.ValidationError)
		return
	}
	h.create(w, r, s, log, def)
}

// parsedFields are the fields whose parse error already names what
// Validate would say again.
var parsedFields = map[string]bool{"target": true, "periodStartAtUtc": true, "periodEndAtUtc": true,
	"periodStartDate": true, "periodEndDate": true}

// copyPartCount copies the model's part count into def; false when the
// model is unknown (or the id is no model id).
func (h *Handler) copyPartCount(r *http.Request, def *model.MilestoneDefinition, modelID string) (bool, error) {
	id := strings.TrimSpace(modelID)
	if id == "" || strings.Contains(id, "#") {
		return false, nil
	}
	meta, err := h.st.ModelMeta(r.Context(), id)
	switch {
	case err == nil:
		def.PartCount = meta.PartCount
		return true, nil
	case errors.Is(err, model.ErrNotFound):
		return false, nil
	}
	return false, err
}

// create writes a valid definition and answers 201 with it.
func (h *Handler) create(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, def model.MilestoneDefinition) {
	ctx := r.Context()
	at, err := AtFor(ctx, h.zones, s.UserID, h.now().UTC())
	if err != nil {
		respond.Fail(ctx, w, log, "create milestone", err)
		return
	}
	now := at.Now
	m := &model.Milestone{
		UserID: s.UserID, MilestoneID: model.NewID(), MilestoneDefinition: def,
		Projection: model.Projection{Status: model.StatusActive}, Version: 0, CreatedAtUtc: now, WrittenBy: model.WriterAPI,
	}
	if err := h.st.CreateMilestone(ctx, m); err != nil {
		if errors.Is(err, model.ErrMilestoneLimit) {
			respond.Error(w, http.StatusConflict, respond.CodeMilestoneLimit, fmt.Sprintf(
				"you have %d milestones, the most one account can hold (deleting one makes room); no milestone was created",
				model.MaxMilestonesPerUser))
			return
		}
		respond.Fail(ctx, w, log, "create milestone", err)
		return
	}
	log.InfoContext(ctx, "milestone created", "milestoneId", m.MilestoneID, "modelId", m.ModelID)
	if h.backfill != nil {
		h.backfill(ctx, log, s.UserID, "milestone created")
	}
	w.Header().Set("Location", "/v1/milestones/"+m.MilestoneID)
	if m.Recurrence != "" {
		page, _ := pageOf(*m, Window{Limit: ShownPeriods}, at)
		respond.JSON(w, http.StatusCreated, seriesJSON(modelWithoutAwards(*m), nil, at, page))
		return
	}
	respond.JSON(w, http.StatusCreated, JSON(modelWithoutAwards(*m), at))
}

// List serves GET /v1/milestones: {milestones:[…]}, one Query of the
// user's partition.
func (h *Handler) List(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	ms, truncated, err := h.st.MilestonesWithAwards(r.Context(), s.UserID, "")
	if err != nil {
		respond.Fail(r.Context(), w, log, "list milestones", err)
		return
	}
	if truncated {
		log.WarnContext(r.Context(), "milestone list truncated by the guardrail", "limit", strconv.Itoa(model.MaxWorkoutsToInspect))
	}
	at, err := AtFor(r.Context(), h.zones, s.UserID, h.now())
	if err != nil {
		respond.Fail(r.Context(), w, log, "list milestones", err)
		return
	}
	out := struct {
		Milestones []MilestoneJSON `json:"milestones"`
	}{Milestones: make([]MilestoneJSON, 0, len(ms))}
	for _, m := range ms {
		j, err := Show(r.Context(), h.periods, s.UserID, m, at)
		if err != nil {
			respond.Fail(r.Context(), w, log, "list milestones", err)
			return
		}
		out.Milestones = append(out.Milestones, j)
	}
	respond.JSON(w, http.StatusOK, out)
}

// Get serves GET /v1/milestones/{milestoneId}: one milestone with its
// awards; another user's id, a deleted one or any unknown id is 404, so
// ids leak nothing.
func (h *Handler) Get(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	id := r.PathValue("milestoneId")
	if !respond.OpaqueID.MatchString(id) {
		notFound(w, id)
		return
	}
	ms, _, err := h.st.MilestonesWithAwards(r.Context(), s.UserID, id)
	if err != nil {
		respond.Fail(r.Context(), w, log.With("milestoneId", id), "read milestone", err)
		return
	}
	if len(ms) != 1 {
		notFound(w, id)
		return
	}
	at, err := AtFor(r.Context(), h.zones, s.UserID, h.now())
	if err != nil {
		respond.Fail(r.Context(), w, log.With("milestoneId", id), "read milestone", err)
		return
	}
	j, err := Show(r.Context(), h.periods, s.UserID, ms[0], at)
	if err != nil {
		respond.Fail(r.Context(), w, log.With("milestoneId", id), "read milestone", err)
		return
	}
	respond.JSON(w, http.StatusOK, j)
}

// Show is a milestone as the API shows it at at; a series reads the
// periods of its first page (periods.go). The export and the landing page
// show milestones with it too.
func Show(ctx context.Context, pr PeriodReader, userID string, m ports.MilestoneWithAwards, at At) (MilestoneJSON, error) {
	if m.Milestone.Recurrence == "" {
		return JSON(m, at), nil
	}
	j, _, err := showPage(ctx, pr, userID, m, at, Window{Limit: ShownPeriods})
	return j, err
}

// showPage is series m as the API shows it at at, with the periods of w;
// not ok when w.From begins none of its periods.
func showPage(ctx context.Context, pr PeriodReader, userID string, m ports.MilestoneWithAwards, at At, w Window) (MilestoneJSON, bool, error) {
	page, ok := pageOf(m.Milestone, w, at)
	if !ok {
		return MilestoneJSON{}, false, nil
	}
	periods, err := readPage(ctx, pr, userID, m.Milestone.MilestoneID, page)
	if err != nil {
		return MilestoneJSON{}, true, fmt.Errorf("periods of series %s: %w", m.Milestone.MilestoneID, err)
	}
	if kept := projections.Kept(&m.Milestone); kept != nil { // the series' item keeps its newest period
		p := periods[kept.PeriodOf]
		p.Period = kept
		periods[kept.PeriodOf] = p
	}
	return seriesJSON(m, periods, at, page), true, nil
}

// Delete serves DELETE /v1/milestones/{milestoneId}: 204, and the
// milestone leaves every read; its awards stay in the collection (GET
// /v1/awards), and it no longer counts towards the limit. An unknown id
// (or another user's) is 404.
func (h *Handler) Delete(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	id := r.PathValue("milestoneId")
	if !respond.OpaqueID.MatchString(id) {
		notFound(w, id)
		return
	}
	switch err := h.deleter.DeleteMilestone(r.Context(), s.UserID, id); {
	case errors.Is(err, model.ErrNotFound):
		notFound(w, id)
	case err != nil:
		respond.Fail(r.Context(), w, log.With("milestoneId", id), "delete milestone", err)
	default:
		log.InfoContext(r.Context(), "milestone deleted", "milestoneId", id)
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
	}
}

func notFound(w http.ResponseWriter, id string) {
	respond.Error(w, http.StatusNotFound, respond.CodeNotFound, fmt.Sprintf("milestone %q not found", id))
}

func modelWithoutAwards(m model.Milestone) ports.MilestoneWithAwards {
	return ports.MilestoneWithAwards{Milestone: m}
}
