// Package schemaprovider is a schema-only stand-in for the hashicorp/aws
// Terraform provider (plugin protocol 6), so that `terraform validate`,
// `plan` and `apply` run offline with Terraform itself doing every type and
// structure check.
//
// It reports the real provider's schema (testdata/aws-provider-schema-6.47.0.json.gz,
// a copy of ../shared/terraform's `terraform providers schema -json` dump, kept
// whole so new resource types need nothing) plus the provider block's own
// arguments, which the dump lacks (providerBlock, taken from the provider's
// documentation). It validates nothing beyond the schema. It plans like a
// provider that knows nothing: a computed attribute left null by the
// configuration becomes unknown ("known after apply"). Apply fills those
// unknowns the way AWS would name things (ARNs, URLs, ids from the resource's
// name; see apply.go) and zero values elsewhere, and stores nothing anywhere:
// it only exists so the values that are unknown at plan time (the ARNs in the
// IAM policies) can be read from a state. Data sources: aws_iam_policy_document
// is computed exactly as the real provider computes it (policydoc.go);
// aws_caller_identity, aws_region and aws_partition answer fixed plausible
// values (account 123456789012, the configured region); any other data source
// gets zero values for its computed attributes.
package schemaprovider

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// SchemaFile is the embedded schema's path relative to this package.
const SchemaFile = "testdata/aws-provider-schema-6.47.0.json.gz"

// ProviderAddress is the provider this binary stands in for.
const ProviderAddress = "registry.terraform.io/hashicorp/aws"

//go:embed testdata/aws-provider-schema-6.47.0.json.gz
var schemaGz []byte

// jsonSchema is one schema in `terraform providers schema -json` format.
type jsonSchema struct {
	Version int64     `json:"version"`
	Block   jsonBlock `json:"block"`
}

type jsonBlock struct {
	Attributes map[string]*jsonAttribute `json:"attributes"`
	BlockTypes map[string]*jsonBlockType `json:"block_types"`
	Deprecated bool                      `json:"deprecated"`
}

type jsonAttribute struct {
	Type       json.RawMessage `json:"type"`
	NestedType *jsonNested     `json:"nested_type"`
	Required   bool            `json:"required"`
	Optional   bool            `json:"optional"`
	Computed   bool            `json:"computed"`
	Sensitive  bool            `json:"sensitive"`
	Deprecated bool            `json:"deprecated"`
	WriteOnly  bool            `json:"write_only"`
}

type jsonNested struct {
	Attributes  map[string]*jsonAttribute `json:"attributes"`
	NestingMode string                    `json:"nesting_mode"`
}

type jsonBlockType struct {
	NestingMode string    `json:"nesting_mode"`
	Block       jsonBlock `json:"block"`
	MinItems    int64     `json:"min_items"`
	MaxItems    int64     `json:"max_items"`
}

// Schemas is the provider's schema, read once per process.
type Schemas struct {
	Provider    *jsonSchema
	Resources   map[string]*jsonSchema
	DataSources map[string]*jsonSchema
}

var (
	loadOnce   sync.Once
	loaded     *Schemas
	loadErr    error
	protoOnce  sync.Once
	protoResp  *tfprotov6.GetProviderSchemaResponse
	protoError error
)

// Load returns the embedded schema (decompressed and parsed once).
func Load() (*Schemas, error) {
	loadOnce.Do(func() { loaded, loadErr = parse(schemaGz) })
	return loaded, loadErr
}

// TypesEnv optionally limits the reported schema to the listed types
// ("resource.aws_lambda_function,data.aws_region,…"): a provider process
// then decodes and sends only what the configuration uses, which makes each
// Terraform command several times cheaper. A type not listed is unsupported,
// as a misspelled type would be. test/terraform/tfoffline sets it from the
// configuration it runs; without it the whole schema is reported.
const TypesEnv = "CC_TF_SCHEMA_TYPES"

func parse(gz []byte) (*Schemas, error) {
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	var dump struct {
		ProviderSchemas map[string]struct {
			Provider          *jsonSchema                `json:"provider"`
			ResourceSchemas   map[string]json.RawMessage `json:"resource_schemas"`
			DataSourceSchemas map[string]json.RawMessage `json:"data_source_schemas"`
		} `json:"provider_schemas"`
	}
	if err := json.Unmarshal(raw, &dump); err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	ps, ok := dump.ProviderSchemas[ProviderAddress]
	if !ok {
		return nil, fmt.Errorf("parse schema: no %s in the dump", ProviderAddress)
	}
	var only map[string]bool
	if v := os.Getenv(TypesEnv); v != "" {
		only = map[string]bool{}
		for _, t := range strings.Split(v, ",") {
			only[strings.TrimSpace(t)] = true
		}
	}
	s := &Schemas{Provider: ps.Provider, Resources: map[string]*jsonSchema{}, DataSources: map[string]*jsonSchema{}}
	for _, kind := range []struct {
		prefix string
		in     map[string]json.RawMessage
		out    map[string]*jsonSchema
	}{{"resource.", ps.ResourceSchemas, s.Resources}, {"data.", ps.DataSourceSchemas, s.DataSources}} {
		for name, msg := range kind.in {
			if only != nil && !only[kind.prefix+name] {
				continue
			}
			var js jsonSchema
			if err := json.Unmarshal(msg, &js); err != nil {
				return nil, fmt.Errorf("parse schema of %s: %w", name, err)
			}
			kind.out[name] = &js
		}
	}
	if s.Provider == nil || len(s.Provider.Block.Attributes) == 0 {
		s.Provider = providerBlock()
	}
	return s, nil
}

// providerBlock is the `provider "aws"` block's schema, which the dump does
// not carry: the arguments of the provider's documentation ("Argument
// Reference" of the AWS provider, 6.x) with their types.
func providerBlock() *jsonSchema {
	str := func() *jsonAttribute { return &jsonAttribute{Type: json.RawMessage(`"string"`), Optional: true} }
	boolean := func() *jsonAttribute { return &jsonAttribute{Type: json.RawMessage(`"bool"`), Optional: true} }
	num := func() *jsonAttribute { return &jsonAttribute{Type: json.RawMessage(`"number"`), Optional: true} }
	setStr := func() *jsonAttribute {
		return &jsonAttribute{Type: json.RawMessage(`["set","string"]`), Optional: true}
	}
	listStr := func() *jsonAttribute {
		return &jsonAttribute{Type: json.RawMessage(`["list","string"]`), Optional: true}
	}
	mapStr := func() *jsonAttribute {
		return &jsonAttribute{Type: json.RawMessage(`["map","string"]`), Optional: true}
	}
	endpoints := map[string]*jsonAttribute{}
	for _, svc := range []string{"apigateway", "apigatewayv2", "cloudwatch", "cloudwatchlogs", "dynamodb", "events",
		"iam", "kms", "lambda", "logs", "scheduler", "sns", "sqs", "ssm", "sts"} {
		endpoints[svc] = str()
	}
	return &jsonSchema{Block: jsonBlock{
		Attributes: map[string]*jsonAttribute{
			"access_key": str(), "secret_key": str(), "token": str(), "profile": str(), "region": str(),
			"allowed_account_ids": setStr(), "forbidden_account_ids": setStr(),
			"custom_ca_bundle": str(), "ec2_metadata_service_endpoint": str(), "ec2_metadata_service_endpoint_mode": str(),
			"http_proxy": str(), "https_proxy": str(), "no_proxy": str(), "insecure": boolean(),
			"max_retries": num(), "retry_mode": str(), "s3_use_path_style": boolean(), "s3_us_east_1_regional_endpoint": str(),
			"shared_config_files": listStr(), "shared_credentials_files": listStr(),
			"skip_credentials_validation": boolean(), "skip_metadata_api_check": str(), "skip_region_validation": boolean(),
			"skip_requesting_account_id": boolean(), "sts_region": str(), "token_bucket_rate_limiter_capacity": num(),
			"use_dualstack_endpoint": boolean(), "use_fips_endpoint": boolean(),
		},
		BlockTypes: map[string]*jsonBlockType{
			"default_tags": {NestingMode: "list", MaxItems: 1, Block: jsonBlock{Attributes: map[string]*jsonAttribute{"tags": mapStr()}}},
			"ignore_tags":  {NestingMode: "list", MaxItems: 1, Block: jsonBlock{Attributes: map[string]*jsonAttribute{"keys": setStr(), "key_prefixes": setStr()}}},
			"assume_role": {NestingMode: "list", Block: jsonBlock{Attributes: map[string]*jsonAttribute{
				"role_arn": str(), "session_name": str(), "external_id": str(), "duration": str(), "policy": str(),
				"policy_arns": setStr(), "source_identity": str(), "tags": mapStr(), "transitive_tag_keys": setStr(),
			}}},
			"assume_role_with_web_identity": {NestingMode: "list", MaxItems: 1, Block: jsonBlock{Attributes: map[string]*jsonAttribute{
				"role_arn": str(), "session_name": str(), "duration": str(), "policy": str(), "policy_arns": setStr(),
				"web_identity_token": str(), "web_identity_token_file": str(),
			}}},
			"endpoints": {NestingMode: "set", Block: jsonBlock{Attributes: endpoints}},
		},
	}}
}

// --------------------------------------------------------------- cty types

// ImpliedType is the cty object type Terraform core derives from a block
// (configschema.Block.ImpliedType): the type of every value on the wire.
func (b *jsonBlock) ImpliedType() (cty.Type, error) {
	atys := map[string]cty.Type{}
	for name, a := range b.Attributes {
		t, err := a.impliedType()
		if err != nil {
			return cty.NilType, fmt.Errorf("attribute %s: %w", name, err)
		}
		atys[name] = t
	}
	for name, bt := range b.BlockTypes {
		et, err := bt.Block.ImpliedType()
		if err != nil {
			return cty.NilType, fmt.Errorf("block %s: %w", name, err)
		}
		switch bt.NestingMode {
		case "single", "group":
			atys[name] = et
		case "list":
			if et.HasDynamicTypes() {
				atys[name] = cty.DynamicPseudoType
			} else {
				atys[name] = cty.List(et)
			}
		case "set":
			atys[name] = cty.Set(et)
		case "map":
			if et.HasDynamicTypes() {
				atys[name] = cty.DynamicPseudoType
			} else {
				atys[name] = cty.Map(et)
			}
		default:
			return cty.NilType, fmt.Errorf("block %s: nesting mode %q", name, bt.NestingMode)
		}
	}
	return cty.Object(atys), nil
}

func (a *jsonAttribute) impliedType() (cty.Type, error) {
	if a.NestedType == nil {
		return ctyjson.UnmarshalType(a.Type)
	}
	atys := map[string]cty.Type{}
	for name, na := range a.NestedType.Attributes {
		t, err := na.impliedType()
		if err != nil {
			return cty.NilType, err
		}
		atys[name] = t
	}
	obj := cty.Object(atys)
	switch a.NestedType.NestingMode {
	case "single":
		return obj, nil
	case "list":
		return cty.List(obj), nil
	case "set":
		return cty.Set(obj), nil
	case "map":
		return cty.Map(obj), nil
	}
	return cty.NilType, fmt.Errorf("nested attribute nesting mode %q", a.NestedType.NestingMode)
}

// ------------------------------------------------------------ tfprotov6

func protoSchema(s *jsonSchema) (*tfprotov6.Schema, error) {
	b, err := protoBlock(&s.Block)
	if err != nil {
		return nil, err
	}
	return &tfprotov6.Schema{Version: s.Version, Block: b}, nil
}

func protoBlock(b *jsonBlock) (*tfprotov6.SchemaBlock, error) {
	out := &tfprotov6.SchemaBlock{Deprecated: b.Deprecated}
	for _, name := range sortedKeys(b.Attributes) {
		a, err := protoAttribute(name, b.Attributes[name])
		if err != nil {
			return nil, err
		}
		out.Attributes = append(out.Attributes, a)
	}
	for _, name := range sortedKeys(b.BlockTypes) {
		bt := b.BlockTypes[name]
		nb, err := protoBlock(&bt.Block)
		if err != nil {
			return nil, fmt.Errorf("block %s: %w", name, err)
		}
		mode, ok := map[string]tfprotov6.SchemaNestedBlockNestingMode{
			"single": tfprotov6.SchemaNestedBlockNestingModeSingle,
			"list":   tfprotov6.SchemaNestedBlockNestingModeList,
			"set":    tfprotov6.SchemaNestedBlockNestingModeSet,
			"map":    tfprotov6.SchemaNestedBlockNestingModeMap,
			"group":  tfprotov6.SchemaNestedBlockNestingModeGroup,
		}[bt.NestingMode]
		if !ok {
			return nil, fmt.Errorf("block %s: nesting mode %q", name, bt.NestingMode)
		}
		out.BlockTypes = append(out.BlockTypes, &tfprotov6.SchemaNestedBlock{
			TypeName: name, Block: nb, Nesting: mode, MinItems: bt.MinItems, MaxItems: bt.MaxItems,
		})
	}
	return out, nil
}

func protoAttribute(name string, a *jsonAttribute) (*tfprotov6.SchemaAttribute, error) {
	out := &tfprotov6.SchemaAttribute{
		Name: name, Required: a.Required, Optional: a.Optional, Computed: a.Computed,
		Sensitive: a.Sensitive, Deprecated: a.Deprecated, WriteOnly: a.WriteOnly,
	}
	if a.NestedType != nil {
		mode, ok := map[string]tfprotov6.SchemaObjectNestingMode{
			"single": tfprotov6.SchemaObjectNestingModeSingle,
			"list":   tfprotov6.SchemaObjectNestingModeList,
			"set":    tfprotov6.SchemaObjectNestingModeSet,
			"map":    tfprotov6.SchemaObjectNestingModeMap,
		}[a.NestedType.NestingMode]
		if !ok {
			return nil, fmt.Errorf("attribute %s: nesting mode %q", name, a.NestedType.NestingMode)
		}
		obj := &tfprotov6.SchemaObject{Nesting: mode}
		for _, n := range sortedKeys(a.NestedType.Attributes) {
			na, err := protoAttribute(n, a.NestedType.Attributes[n])
			if err != nil {
				return nil, fmt.Errorf("attribute %s: %w", name, err)
			}
			obj.Attributes = append(obj.Attributes, na)
		}
		out.NestedType = obj
		return out, nil
	}
	ct, err := ctyjson.UnmarshalType(a.Type)
	if err != nil {
		return nil, fmt.Errorf("attribute %s: type %s: %w", name, a.Type, err)
	}
	if out.Type, err = tfType(ct); err != nil {
		return nil, fmt.Errorf("attribute %s: %w", name, err)
	}
	return out, nil
}

// tfType converts a cty type (the schema dump's type strings) to tftypes.
func tfType(t cty.Type) (tftypes.Type, error) {
	switch {
	case t == cty.String:
		return tftypes.String, nil
	case t == cty.Number:
		return tftypes.Number, nil
	case t == cty.Bool:
		return tftypes.Bool, nil
	case t == cty.DynamicPseudoType:
		return tftypes.DynamicPseudoType, nil
	case t.IsListType(), t.IsSetType(), t.IsMapType():
		et, err := tfType(t.ElementType())
		if err != nil {
			return nil, err
		}
		switch {
		case t.IsListType():
			return tftypes.List{ElementType: et}, nil
		case t.IsSetType():
			return tftypes.Set{ElementType: et}, nil
		}
		return tftypes.Map{ElementType: et}, nil
	case t.IsObjectType():
		atys := map[string]tftypes.Type{}
		for n, at := range t.AttributeTypes() {
			tt, err := tfType(at)
			if err != nil {
				return nil, err
			}
			atys[n] = tt
		}
		return tftypes.Object{AttributeTypes: atys}, nil
	case t.IsTupleType():
		var ets []tftypes.Type
		for _, et := range t.TupleElementTypes() {
			tt, err := tfType(et)
			if err != nil {
				return nil, err
			}
			ets = append(ets, tt)
		}
		return tftypes.Tuple{ElementTypes: ets}, nil
	}
	return nil, fmt.Errorf("unsupported type %s", t.FriendlyName())
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// GetProviderSchemaResponse converts the whole schema once per process.
func getProviderSchemaResponse() (*tfprotov6.GetProviderSchemaResponse, error) {
	protoOnce.Do(func() {
		s, err := Load()
		if err != nil {
			protoError = err
			return
		}
		resp := &tfprotov6.GetProviderSchemaResponse{
			ServerCapabilities: &tfprotov6.ServerCapabilities{PlanDestroy: true, GetProviderSchemaOptional: true},
			ResourceSchemas:    map[string]*tfprotov6.Schema{},
			DataSourceSchemas:  map[string]*tfprotov6.Schema{},
		}
		if resp.Provider, err = protoSchema(s.Provider); err != nil {
			protoError = fmt.Errorf("provider schema: %w", err)
			return
		}
		for name, rs := range s.Resources {
			if resp.ResourceSchemas[name], err = protoSchema(rs); err != nil {
				protoError = fmt.Errorf("resource %s: %w", name, err)
				return
			}
		}
		for name, ds := range s.DataSources {
			if resp.DataSourceSchemas[name], err = protoSchema(ds); err != nil {
				protoError = fmt.Errorf("data source %s: %w", name, err)
				return
			}
		}
		protoResp = resp
	})
	return protoResp, protoError
}
