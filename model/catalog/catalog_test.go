package catalog

import (
	"errors"
	"reflect"
	"testing"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
)

func TestDefaultCatalogIsValid(t *testing.T) {
	t.Parallel()
	c, err := Default()
	if err != nil {
		t.Fatalf("embedded catalog: %v", err)
	}
	if len(c.Models) < 3 {
		t.Fatalf("embedded catalog has %d models, want at least 3", len(c.Models))
	}
	m, ok := c.Model("saturn-v")
	if !ok || m.PartCount != 10 || m.Parts[9].Name != "Command module and escape tower" {
		t.Fatalf("Model(saturn-v) = %+v, %v", m, ok)
	}
	if _, ok := c.Model("nope"); ok {
		t.Fatal("Model(nope) found a model")
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given string
		want  []string // bad fields; nil means a decode error
	}{
		{"not json", `{`, nil},
		{"unknown field", `{"version":1,"modelz":[]}`, nil},
		{"no version, no models", `{"models":[]}`, []string{"version", "models"}},
		{"bad id and no name", `{"version":1,"models":[{"modelId":"Bad Id","partCount":1,"parts":[{"partIndex":0,"name":"p"}]}]}`,
			[]string{"models[0].modelId", "models[0].name"}},
		{"duplicate id", `{"version":1,"models":[
			{"modelId":"a","name":"A","partCount":1,"parts":[{"partIndex":0,"name":"p"}]},
			{"modelId":"a","name":"B","partCount":1,"parts":[{"partIndex":0,"name":"p"}]}]}`,
			[]string{"models[1].modelId"}},
		{"part count zero", `{"version":1,"models":[{"modelId":"a","name":"A","partCount":0,"parts":[]}]}`,
			[]string{"models[0].partCount"}},
		{"part count 100", `{"version":1,"models":[{"modelId":"a","name":"A","partCount":100,"parts":[]}]}`,
			[]string{"models[0].partCount", "models[0].parts"}},
		{"parts do not match count", `{"version":1,"models":[{"modelId":"a","name":"A","partCount":2,"parts":[{"partIndex":0,"name":"p"}]}]}`,
			[]string{"models[0].parts"}},
		{"parts out of order, unnamed", `{"version":1,"models":[{"modelId":"a","name":"A","partCount":2,"parts":[{"partIndex":1,"name":"p"},{"partIndex":0,"name":""}]}]}`,
			[]string{"models[0].parts[0].partIndex", "models[0].parts[1].partIndex", "models[0].parts[1].name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.given))
			if !errors.Is(err, model.ErrInvalid) {
				t.Fatalf("Parse: got %v, want ErrInvalid", err)
			}
			var ve *model.ValidationError
			var got []string
			if errors.As(err, &ve) {
				for _, f := range ve.Fields {
					got = append(got, f.Field)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("bad fields = %v, want %v (%v)", got, tt.want, err)
			}
		})
	}
}

func TestEntities(t *testing.T) {
	t.Parallel()
	m := Model{ModelID: "a", Name: "A", PartCount: 2, Parts: []Part{
		{PartIndex: 0, Name: "p0", Metadata: map[string]string{"rarity": "common"}},
		{PartIndex: 1, Name: "p1", Metadata: map[string]string{}},
	}}
	meta, parts := m.Entities(3)
	if meta.ModelID != "a" || meta.PartCount != 2 || meta.CatalogVersion != 3 || meta.ItemKey() != keys.ModelMetaKey("a") {
		t.Fatalf("meta = %+v", meta)
	}
	if len(parts) != 2 || parts[1].ItemKey() != keys.ModelPartKey("a", 1) || parts[0].Metadata["rarity"] != "common" {
		t.Fatalf("parts = %+v", parts)
	}
	if parts[1].Metadata != nil {
		t.Fatalf("empty metadata kept as %#v, want nil so re-seeding compares equal", parts[1].Metadata)
	}
}
