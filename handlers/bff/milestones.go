package bff

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

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/jsontext"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/sport"
)

// MilestoneStore creates milestones and reads them with their awards.
type MilestoneStore interface {
	ModelMeta(ctx context.Context, modelID string) (model.ModelMeta, error)
	CreateMilestone(ctx context.Context, m *model.Milestone) error
	MilestonesWithAwards(ctx context.Context, userID, milestoneID string) ([]ports.MilestoneWithAwards, bool, error)
}

// maxBody bounds a request body.
const maxBody = 64 << 10

// MilestoneJSON is the API shape of a milestone and its projected progress.
type MilestoneJSON struct {
	MilestoneID string  `json:"milestoneId"`
	ModelID     string  `json:"modelId"`
	Title       string  `json:"title"`
	Metric      string  `json:"metric"`
	Target      float64 `json:"target"`
	// SportTypes are the Strava sport types the milestone counts (empty:
	// every sport); groups were expanded when it was created.
	SportTypes     []string    `json:"sportTypes"`
	Status         string      `json:"status"`
	Version        int64       `json:"version"`
	ProjectedAtUtc *time.Time  `json:"projectedAtUtc"`
	Progress       Progress    `json:"progress"`
	Awards         []AwardJSON `json:"awards"`
}

// Progress is a milestone's projected progress in the metric's unit (metres
// for distance and elevation, seconds for moving_time, workouts for count).
type Progress struct {
	Value           float64 `json:"value"`
	Target          float64 `json:"target"`
	Percent         float64 `json:"percent"`
	WorkoutsCounted int     `json:"workoutsCounted"`
	// Truncated says the period holds more workouts than the guardrail
	// lets the projector read: the value counts only workouts started at
	// or after ExactFromUtc (set only then).
	Truncated    bool       `json:"truncated"`
	ExactFromUtc *time.Time `json:"exactFromUtc,omitempty"`
}

// AwardJSON is one minted part.
type AwardJSON struct {
	PartIndex    int       `json:"partIndex"`
	Name         string    `json:"name"`
	AwardedAtUtc time.Time `json:"awardedAtUtc"`
	ActivityID   int64     `json:"activityId"`
}

func milestoneJSON(mw ports.MilestoneWithAwards) MilestoneJSON {
	m := mw.Milestone
	out := MilestoneJSON{
		MilestoneID: m.MilestoneID, ModelID: m.ModelID, Title: m.Title, Metric: string(m.Metric), Target: m.Target,
		SportTypes: m.SportTypes, Status: string(m.Status), Version: m.Version, ProjectedAtUtc: m.ProjectedAtUtc,
		Progress: Progress{
			Value: m.Metric.ProgressInUnit(m.ProgressValue), Target: m.Target,
			Percent: m.ProgressPercent(m.ProgressValue), WorkoutsCounted: m.WorkoutsCounted, Truncated: m.Truncated,
			ExactFromUtc: m.ExactFromUtc,
		},
		Awards: make([]AwardJSON, 0, len(mw.Awards)),
	}
	for _, a := range mw.Awards {
		out.Awards = append(out.Awards, AwardJSON{PartIndex: a.PartIndex, Name: a.PartName, AwardedAtUtc: a.AwardedAtUtc, ActivityID: a.ActivityID})
	}
	return out
}

// CreateMilestoneRequest is the body of POST /v1/milestones. Times are RFC
// 3339; target is in the metric's unit.
type CreateMilestoneRequest struct {
	ModelID          string   `json:"modelId"`
	Title            string   `json:"title"`
	Metric           string   `json:"metric"`
	Target           *float64 `json:"target"`
	SportTypes       []string `json:"sportTypes"`
	PeriodStartAtUtc string   `json:"periodStartAtUtc"`
	PeriodEndAtUtc   *string  `json:"periodEndAtUtc"`
}

// errBodyTooLarge is decodeJSON's answer to a body over maxBody (413).
var errBodyTooLarge = fmt.Errorf("body is larger than %d bytes", maxBody)

// decodeJSON reads one JSON object into v, strictly (jsontext.Strict: JSON
// v2 semantics, a key given twice, a key in another case, data after the
// value and invalid UTF-8 refused). It returns errBodyTooLarge for a body
// over maxBody, and otherwise a *model.ValidationError naming the problem.
// Callers act only on a nil error, so a refusal creates nothing.
func decodeJSON(r *http.Request, w http.ResponseWriter, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errBodyTooLarge
	}
	if err != nil {
		return &model.ValidationError{Fields: []model.FieldError{{Field: "body", Message: "could not be read"}}}
	}
	if ve := jsontext.Strict(body, v); ve != nil {
		return ve
	}
	return nil
}

func (h *Handler) createMilestone(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	ctx := r.Context()
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "send the milestone as application/json")
		return
	}
	var req CreateMilestoneRequest
	if err := decodeJSON(r, w, &req); err != nil {
		if errors.Is(err, errBodyTooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, CodePayloadTooLarge, err.Error())
			return
		}
		var ve *model.ValidationError
		errors.As(err, &ve)
		writeValidation(w, ve)
		return
	}
	def, ve := req.definition()

	// partCount comes from the model; an unknown model is a bad modelId.
	modelKnown := false
	if id := strings.TrimSpace(req.ModelID); id != "" && !strings.Contains(id, "#") {
		meta, err := h.milestones.ModelMeta(ctx, id)
		switch {
		case err == nil:
			def.PartCount, modelKnown = meta.PartCount, true
		case errors.Is(err, model.ErrNotFound):
		default:
			h.fail(ctx, w, log, "read model", err)
			return
		}
	}
	if err := def.Validate(); err != nil {
		var dv *model.ValidationError
		if !errors.As(err, &dv) {
			h.fail(ctx, w, log, "validate milestone", err)
			return
		}
		for _, f := range dv.Fields {
			switch {
			case f.Field == "partCount" && !modelKnown:
				// reported as modelId below
			case ve.has(f.Field) && (f.Field == "target" || f.Field == "periodStartAtUtc" || f.Field == "periodEndAtUtc"):
				// the parse error already names it
			default:
				ve.Fields = append(ve.Fields, f)
			}
		}
	}
	if !modelKnown && strings.TrimSpace(req.ModelID) != "" && !strings.Contains(req.ModelID, "#") {
		ve.Add("modelId", "unknown model %q (see GET /v1/models)", req.ModelID)
	}
	if ve.Err() != nil {
		writeValidation(w, &ve.ValidationError)
		return
	}
	now := h.now().UTC()
	m := &model.Milestone{
		UserID: s.UserID, MilestoneID: model.NewID(), MilestoneDefinition: def,
		Projection: model.Projection{Status: model.StatusActive}, Version: 0, CreatedAtUtc: now, WrittenBy: model.WriterAPI,
	}
	if err := h.milestones.CreateMilestone(ctx, m); err != nil {
		if errors.Is(err, model.ErrMilestoneLimit) {
			writeError(w, http.StatusConflict, CodeMilestoneLimit, fmt.Sprintf(
				"you have %d milestones, the most one account can hold; no milestone was created", model.MaxMilestonesPerUser))
			return
		}
		h.fail(ctx, w, log, "create milestone", err)
		return
	}
	log.InfoContext(ctx, "milestone created", "milestoneId", m.MilestoneID, "modelId", m.ModelID)
	h.ensureBackfill(ctx, log, s.UserID, "milestone created")
	w.Header().Set("Location", "/v1/milestones/"+m.MilestoneID)
	writeJSON(w, http.StatusCreated, milestoneJSON(ports.MilestoneWithAwards{Milestone: *m}))
}

type fieldErrors struct{ model.ValidationError }

func (f *fieldErrors) has(field string) bool {
	for _, e := range f.Fields {
		if e.Field == field {
			return true
		}
	}
	return false
}

// definition turns the request into a definition, collecting the errors only
// parsing can see (time formats, a missing target).
func (req CreateMilestoneRequest) definition() (model.MilestoneDefinition, *fieldErrors) {
	ve := &fieldErrors{}
	d := model.MilestoneDefinition{
		ModelID: strings.TrimSpace(req.ModelID), Title: strings.TrimSpace(req.Title), Metric: model.Metric(req.Metric),
	}
	// Groups ("group:rides") become their explicit types here, so the
	// stored definition is a plain filter; unknown names are refused by
	// Validate, which names each.
	types, unknown := sport.Expand(req.SportTypes)
	d.SportTypes = append(append([]string{}, types...), unknown...)
	if req.Target == nil {
		ve.Add("target", "is required")
	} else {
		d.Target = *req.Target
	}
	if req.PeriodStartAtUtc != "" {
		t, err := time.Parse(time.RFC3339, req.PeriodStartAtUtc)
		if err != nil {
			ve.Add("periodStartAtUtc", "%q is not an RFC 3339 time", req.PeriodStartAtUtc)
		} else {
			d.PeriodStartAtUtc = t.UTC()
		}
	}
	if req.PeriodEndAtUtc != nil {
		t, err := time.Parse(time.RFC3339, *req.PeriodEndAtUtc)
		if err != nil {
			ve.Add("periodEndAtUtc", "%q is not an RFC 3339 time", *req.PeriodEndAtUtc)
		} else {
			t = t.UTC()
			d.PeriodEndAtUtc = &t
		}
	}
	return d, ve
}

// listMilestones answers {milestones:[…]} with one Query of the user's
// partition.
func (h *Handler) listMilestones(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	ms, truncated, err := h.milestones.MilestonesWithAwards(r.Context(), s.UserID, "")
	if err != nil {
		h.fail(r.Context(), w, log, "list milestones", err)
		return
	}
	if truncated {
		log.WarnContext(r.Context(), "milestone list truncated by the guardrail", "limit", strconv.Itoa(model.MaxWorkoutsToInspect))
	}
	out := struct {
		Milestones []MilestoneJSON `json:"milestones"`
	}{Milestones: make([]MilestoneJSON, 0, len(ms))}
	for _, m := range ms {
		out.Milestones = append(out.Milestones, milestoneJSON(m))
	}
	writeJSON(w, http.StatusOK, out)
}

// getMilestone answers one milestone with its awards; another user's id (or
// any unknown id) is 404, so ids leak nothing.
func (h *Handler) getMilestone(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	id := r.PathValue("milestoneId")
	notFound := func() { writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("milestone %q not found", id)) }
	if !opaqueID.MatchString(id) {
		notFound()
		return
	}
	ms, _, err := h.milestones.MilestonesWithAwards(r.Context(), s.UserID, id)
	if err != nil {
		h.fail(r.Context(), w, log.With("milestoneId", id), "read milestone", err)
		return
	}
	if len(ms) != 1 {
		notFound()
		return
	}
	writeJSON(w, http.StatusOK, milestoneJSON(ms[0]))
}
