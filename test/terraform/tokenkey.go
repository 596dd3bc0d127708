package terraform

import (
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/commitcollect/backend/model"
)

// TokenKeyRef is how the commitcollect module names the KMS key sealing
// Strava tokens (model/secrets/kms).
const TokenKeyRef = "local.token_kms_key_arn"

// TokenKeyUsers are the functions that seal or open Strava tokens: the api
// (OAuth callback, account deletion) and the worker (refresh). The projector
// never sees a token and must not hold the grant (Grants enforces that).
var TokenKeyUsers = []string{"api", "worker"}

// TokenKeyConditions are the conditions every grant on the token key must
// carry, as test → variable → values: exactly the encryption context the
// code sends (model.SecretContext.Map), and no kms:ViaService (the Lambdas
// call KMS directly, so only a service acting for the role would set it).
var TokenKeyConditions = map[string]map[string][]string{
	"StringEquals":              {"kms:EncryptionContext:purpose": {model.PurposeStravaTokens}},
	"ForAllValues:StringEquals": {"kms:EncryptionContextKeys": {"purpose", "userId"}},
	"Null":                      {"kms:EncryptionContext:userId": {"false"}, "kms:ViaService": {"true"}},
}

// checkTokenKey: the key rotates when the module creates it, the grants to
// TokenKeyUsers carry TokenKeyConditions, and exactly those functions get
// CC_TOKEN_KMS_KEY (through local.tokens_env).
func checkTokenKey(v *violations, cc *Module) {
	for _, k := range cc.Resources("aws_kms_key") {
		if a := attr(k, "enable_key_rotation"); a == nil || cc.Text(a.Expr.Range()) != "true" {
			v.add(k.DefRange(), "aws_kms_key.%s: enable_key_rotation must be true", k.Labels[1])
		}
	}
	if env := cc.Local("tokens_env"); env == nil || !strings.Contains(strings.ReplaceAll(cc.Text(env.Range()), " ", ""), "CC_TOKEN_KMS_KEY="+TokenKeyRef) {
		v.add(hcl.Range{Filename: cc.Dir}, "local.tokens_env must set CC_TOKEN_KMS_KEY = %s", TokenKeyRef)
	}
	for _, fn := range Functions {
		mods := cc.Blocks("module", fn)
		if len(mods) != 1 {
			continue
		}
		e := attr(mods[0], "environment")
		has := e != nil && strings.Contains(cc.Text(e.Expr.Range()), "local.tokens_env")
		if want := slices.Contains(TokenKeyUsers, fn); has != want {
			v.add(mods[0].DefRange(), "module %s: gets CC_TOKEN_KMS_KEY (local.tokens_env) = %v, want %v", fn, has, want)
		}
	}
	for _, fn := range TokenKeyUsers {
		docs := cc.Blocks("data", "aws_iam_policy_document", fn)
		if len(docs) != 1 {
			continue
		}
		for _, s := range tokenKeyStatements(cc, docs[0]) {
			got := map[string]map[string][]string{}
			for _, c := range child(s, "condition") {
				var test, variable string
				var values []string
				for name, dst := range map[string]*string{"test": &test, "variable": &variable} {
					if a := attr(c, name); a != nil {
						if val, err := literal(a.Expr); err == nil {
							*dst = val.AsString()
						}
					}
				}
				if a := attr(c, "values"); a != nil {
					if val, err := literal(a.Expr); err == nil {
						values, _ = stringList(val)
					}
				}
				if got[test] == nil {
					got[test] = map[string][]string{}
				}
				got[test][variable] = sorted(append(got[test][variable], values...))
			}
			for test, vars := range TokenKeyConditions {
				for variable, want := range vars {
					if g := got[test][variable]; !slices.Equal(g, sorted(want)) {
						v.add(s.DefRange(), "%s policy on %s: condition %s %s = %v, want %v", fn, TokenKeyRef, test, variable, g, sorted(want))
					}
				}
			}
		}
	}
}

// tokenKeyStatements are the statements of doc granting on the token key.
func tokenKeyStatements(m *Module, doc *hclsyntax.Block) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, s := range child(doc, "statement") {
		if r := attr(s, "resources"); r != nil && strings.Contains(m.Text(r.Expr.Range()), TokenKeyRef) {
			out = append(out, s)
		}
	}
	return out
}
