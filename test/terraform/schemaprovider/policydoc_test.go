package schemaprovider

import (
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// policyConfig builds an aws_iam_policy_document configuration value of the
// schema's type from statements.
func policyConfig(t *testing.T, version string, stmts ...map[string]cty.Value) cty.Value {
	t.Helper()
	_, ty, err := dataSourceSchema("aws_iam_policy_document")
	if err != nil {
		t.Fatal(err)
	}
	stTy := ty.AttributeType("statement").ElementType()
	var list []cty.Value
	for _, s := range stmts {
		attrs := map[string]cty.Value{}
		for name, at := range stTy.AttributeTypes() {
			if v, ok := s[name]; ok {
				attrs[name] = v
			} else {
				attrs[name] = cty.NullVal(at)
			}
		}
		list = append(list, cty.ObjectVal(attrs))
	}
	attrs := map[string]cty.Value{}
	for name, at := range ty.AttributeTypes() {
		attrs[name] = cty.NullVal(at)
	}
	attrs["statement"] = cty.ListVal(list)
	if version != "" {
		attrs["version"] = cty.StringVal(version)
	}
	return cty.ObjectVal(attrs)
}

func strs(s ...string) cty.Value {
	var vs []cty.Value
	for _, x := range s {
		vs = append(vs, cty.StringVal(x))
	}
	return cty.SetVal(vs)
}

// TestPolicyDocumentRendersLikeTheProvider pins the provider's rendering:
// key order, a single action/resource as a string, longer lists sorted in
// reverse, Effect defaulting to Allow, condition values in their order (one
// as a string), "&{" as "${", principals merged by type and {"*": ["*"]} as
// "*", two-space indentation, and the compact minified_json.
func TestPolicyDocumentRendersLikeTheProvider(t *testing.T) {
	t.Parallel()
	_, ty, _ := dataSourceSchema("aws_iam_policy_document")
	stTy := ty.AttributeType("statement").ElementType()
	condTy := stTy.AttributeType("condition").ElementType()
	cfg := policyConfig(t, "",
		map[string]cty.Value{
			"sid":       cty.StringVal("Table"),
			"actions":   strs("dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem"),
			"resources": strs("arn:aws:dynamodb:r:1:table/T"),
			"condition": cty.SetVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{
				"test": cty.StringVal("StringEquals"), "variable": cty.StringVal("kms:ViaService"),
				"values": cty.ListVal([]cty.Value{cty.StringVal("dynamodb.r.amazonaws.com")}),
			})}),
		},
		map[string]cty.Value{
			"effect":    cty.StringVal("Deny"),
			"actions":   strs("s3:ListBucket"),
			"resources": strs("arn:aws:s3:::b/home/&{aws:username}", "arn:aws:s3:::b"),
			"condition": cty.SetVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{
				"test": cty.StringVal("StringLike"), "variable": cty.StringVal("s3:prefix"),
				"values": cty.ListVal([]cty.Value{cty.StringVal("home/"), cty.StringVal("")}),
			})}),
			"principals": cty.SetVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"type": cty.StringVal("*"), "identifiers": strs("*")})}),
		},
		map[string]cty.Value{
			"actions":    strs("sts:AssumeRole"),
			"principals": cty.SetVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"type": cty.StringVal("Service"), "identifiers": strs("lambda.amazonaws.com")})}),
			"condition":  cty.SetValEmpty(condTy),
		},
	)
	got, err := PolicyDocument(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "Version": "2012-10-17",
  "Statement": [
    {
      "Sid": "Table",
      "Effect": "Allow",
      "Action": [
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:GetItem"
      ],
      "Resource": "arn:aws:dynamodb:r:1:table/T",
      "Condition": {
        "StringEquals": {
          "kms:ViaService": "dynamodb.r.amazonaws.com"
        }
      }
    },
    {
      "Effect": "Deny",
      "Action": "s3:ListBucket",
      "Resource": [
        "arn:aws:s3:::b/home/${aws:username}",
        "arn:aws:s3:::b"
      ],
      "Principal": "*",
      "Condition": {
        "StringLike": {
          "s3:prefix": [
            "home/",
            ""
          ]
        }
      }
    },
    {
      "Effect": "Allow",
      "Action": "sts:AssumeRole",
      "Principal": {
        "Service": "lambda.amazonaws.com"
      }
    }
  ]
}`
	if g := got["json"].AsString(); g != want {
		t.Fatalf("json:\n%s\nwant:\n%s", g, want)
	}
	if g := got["minified_json"].AsString(); g[:60] != `{"Version":"2012-10-17","Statement":[{"Sid":"Table","Effect"` {
		t.Fatalf("minified_json = %s", g)
	}
	if got["id"].AsString() == "" {
		t.Fatal("no id")
	}
}

func TestPolicyDocumentRefusesDuplicateSids(t *testing.T) {
	t.Parallel()
	cfg := policyConfig(t, "",
		map[string]cty.Value{"sid": cty.StringVal("A"), "actions": strs("s3:GetObject")},
		map[string]cty.Value{"sid": cty.StringVal("A"), "actions": strs("s3:PutObject")},
	)
	if _, err := PolicyDocument(cfg); err == nil {
		t.Fatal("duplicate Sid accepted")
	}
}

// TestSchemaLoadsAndConverts: the embedded schema converts to protocol 6,
// with the provider block's arguments added.
func TestSchemaLoadsAndConverts(t *testing.T) {
	t.Parallel()
	resp, err := getProviderSchemaResponse()
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"aws_lambda_function", "aws_dynamodb_table", "aws_lambda_event_source_mapping"} {
		if resp.ResourceSchemas[typ] == nil {
			t.Errorf("resource %s missing", typ)
		}
	}
	if resp.Provider == nil || len(resp.Provider.Block.Attributes) == 0 {
		t.Error("no provider block schema")
	}
}
