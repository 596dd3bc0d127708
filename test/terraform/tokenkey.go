package terraform

import (
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/commitcollect/backend/model"
)

// TokenKeyEnv is the environment variable naming the KMS key that seals
// Strava tokens (model/secrets/kms; handlers/config reads it).
const TokenKeyEnv = "CC_TOKEN_KMS_KEY"

// TokenKeyUsers are the functions that seal or open Strava tokens: the api
// (OAuth callback, account deletion) and the worker (refresh). The projector
// never sees a token and must hold neither the key's name nor a grant on it.
var TokenKeyUsers = []string{"api", "worker"}

// TokenKeyActions are the only actions granted on the token key.
var TokenKeyActions = []string{"kms:Decrypt", "kms:GenerateDataKey"}

// TokenKeyConditions are the conditions every grant on the token key must
// carry, as test → variable → values: exactly the encryption context the
// code sends (secrets.Context.Map), and no kms:ViaService (the Lambdas
// call KMS directly, so only a service acting for the role would set it).
var TokenKeyConditions = map[string]map[string][]string{
	"StringEquals":              {"kms:EncryptionContext:purpose": {model.PurposeStravaTokens}},
	"ForAllValues:StringEquals": {"kms:EncryptionContextKeys": {"purpose", "userId"}},
	"Null":                      {"kms:EncryptionContext:userId": {"false"}, "kms:ViaService": {"true"}},
}

// checkTokenKey reads the plan: every KMS key of the configuration rotates;
// exactly TokenKeyUsers get TokenKeyEnv, all the same key; their roles grant
// TokenKeyActions on it, nothing more, each statement with exactly
// TokenKeyConditions; no other role names the key.
func checkTokenKey(d *Deployed, add addFunc) {
	for _, k := range d.Of("aws_kms_key") {
		if k.Values["enable_key_rotation"] != true {
			add("%s: enable_key_rotation must be true", k.Address)
		}
	}
	key := ""
	for role, f := range d.Functions {
		got, has := EnvOf(f)[TokenKeyEnv]
		if want := slices.Contains(TokenKeyUsers, role); has != want {
			add("function %s: has %s = %v, want %v (only %v seal or open Strava tokens)", role, TokenKeyEnv, has, want, TokenKeyUsers)
		}
		if !has {
			continue
		}
		if key != "" && got != key {
			add("function %s: %s = %q, another function seals with %q", role, TokenKeyEnv, got, key)
		}
		key = got
	}
	if key == "" {
		add("no function has %s: Strava tokens would not be sealed with KMS", TokenKeyEnv)
		return
	}
	pols, err := d.RolePolicies()
	if err != nil {
		return // reported by checkRolesAndPolicies
	}
	for _, role := range FunctionRoles {
		var actions []string
		for _, p := range pols[role] {
			for _, st := range p.Statement {
				if st.Effect != "Allow" || !slices.ContainsFunc(st.Resource, func(r string) bool { return iamPattern(r).MatchString(key) }) {
					continue
				}
				if !slices.Contains(TokenKeyUsers, role) {
					add("%s policy statement %q: grants %v on the token key %s; only %v may use it", role, st.Sid, []string(st.Action), key, TokenKeyUsers)
					continue
				}
				actions = append(actions, st.Action...)
				checkConditions(role, st, add)
			}
		}
		if !slices.Contains(TokenKeyUsers, role) {
			continue
		}
		sort.Strings(actions)
		if actions = slices.Compact(actions); !slices.Equal(actions, TokenKeyActions) {
			add("%s policy on the token key %s: got %v, want %v", role, key, actions, TokenKeyActions)
		}
	}
}

// checkConditions requires st's conditions to be exactly TokenKeyConditions.
func checkConditions(role string, st PolicyStatement, add addFunc) {
	for test, vars := range TokenKeyConditions {
		for variable, want := range vars {
			got := slices.Clone([]string(st.Condition[test][variable]))
			sort.Strings(got)
			want = slices.Sorted(slices.Values(want))
			if !slices.Equal(got, want) {
				add("%s policy statement %q on the token key: condition %s %s = %v, want %v", role, st.Sid, test, variable, got, want)
			}
		}
	}
	for test, vars := range st.Condition {
		for variable := range vars {
			if _, ok := TokenKeyConditions[test][variable]; !ok {
				add("%s policy statement %q on the token key: unexpected condition %s %s (%s)", role, st.Sid, test, variable,
					strings.Join(st.Condition[test][variable], ","))
			}
		}
	}
}

// iamPattern turns an IAM resource pattern (* and ?) into a regexp.
func iamPattern(p string) *regexp.Regexp {
	q := regexp.QuoteMeta(p)
	q = strings.ReplaceAll(q, `\*`, ".*")
	q = strings.ReplaceAll(q, `\?`, ".")
	return regexp.MustCompile("^" + q + "$")
}
