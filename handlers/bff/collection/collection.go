// Package collection serves what athletes come for: every award they hold,
// across milestones, deleted ones included (GET /v1/awards, newest first,
// paged), and per model the distinct parts owned and the duplicates (GET
// /v1/collection). Both read the user's collection entries
// (model/store.Collection), never the milestones.
package collection

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/respond"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/catalog"
)

// Store reads a page of the user's collection, newest first (after: the
// cursor a previous page returned; next: the following page's, empty on
// the last), its summary (per model, the awards held of each part;
// complete once every entry is counted), counts entries written before the
// summary (at most limit), and reads a model the catalog no longer lists.
type Store interface {
	CollectedAwards(ctx context.Context, userID, after string, limit int) (awards []model.Award, next string, err error)
	CollectionSummary(ctx context.Context, userID string) (sums map[string]map[int]int, complete bool, err error)
	SummarizeCollection(ctx context.Context, userID string, limit int) (counted int, done bool, err error)
}

// Models read a model's name and part count (the milestones adapter).
type Models interface {
	ModelMeta(ctx context.Context, modelID string) (model.ModelMeta, error)
}

// SummarizeEach is how many older entries one GET /v1/collection counts
// into the summary while it is incomplete: the collection of a user from
// before the summary is counted over a few reads, each answered from the
// entries meanwhile.
const SummarizeEach = 500

// Page sizes of GET /v1/awards (?limit=), and how many awards
// GET /v1/collection reads at most: far beyond a lifetime of milestones (a
// 10-part milestone every week for 40 years is 20,800).
const (
	DefaultLimit  = 100
	MaxLimit      = 500
	MaxCollection = 50_000
)

// Handler serves the collection routes. Its methods have the shape of the
// BFF's session-checked routes.
type Handler struct {
	st        Store
	models    Models
	cat       *catalog.Catalog
	publicURL string
}

// New returns a Handler over the collection st and the models; publicURL
// prefixes the next page's link.
func New(st Store, models Models, cat *catalog.Catalog, publicURL string) *Handler {
	return &Handler{st: st, models: models, cat: cat, publicURL: strings.TrimRight(publicURL, "/")}
}

// AwardsPage is the body of GET /v1/awards; Next is the next page's URL
// (also in the Link header), absent on the last page.
type AwardsPage struct {
	Awards []milestones.AwardJSON `json:"awards"`
	Next   string                 `json:"next,omitempty"`
}

// Awards serves GET /v1/awards?limit=&cursor=: the user's awards, newest
// first, each with its milestone, model, part, the part's name and
// metadata as they were at the mint, and the activity that tipped it.
func (h *Handler) Awards(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	q := r.URL.Query()
	limit, after, ve := respond.ParsePage(q.Get("limit"), q.Get("cursor"), DefaultLimit, MaxLimit)
	if ve != nil {
		respond.Validation(w, ve)
		return
	}
	awards, next, err := h.st.CollectedAwards(r.Context(), s.UserID, after, limit)
	if errors.Is(err, model.ErrInvalid) && after != "" {
		respond.Validation(w, respond.FieldError("cursor", respond.NotACursor))
		return
	}
	if err != nil {
		respond.Fail(r.Context(), w, log, "list awards", err)
		return
	}
	out := AwardsPage{Awards: make([]milestones.AwardJSON, 0, len(awards))}
	for _, a := range awards {
		out.Awards = append(out.Awards, milestones.Award(a))
	}
	if next != "" {
		out.Next = h.publicURL + "/v1/awards?limit=" + strconv.Itoa(limit) + "&cursor=" + base64.RawURLEncoding.EncodeToString([]byte(next))
		w.Header().Set("Link", "<"+out.Next+`>; rel="next"`)
	}
	respond.JSON(w, http.StatusOK, out)
}

// All reads the user's whole collection, newest first, page by page, at
// most MaxCollection awards (the collection route and the export read it).
func All(ctx context.Context, st Store, userID string) ([]model.Award, error) {
	var out []model.Award
	for after := ""; len(out) < MaxCollection; {
		awards, next, err := st.CollectedAwards(ctx, userID, after, 1000)
		if err != nil {
			return nil, fmt.Errorf("read collection of user %s: %w", userID, err)
		}
		out = append(out, awards...)
		if after = next; next == "" {
			break
		}
	}
	return out, nil
}

// ModelJSON is one model of the collection: the distinct parts owned,
// how many awards beyond those are duplicates, and how complete it is.
type ModelJSON struct {
	ModelID    string  `json:"modelId"`
	Name       string  `json:"name"`
	PartCount  int     `json:"partCount"`
	Owned      []int   `json:"owned"`
	Duplicates int     `json:"duplicates"`
	Percent    float64 `json:"percent"`
}

// Collection serves GET /v1/collection: one entry per model with at least
// one award, by model id, from the collection's summary (one Query of an
// item a model, whatever the collection's size).
func (h *Handler) Collection(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, _ string) {
	ctx := r.Context()
	owned, err := h.owned(ctx, log, s.UserID)
	if err != nil {
		respond.Fail(ctx, w, log, "read collection", err)
		return
	}
	out := struct {
		Models []ModelJSON `json:"models"`
	}{Models: []ModelJSON{}}
	for id, parts := range owned {
		m, err := h.model(ctx, id, parts)
		if err != nil {
			respond.Fail(ctx, w, log, "read collection", err)
			return
		}
		out.Models = append(out.Models, m)
	}
	slices.SortFunc(out.Models, func(a, b ModelJSON) int { return strings.Compare(a.ModelID, b.ModelID) })
	respond.JSON(w, http.StatusOK, out)
}

// owned is, per model, how many awards of each part the user holds: the
// summary once it is complete; before that (a collection from before the
// summary) the entries themselves, while this read counts up to
// SummarizeEach of them into the summary.
func (h *Handler) owned(ctx context.Context, log *slog.Logger, userID string) (map[string]map[int]int, error) {
	sums, complete, err := h.st.CollectionSummary(ctx, userID)
	if err != nil || complete {
		return sums, err
	}
	if n, done, err := h.st.SummarizeCollection(ctx, userID, SummarizeEach); err != nil {
		log.WarnContext(ctx, "collection summary not advanced; answered from the entries", "error", err)
	} else if done {
		sums, _, err := h.st.CollectionSummary(ctx, userID) // every entry counted: the summary is whole
		return sums, err
	} else {
		log.InfoContext(ctx, "collection summary advanced", "counted", n)
	}
	awards, err := All(ctx, h.st, userID)
	if err != nil {
		return nil, err
	}
	owned := map[string]map[int]int{}
	for _, a := range awards {
		if owned[a.ModelID] == nil {
			owned[a.ModelID] = map[int]int{}
		}
		owned[a.ModelID][a.PartIndex]++
	}
	return owned, nil
}

// model is one model's entry: its name and part count from the catalog
// (or the table, for a model the catalog no longer lists).
func (h *Handler) model(ctx context.Context, id string, parts map[int]int) (ModelJSON, error) {
	out := ModelJSON{ModelID: id, Name: id, Owned: []int{}}
	if m, ok := h.cat.Model(id); ok {
		out.Name, out.PartCount = m.Name, m.PartCount
	} else if meta, err := h.models.ModelMeta(ctx, id); err == nil {
		out.Name, out.PartCount = meta.Name, meta.PartCount
	} else if !errors.Is(err, model.ErrNotFound) {
		return ModelJSON{}, err
	}
	for i, n := range parts {
		out.Owned = append(out.Owned, i)
		out.Duplicates += n - 1
	}
	slices.Sort(out.Owned)
	out.PartCount = max(out.PartCount, out.Owned[len(out.Owned)-1]+1)
	out.Percent = math.Floor(float64(len(out.Owned))*1000/float64(out.PartCount)) / 10
	return out, nil
}
