package openapi

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// SchemaProperties lists the properties and the required ones of a schema
// of the embedded OpenAPI document's components.
func SchemaProperties(name string) (props, required []string, err error) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Required   []string       `yaml:"required"`
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		return nil, nil, err
	}
	s, ok := doc.Components.Schemas[name]
	if !ok {
		return nil, nil, fmt.Errorf("openapi.yaml has no schema %s", name)
	}
	for p := range s.Properties {
		props = append(props, p)
	}
	return props, s.Required, nil
}

// SchemaEnum lists the enum of a schema of the embedded OpenAPI document's
// components.
func SchemaEnum(name string) ([]string, error) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Enum []string `yaml:"enum"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		return nil, err
	}
	s, ok := doc.Components.Schemas[name]
	if !ok {
		return nil, fmt.Errorf("openapi.yaml has no schema %s", name)
	}
	return s.Enum, nil
}
