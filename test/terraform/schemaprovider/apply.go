package schemaprovider

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// unknownComputed marks every computed attribute that v leaves null as
// unknown, in the block and every nested block: what a provider that knows
// nothing before the create plans.
func unknownComputed(b *jsonBlock, v cty.Value) cty.Value {
	if v.IsNull() || !v.IsKnown() {
		return v
	}
	ty := v.Type()
	out := map[string]cty.Value{}
	for name := range ty.AttributeTypes() {
		av := v.GetAttr(name)
		if a, ok := b.Attributes[name]; ok {
			if a.Computed && av.IsNull() {
				av = cty.UnknownVal(ty.AttributeType(name))
			}
		} else if bt, ok := b.BlockTypes[name]; ok {
			av = mapElements(av, func(e cty.Value) cty.Value { return unknownComputed(&bt.Block, e) })
		}
		out[name] = av
	}
	return cty.ObjectVal(out)
}

// mapElements applies f to a nested block value: the object itself (single,
// group) or each element of a list, set or map.
func mapElements(v cty.Value, f func(cty.Value) cty.Value) cty.Value {
	if v.IsNull() || !v.IsKnown() {
		return v
	}
	ty := v.Type()
	switch {
	case ty.IsObjectType():
		return f(v)
	case ty.IsListType(), ty.IsSetType(), ty.IsMapType():
		if v.LengthInt() == 0 {
			return v
		}
		elems := map[string]cty.Value{}
		var list []cty.Value
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			if ty.IsMapType() {
				elems[k.AsString()] = f(e)
			} else {
				list = append(list, f(e))
			}
		}
		switch {
		case ty.IsListType():
			return cty.ListVal(list)
		case ty.IsSetType():
			return cty.SetVal(list)
		}
		return cty.MapVal(elems)
	}
	return v
}

// setComputed returns cfg with each computed attribute that cfg leaves null
// set to vals[name] (converted to the attribute's type) when given.
func setComputed(b *jsonBlock, cfg cty.Value, vals map[string]cty.Value) cty.Value {
	ty := cfg.Type()
	out := map[string]cty.Value{}
	for name := range ty.AttributeTypes() {
		var av cty.Value
		if cfg.IsNull() {
			av = cty.NullVal(ty.AttributeType(name))
		} else {
			av = cfg.GetAttr(name)
		}
		if a, ok := b.Attributes[name]; ok && a.Computed && av.IsNull() {
			if want, ok := vals[name]; ok {
				if cv, err := convert.Convert(want, ty.AttributeType(name)); err == nil {
					av = cv
				}
			} else {
				av = cty.UnknownVal(ty.AttributeType(name)) // filled with a zero value next
			}
		}
		out[name] = av
	}
	return cty.ObjectVal(out)
}

// fillUnknowns replaces the unknowns of a planned state: top-level
// attributes from top when it has them (converted to their type), anything
// else with a zero value ("" for strings, 0, false, empty collections).
func fillUnknowns(b *jsonBlock, v cty.Value, top map[string]cty.Value) cty.Value {
	ty := v.Type()
	out := map[string]cty.Value{}
	for name := range ty.AttributeTypes() {
		av := v.GetAttr(name)
		if _, isAttr := b.Attributes[name]; isAttr && !av.IsKnown() {
			if want, ok := top[name]; ok {
				if cv, err := convert.Convert(want, ty.AttributeType(name)); err == nil {
					av = cv
				}
			}
		}
		out[name] = av
	}
	filled, _ := cty.TransformWithTransformer(cty.ObjectVal(out), zeroUnknowns{})
	return filled
}

// zeroUnknowns is a cty.Transformer replacing every unknown with a zero value.
type zeroUnknowns struct{}

func (zeroUnknowns) Enter(_ cty.Path, v cty.Value) (cty.Value, error) {
	if !v.IsKnown() {
		return zero(v.Type()), nil
	}
	return v, nil
}

func (zeroUnknowns) Exit(_ cty.Path, v cty.Value) (cty.Value, error) { return v, nil }

func zero(ty cty.Type) cty.Value {
	switch {
	case ty == cty.String:
		return cty.StringVal("")
	case ty == cty.Number:
		return cty.Zero
	case ty == cty.Bool:
		return cty.False
	case ty.IsListType():
		return cty.ListValEmpty(ty.ElementType())
	case ty.IsSetType():
		return cty.SetValEmpty(ty.ElementType())
	case ty.IsMapType():
		return cty.MapValEmpty(ty.ElementType())
	}
	return cty.NullVal(ty)
}

// derived computes what AWS would return for the identifiers of a created
// resource (ARNs, URLs, ids), from its planned name, the configured region
// and Account. Types not listed get an arn of AWS's usual shape
// (arn:aws:<service>:<region>:<account>:<resource>/<name>) and an id equal to
// their name, or to a hash of their planned state when they have none.
func derived(typeName string, planned cty.Value, region string) map[string]cty.Value {
	str := func(name string) string {
		if !planned.Type().HasAttribute(name) {
			return ""
		}
		v := planned.GetAttr(name)
		if !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
			return ""
		}
		return v.AsString()
	}
	sum := sha256.Sum256([]byte(typeName + "\n" + planned.GoString()))
	hash := hex.EncodeToString(sum[:])
	name := str("name")
	for _, n := range []string{"function_name", "alarm_name", "name_prefix"} {
		if name == "" {
			name = str(n)
		}
	}
	regional := func(service, resource string) string {
		return fmt.Sprintf("arn:aws:%s:%s:%s:%s", service, region, Account, resource)
	}
	out := map[string]cty.Value{}
	set := func(k, v string) { out[k] = cty.StringVal(v) }
	switch typeName {
	case "aws_dynamodb_table":
		arn := regional("dynamodb", "table/"+name)
		set("arn", arn)
		set("id", name)
		if planned.GetAttr("stream_enabled").RawEquals(cty.True) {
			set("stream_label", "2026-01-01T00:00:00.000")
			set("stream_arn", arn+"/stream/2026-01-01T00:00:00.000")
		}
	case "aws_lambda_function":
		arn := regional("lambda", "function:"+name)
		set("arn", arn)
		set("id", name)
		set("qualified_arn", arn+":$LATEST")
		set("version", "$LATEST")
		set("invoke_arn", fmt.Sprintf("arn:aws:apigateway:%s:lambda:path/2015-03-31/functions/%s/invocations", region, arn))
		set("qualified_invoke_arn", fmt.Sprintf("arn:aws:apigateway:%s:lambda:path/2015-03-31/functions/%s:$LATEST/invocations", region, arn))
	case "aws_iam_role":
		set("arn", fmt.Sprintf("arn:aws:iam::%s:role%s%s", Account, pathOr(str("path")), name))
		set("id", name)
		set("unique_id", "AROA"+strings.ToUpper(hash[:17]))
	case "aws_iam_policy":
		set("arn", fmt.Sprintf("arn:aws:iam::%s:policy%s%s", Account, pathOr(str("path")), name))
		set("id", fmt.Sprintf("arn:aws:iam::%s:policy%s%s", Account, pathOr(str("path")), name))
	case "aws_iam_role_policy":
		set("id", str("role")+":"+name)
	case "aws_sqs_queue":
		url := fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", region, Account, name)
		set("arn", regional("sqs", name))
		set("url", url)
		set("id", url)
	case "aws_sns_topic":
		set("arn", regional("sns", name))
		set("id", regional("sns", name))
	case "aws_cloudwatch_log_group":
		set("arn", regional("logs", "log-group:"+name))
		set("id", name)
	case "aws_cloudwatch_metric_alarm":
		set("arn", regional("cloudwatch", "alarm:"+name))
		set("id", name)
	case "aws_cloudwatch_event_rule":
		set("arn", regional("events", "rule/"+name))
		set("id", name)
	case "aws_scheduler_schedule":
		group := str("group_name")
		if group == "" {
			group = "default"
		}
		set("arn", regional("scheduler", "schedule/"+group+"/"+name))
		set("id", group+"/"+name)
	case "aws_kms_key":
		id := hash[:8] + "-" + hash[8:12] + "-" + hash[12:16] + "-" + hash[16:20] + "-" + hash[20:32]
		set("arn", regional("kms", "key/"+id))
		set("key_id", id)
		set("id", id)
	case "aws_kms_alias":
		set("arn", regional("kms", name))
		set("id", name)
	case "aws_apigatewayv2_api":
		id := hash[:10]
		set("id", id)
		set("api_endpoint", fmt.Sprintf("https://%s.execute-api.%s.amazonaws.com", id, region))
		set("execution_arn", regional("execute-api", id))
		set("arn", fmt.Sprintf("arn:aws:apigateway:%s::/apis/%s", region, id))
	case "aws_apigatewayv2_stage":
		api := str("api_id")
		set("id", name)
		set("invoke_url", fmt.Sprintf("https://%s.execute-api.%s.amazonaws.com/", api, region))
		set("execution_arn", regional("execute-api", api+"/"+name))
		set("arn", fmt.Sprintf("arn:aws:apigateway:%s::/apis/%s/stages/%s", region, api, name))
	case "aws_lambda_event_source_mapping":
		uuid := hash[:8] + "-" + hash[8:12] + "-" + hash[12:16] + "-" + hash[16:20] + "-" + hash[20:32]
		set("uuid", uuid)
		set("id", uuid)
		set("arn", regional("lambda", "event-source-mapping:"+uuid))
		set("state", "Enabled")
	default:
		service := strings.SplitN(strings.TrimPrefix(typeName, "aws_"), "_", 2)[0]
		id := name
		if id == "" {
			id = hash[:16]
		}
		set("id", id)
		set("arn", regional(service, strings.TrimPrefix(typeName, "aws_"+service+"_")+"/"+id))
	}
	return out
}

func pathOr(p string) string {
	if p == "" {
		return "/"
	}
	return p
}
