package schemaprovider

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"github.com/zclconf/go-cty/cty/msgpack"
)

// Account is the AWS account id every derived ARN and aws_caller_identity
// use.
const Account = "123456789012"

// DefaultRegion is used when the provider block sets no region.
const DefaultRegion = "us-east-1"

// Server is the schema-only provider (tfprotov6.ProviderServer).
type Server struct {
	mu     sync.Mutex
	region string
}

var _ tfprotov6.ProviderServer = (*Server)(nil)

// New returns a provider server; serve it with tf6server.Serve.
func New() *Server { return &Server{region: DefaultRegion} }

func (s *Server) regionName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.region
}

func errDiag(summary string, err error) []*tfprotov6.Diagnostic {
	return []*tfprotov6.Diagnostic{{Severity: tfprotov6.DiagnosticSeverityError, Summary: summary, Detail: err.Error()}}
}

// decode reads a DynamicValue (msgpack or JSON) as a value of ty.
func decode(dv *tfprotov6.DynamicValue, ty cty.Type) (cty.Value, error) {
	if dv == nil {
		return cty.NullVal(ty), nil
	}
	if dv.MsgPack != nil {
		return msgpack.Unmarshal(dv.MsgPack, ty)
	}
	if dv.JSON != nil {
		return ctyjson.Unmarshal(dv.JSON, ty)
	}
	return cty.NullVal(ty), nil
}

func encode(v cty.Value, ty cty.Type) (*tfprotov6.DynamicValue, error) {
	b, err := msgpack.Marshal(v, ty)
	if err != nil {
		return nil, err
	}
	return &tfprotov6.DynamicValue{MsgPack: b}, nil
}

func resourceSchema(typeName string) (*jsonSchema, cty.Type, error) {
	s, err := Load()
	if err != nil {
		return nil, cty.NilType, err
	}
	rs, ok := s.Resources[typeName]
	if !ok {
		return nil, cty.NilType, fmt.Errorf("resource type %s is not in the hashicorp/aws 6.47.0 schema", typeName)
	}
	ty, err := rs.Block.ImpliedType()
	return rs, ty, err
}

func dataSourceSchema(typeName string) (*jsonSchema, cty.Type, error) {
	s, err := Load()
	if err != nil {
		return nil, cty.NilType, err
	}
	ds, ok := s.DataSources[typeName]
	if !ok {
		return nil, cty.NilType, fmt.Errorf("data source %s is not in the hashicorp/aws 6.47.0 schema", typeName)
	}
	ty, err := ds.Block.ImpliedType()
	return ds, ty, err
}

// ---------------------------------------------------------------- provider

// GetMetadata lists every resource and data source type.
func (s *Server) GetMetadata(context.Context, *tfprotov6.GetMetadataRequest) (*tfprotov6.GetMetadataResponse, error) {
	sc, err := Load()
	if err != nil {
		return &tfprotov6.GetMetadataResponse{Diagnostics: errDiag("schema", err)}, nil
	}
	resp := &tfprotov6.GetMetadataResponse{ServerCapabilities: &tfprotov6.ServerCapabilities{PlanDestroy: true, GetProviderSchemaOptional: true}}
	for _, n := range sortedKeys(sc.Resources) {
		resp.Resources = append(resp.Resources, tfprotov6.ResourceMetadata{TypeName: n})
	}
	for _, n := range sortedKeys(sc.DataSources) {
		resp.DataSources = append(resp.DataSources, tfprotov6.DataSourceMetadata{TypeName: n})
	}
	return resp, nil
}

// GetProviderSchema reports the whole hashicorp/aws schema.
func (s *Server) GetProviderSchema(context.Context, *tfprotov6.GetProviderSchemaRequest) (*tfprotov6.GetProviderSchemaResponse, error) {
	resp, err := getProviderSchemaResponse()
	if err != nil {
		return &tfprotov6.GetProviderSchemaResponse{Diagnostics: errDiag("schema", err)}, nil
	}
	return resp, nil
}

// GetResourceIdentitySchemas reports none.
func (s *Server) GetResourceIdentitySchemas(context.Context, *tfprotov6.GetResourceIdentitySchemasRequest) (*tfprotov6.GetResourceIdentitySchemasResponse, error) {
	return &tfprotov6.GetResourceIdentitySchemasResponse{}, nil
}

// ValidateProviderConfig accepts whatever the schema accepts.
func (s *Server) ValidateProviderConfig(_ context.Context, req *tfprotov6.ValidateProviderConfigRequest) (*tfprotov6.ValidateProviderConfigResponse, error) {
	return &tfprotov6.ValidateProviderConfigResponse{PreparedConfig: req.Config}, nil
}

// ConfigureProvider remembers the region (for derived ARNs and aws_region).
func (s *Server) ConfigureProvider(_ context.Context, req *tfprotov6.ConfigureProviderRequest) (*tfprotov6.ConfigureProviderResponse, error) {
	sc, err := Load()
	if err != nil {
		return &tfprotov6.ConfigureProviderResponse{Diagnostics: errDiag("schema", err)}, nil
	}
	ty, err := sc.Provider.Block.ImpliedType()
	if err != nil {
		return &tfprotov6.ConfigureProviderResponse{Diagnostics: errDiag("provider schema", err)}, nil
	}
	cfg, err := decode(req.Config, ty)
	if err != nil {
		return &tfprotov6.ConfigureProviderResponse{Diagnostics: errDiag("provider config", err)}, nil
	}
	if !cfg.IsNull() && cfg.IsKnown() {
		if r := cfg.GetAttr("region"); r.IsKnown() && !r.IsNull() {
			s.mu.Lock()
			s.region = r.AsString()
			s.mu.Unlock()
		}
	}
	return &tfprotov6.ConfigureProviderResponse{}, nil
}

// StopProvider has nothing to stop.
func (s *Server) StopProvider(context.Context, *tfprotov6.StopProviderRequest) (*tfprotov6.StopProviderResponse, error) {
	return &tfprotov6.StopProviderResponse{}, nil
}

// --------------------------------------------------------------- resources

// ValidateResourceConfig accepts whatever the schema accepts.
func (s *Server) ValidateResourceConfig(context.Context, *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	return &tfprotov6.ValidateResourceConfigResponse{}, nil
}

// UpgradeResourceState re-reads a stored state with the current schema.
func (s *Server) UpgradeResourceState(_ context.Context, req *tfprotov6.UpgradeResourceStateRequest) (*tfprotov6.UpgradeResourceStateResponse, error) {
	_, ty, err := resourceSchema(req.TypeName)
	if err != nil {
		return &tfprotov6.UpgradeResourceStateResponse{Diagnostics: errDiag("schema", err)}, nil
	}
	if req.RawState == nil || req.RawState.JSON == nil {
		return &tfprotov6.UpgradeResourceStateResponse{Diagnostics: errDiag("upgrade state", fmt.Errorf("%s: no JSON state", req.TypeName))}, nil
	}
	v, err := ctyjson.Unmarshal(req.RawState.JSON, ty)
	if err != nil {
		return &tfprotov6.UpgradeResourceStateResponse{Diagnostics: errDiag("upgrade state", err)}, nil
	}
	dv, err := encode(v, ty)
	if err != nil {
		return &tfprotov6.UpgradeResourceStateResponse{Diagnostics: errDiag("upgrade state", err)}, nil
	}
	return &tfprotov6.UpgradeResourceStateResponse{UpgradedState: dv}, nil
}

// UpgradeResourceIdentity is never needed (no identity schemas).
func (s *Server) UpgradeResourceIdentity(context.Context, *tfprotov6.UpgradeResourceIdentityRequest) (*tfprotov6.UpgradeResourceIdentityResponse, error) {
	return &tfprotov6.UpgradeResourceIdentityResponse{}, nil
}

// ReadResource says the resource is as stored: there is no AWS to ask.
func (s *Server) ReadResource(_ context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	return &tfprotov6.ReadResourceResponse{NewState: req.CurrentState, Private: req.Private}, nil
}

// PlanResourceChange plans the proposed new state with every computed
// attribute that the configuration leaves null marked unknown.
func (s *Server) PlanResourceChange(_ context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	rs, ty, err := resourceSchema(req.TypeName)
	if err != nil {
		return &tfprotov6.PlanResourceChangeResponse{Diagnostics: errDiag("schema", err)}, nil
	}
	proposed, err := decode(req.ProposedNewState, ty)
	if err != nil {
		return &tfprotov6.PlanResourceChangeResponse{Diagnostics: errDiag("proposed state", err)}, nil
	}
	planned := proposed
	if !proposed.IsNull() {
		prior, err := decode(req.PriorState, ty)
		if err != nil {
			return &tfprotov6.PlanResourceChangeResponse{Diagnostics: errDiag("prior state", err)}, nil
		}
		if prior.IsNull() { // a create: nothing is known that the configuration does not say
			planned = unknownComputed(&rs.Block, proposed)
		}
	}
	dv, err := encode(planned, ty)
	if err != nil {
		return &tfprotov6.PlanResourceChangeResponse{Diagnostics: errDiag("planned state", err)}, nil
	}
	return &tfprotov6.PlanResourceChangeResponse{PlannedState: dv, PlannedPrivate: req.PriorPrivate}, nil
}

// ApplyResourceChange stores the planned state with its unknowns filled in
// (apply.go).
func (s *Server) ApplyResourceChange(_ context.Context, req *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	rs, ty, err := resourceSchema(req.TypeName)
	if err != nil {
		return &tfprotov6.ApplyResourceChangeResponse{Diagnostics: errDiag("schema", err)}, nil
	}
	planned, err := decode(req.PlannedState, ty)
	if err != nil {
		return &tfprotov6.ApplyResourceChangeResponse{Diagnostics: errDiag("planned state", err)}, nil
	}
	newState := planned
	if !planned.IsNull() {
		newState = fillUnknowns(&rs.Block, planned, derived(req.TypeName, planned, s.regionName()))
	}
	dv, err := encode(newState, ty)
	if err != nil {
		return &tfprotov6.ApplyResourceChangeResponse{Diagnostics: errDiag("new state", err)}, nil
	}
	return &tfprotov6.ApplyResourceChangeResponse{NewState: dv, Private: req.PlannedPrivate}, nil
}

// ImportResourceState is not supported: there is nothing to import from.
func (s *Server) ImportResourceState(_ context.Context, req *tfprotov6.ImportResourceStateRequest) (*tfprotov6.ImportResourceStateResponse, error) {
	return &tfprotov6.ImportResourceStateResponse{Diagnostics: errDiag("import", fmt.Errorf("the schema-only provider cannot import %s", req.TypeName))}, nil
}

// MoveResourceState is not supported.
func (s *Server) MoveResourceState(_ context.Context, req *tfprotov6.MoveResourceStateRequest) (*tfprotov6.MoveResourceStateResponse, error) {
	return &tfprotov6.MoveResourceStateResponse{Diagnostics: errDiag("move", fmt.Errorf("the schema-only provider cannot move %s", req.TargetTypeName))}, nil
}

// GenerateResourceConfig is not supported.
func (s *Server) GenerateResourceConfig(context.Context, *tfprotov6.GenerateResourceConfigRequest) (*tfprotov6.GenerateResourceConfigResponse, error) {
	return &tfprotov6.GenerateResourceConfigResponse{Diagnostics: errDiag("generate", fmt.Errorf("the schema-only provider cannot generate configuration"))}, nil
}

// ------------------------------------------------------------ data sources

// ValidateDataResourceConfig accepts whatever the schema accepts.
func (s *Server) ValidateDataResourceConfig(context.Context, *tfprotov6.ValidateDataResourceConfigRequest) (*tfprotov6.ValidateDataResourceConfigResponse, error) {
	return &tfprotov6.ValidateDataResourceConfigResponse{}, nil
}

// ReadDataSource computes aws_iam_policy_document like the real provider and
// answers the account/region/partition data sources with fixed values.
func (s *Server) ReadDataSource(_ context.Context, req *tfprotov6.ReadDataSourceRequest) (*tfprotov6.ReadDataSourceResponse, error) {
	ds, ty, err := dataSourceSchema(req.TypeName)
	if err != nil {
		return &tfprotov6.ReadDataSourceResponse{Diagnostics: errDiag("schema", err)}, nil
	}
	cfg, err := decode(req.Config, ty)
	if err != nil {
		return &tfprotov6.ReadDataSourceResponse{Diagnostics: errDiag("config", err)}, nil
	}
	vals, err := s.dataValues(req.TypeName, cfg)
	if err != nil {
		return &tfprotov6.ReadDataSourceResponse{Diagnostics: errDiag(req.TypeName, err)}, nil
	}
	state := fillUnknowns(&ds.Block, setComputed(&ds.Block, cfg, vals), nil)
	dv, err := encode(state, ty)
	if err != nil {
		return &tfprotov6.ReadDataSourceResponse{Diagnostics: errDiag("state", err)}, nil
	}
	return &tfprotov6.ReadDataSourceResponse{State: dv}, nil
}

func (s *Server) dataValues(typeName string, cfg cty.Value) (map[string]cty.Value, error) {
	region := s.regionName()
	switch typeName {
	case "aws_iam_policy_document":
		return PolicyDocument(cfg)
	case "aws_caller_identity":
		return map[string]cty.Value{
			"id": cty.StringVal(Account), "account_id": cty.StringVal(Account),
			"arn":     cty.StringVal("arn:aws:iam::" + Account + ":user/offline-plan"),
			"user_id": cty.StringVal("AIDAOFFLINEPLAN000000"),
		}, nil
	case "aws_region":
		r := region
		if v := cfg.GetAttr("region"); v.IsKnown() && !v.IsNull() {
			r = v.AsString()
		}
		return map[string]cty.Value{
			"id": cty.StringVal(r), "name": cty.StringVal(r), "region": cty.StringVal(r),
			"endpoint":    cty.StringVal("ec2." + r + ".amazonaws.com"),
			"description": cty.StringVal(r),
		}, nil
	case "aws_partition":
		return map[string]cty.Value{
			"id": cty.StringVal("aws"), "partition": cty.StringVal("aws"),
			"dns_suffix": cty.StringVal("amazonaws.com"), "reverse_dns_prefix": cty.StringVal("com.amazonaws"),
		}, nil
	}
	return map[string]cty.Value{}, nil
}

// -------------------------------------------------------- unsupported RPCs

// CallFunction: the provider's functions are not offered.
func (s *Server) CallFunction(context.Context, *tfprotov6.CallFunctionRequest) (*tfprotov6.CallFunctionResponse, error) {
	return &tfprotov6.CallFunctionResponse{Error: &tfprotov6.FunctionError{Text: "the schema-only provider has no functions"}}, nil
}

// GetFunctions reports none.
func (s *Server) GetFunctions(context.Context, *tfprotov6.GetFunctionsRequest) (*tfprotov6.GetFunctionsResponse, error) {
	return &tfprotov6.GetFunctionsResponse{Functions: map[string]*tfprotov6.Function{}}, nil
}

// ValidateEphemeralResourceConfig accepts nothing: no ephemeral resources are reported.
func (s *Server) ValidateEphemeralResourceConfig(context.Context, *tfprotov6.ValidateEphemeralResourceConfigRequest) (*tfprotov6.ValidateEphemeralResourceConfigResponse, error) {
	return &tfprotov6.ValidateEphemeralResourceConfigResponse{}, nil
}

// OpenEphemeralResource is not supported.
func (s *Server) OpenEphemeralResource(context.Context, *tfprotov6.OpenEphemeralResourceRequest) (*tfprotov6.OpenEphemeralResourceResponse, error) {
	return &tfprotov6.OpenEphemeralResourceResponse{Diagnostics: errDiag("ephemeral", fmt.Errorf("not supported offline"))}, nil
}

// RenewEphemeralResource is not supported.
func (s *Server) RenewEphemeralResource(context.Context, *tfprotov6.RenewEphemeralResourceRequest) (*tfprotov6.RenewEphemeralResourceResponse, error) {
	return &tfprotov6.RenewEphemeralResourceResponse{}, nil
}

// CloseEphemeralResource is not supported.
func (s *Server) CloseEphemeralResource(context.Context, *tfprotov6.CloseEphemeralResourceRequest) (*tfprotov6.CloseEphemeralResourceResponse, error) {
	return &tfprotov6.CloseEphemeralResourceResponse{}, nil
}
