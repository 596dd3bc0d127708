// Package catalog is the collectible model catalog: a versioned JSON file in
// the repository (catalog.json, embedded), its validation, and the idempotent
// seeding of MODEL#{modelId} / META and PART#{nn} items through a narrow
// Seeder (model/store implements it). The API serves the same catalog the
// seeding command writes, so both come from one file.
//
// Bump "version" whenever the file changes: seeding refuses to overwrite a
// catalog written by a newer version. Existing milestones keep the partCount
// they copied, and awards keep the part metadata they copied, so editing the
// catalog never rewrites what users already own.
package catalog

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/commitcollect/backend/model"
)

//go:embed catalog.json
var catalogJSON []byte

// Catalog is one version of the model catalog.
type Catalog struct {
	Version int     `json:"version"`
	Models  []Model `json:"models"`
}

// Model is a collectible made of PartCount parts.
type Model struct {
	ModelID     string `json:"modelId"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	PartCount   int    `json:"partCount"`
	Parts       []Part `json:"parts"`
}

// Part is one part of a model; awards copy its name and metadata.
type Part struct {
	PartIndex   int               `json:"partIndex"`
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

var modelIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// Default returns the embedded catalog. It returns an error matching
// model.ErrInvalid if the file does not parse or validate (a test keeps that
// from ever shipping).
func Default() (*Catalog, error) { return Parse(catalogJSON) }

// Parse decodes and validates a catalog file. Unknown fields are refused. It
// returns an error matching model.ErrInvalid (a *model.ValidationError for
// content problems) naming every problem.
func Parse(data []byte) (*Catalog, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Catalog
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("parse catalog: %v: %w", err, model.ErrInvalid)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("parse catalog: %w", err)
	}
	return &c, nil
}

// Validate checks the catalog: a positive version, at least one model,
// unique model ids of lowercase letters, digits and dashes, names, partCount
// in 1..model.MaxPartCount, and parts indexed 0..partCount-1 in order. It
// returns a *model.ValidationError listing every problem, or nil.
func (c *Catalog) Validate() error {
	v := &model.ValidationError{}
	if c.Version < 1 {
		v.Add("version", "must be at least 1")
	}
	if len(c.Models) == 0 {
		v.Add("models", "is empty")
	}
	seen := map[string]bool{}
	for i, m := range c.Models {
		f := fmt.Sprintf("models[%d]", i)
		switch {
		case !modelIDPattern.MatchString(m.ModelID):
			v.Add(f+".modelId", "%q is not lowercase letters, digits and dashes", m.ModelID)
		case seen[m.ModelID]:
			v.Add(f+".modelId", "%q is listed twice", m.ModelID)
		}
		seen[m.ModelID] = true
		if strings.TrimSpace(m.Name) == "" {
			v.Add(f+".name", "is required")
		}
		if m.PartCount < 1 || m.PartCount > model.MaxPartCount {
			v.Add(f+".partCount", "%d is not between 1 and %d", m.PartCount, model.MaxPartCount)
		}
		if len(m.Parts) != m.PartCount {
			v.Add(f+".parts", "has %d parts, partCount says %d", len(m.Parts), m.PartCount)
		}
		for j, p := range m.Parts {
			pf := fmt.Sprintf("%s.parts[%d]", f, j)
			if p.PartIndex != j {
				v.Add(pf+".partIndex", "is %d, want %d (parts are indexed 0..partCount-1 in order)", p.PartIndex, j)
			}
			if strings.TrimSpace(p.Name) == "" {
				v.Add(pf+".name", "is required")
			}
		}
	}
	return v.Err()
}

// Model returns the model with id, and whether it exists.
func (c *Catalog) Model(id string) (Model, bool) {
	for _, m := range c.Models {
		if m.ModelID == id {
			return m, true
		}
	}
	return Model{}, false
}

// Entities renders a model as the items seeding writes, stamped with the
// catalog version.
func (m Model) Entities(catalogVersion int) (*model.ModelMeta, []model.ModelPart) {
	meta := &model.ModelMeta{
		ModelID: m.ModelID, Name: m.Name, Description: m.Description,
		PartCount: m.PartCount, CatalogVersion: catalogVersion,
	}
	parts := make([]model.ModelPart, len(m.Parts))
	for i, p := range m.Parts {
		parts[i] = model.ModelPart{ModelID: m.ModelID, PartIndex: p.PartIndex, Name: p.Name, Description: p.Description}
		if len(p.Metadata) > 0 {
			parts[i].Metadata = p.Metadata
		}
	}
	return meta, parts
}

// Seeder writes one model's items idempotently. model/store implements it.
type Seeder interface {
	// SeedModel writes meta and parts where they differ from what is stored
	// (and removes parts beyond meta.PartCount), returning how many items it
	// changed: 0 when everything already matched. It returns an error
	// matching model.ErrConflict when the stored model was seeded by a newer
	// catalog version.
	SeedModel(ctx context.Context, meta *model.ModelMeta, parts []model.ModelPart) (int, error)
}

// Seed writes every model of c through s. It is idempotent: seeding the same
// catalog again changes nothing and reports 0. It stops at the first error,
// wrapped with the model id.
func Seed(ctx context.Context, s Seeder, c *Catalog) (changed int, err error) {
	for _, m := range c.Models {
		meta, parts := m.Entities(c.Version)
		n, err := s.SeedModel(ctx, meta, parts)
		changed += n
		if err != nil {
			return changed, fmt.Errorf("seed model %s: %w", m.ModelID, err)
		}
	}
	return changed, nil
}
