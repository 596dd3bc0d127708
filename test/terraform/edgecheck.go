package terraform

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/commitcollect/backend/handlers/ingest/intake"
)

// MinWebhookPeakRPS is the floor of the webhook route's steady rate limit:
// the estimate of a million athletes' evening peak of webhooks (10x the
// mean). Below it Strava's deliveries are throttled (429) at the peak; the
// module's default (500/s) keeps ~4x headroom.
const MinWebhookPeakRPS = 130

// BareWebhookRoutes are the webhook's routes without the secret segment:
// anyone can reach them, so they get a low budget of their own.
var BareWebhookRoutes = []string{"GET " + intake.WebhookPath, "POST " + intake.WebhookPath}

// WebhookRoutesOf are the routes Strava calls, under the api Lambda's path
// secret (CC_WEBHOOK_PATH_SECRET); they get their own budget. Nil when the
// api has no secret.
func WebhookRoutesOf(d *Deployed) []string {
	api, ok := d.Functions["api"]
	if !ok {
		return nil
	}
	secret := EnvOf(api)["CC_WEBHOOK_PATH_SECRET"]
	if secret == "" {
		return nil
	}
	return []string{"GET " + intake.CallbackPath(secret), "POST " + intake.CallbackPath(secret)}
}

// num reads a number attribute of a block (-1 when absent).
func num(s map[string]any, k string) float64 {
	switch v := s[k].(type) {
	case float64:
		return v
	case json.Number:
		f, _ := v.Float64()
		return f
	}
	return -1
}

// checkAPIThrottling: the stage throttles by route. The webhook routes
// (under the path secret) have their own budget, not below the webhook peak,
// with detailed metrics (its 4xx alarm is per route); every /auth/* route
// and the bare webhook routes have a budget below the webhook's and the
// stage default's; every burst holds at least a second.
func checkAPIThrottling(d *Deployed, add addFunc) {
	stages := d.Of("aws_apigatewayv2_stage")
	if len(stages) == 0 {
		add("no aws_apigatewayv2_stage")
	}
	for _, st := range stages {
		def := st.Block("default_route_settings")
		defRate, defBurst := num(def, "throttling_rate_limit"), num(def, "throttling_burst_limit")
		if defRate <= 0 || defBurst < defRate {
			add("%s: default throttling %v/s burst %v; want a positive rate and a burst of at least the rate", st.Address, defRate, defBurst)
		}
		routes := map[string]map[string]any{}
		list, _ := st.Values["route_settings"].([]any)
		for _, r := range list {
			if m, ok := r.(map[string]any); ok {
				routes[m["route_key"].(string)] = m
			}
		}
		webhookRate := -1.0
		webhooks := WebhookRoutesOf(d)
		if len(webhooks) == 0 {
			add("%s: the api Lambda has no CC_WEBHOOK_PATH_SECRET: Strava's deliveries share a path, and its throttle, with anyone's", st.Address)
		}
		for _, key := range webhooks {
			r, ok := routes[key]
			rate, burst := num(r, "throttling_rate_limit"), num(r, "throttling_burst_limit")
			switch {
			case !ok:
				add("%s: no route_settings for %s: Strava's deliveries share the stage's budget with every other route", st.Address, key)
			case rate < MinWebhookPeakRPS || burst < rate:
				add("%s: %s throttling %v/s burst %v; want at least %d/s (a million athletes' webhook peak) and a burst of at least the rate",
					st.Address, key, rate, burst, MinWebhookPeakRPS)
			}
			if strings.HasPrefix(key, "POST ") {
				webhookRate = rate
				if ok && r["detailed_metrics_enabled"] != true {
					add("%s: %s needs detailed_metrics_enabled (its 4xx alarm reads the route's metrics)", st.Address, key)
				}
			}
		}
		for _, key := range Routes() {
			if !strings.Contains(key, " /auth/") && !slices.Contains(BareWebhookRoutes, key) {
				continue
			}
			r, ok := routes[key]
			rate, burst := num(r, "throttling_rate_limit"), num(r, "throttling_burst_limit")
			if !ok || rate <= 0 || burst < rate || rate >= defRate || rate >= webhookRate {
				add("%s: %s throttling %v/s burst %v (set: %v); want its own budget, below the stage default (%v/s) and the webhook's (%v/s)",
					st.Address, key, rate, burst, ok, defRate, webhookRate)
			}
		}
	}
}

// checkWorkerConcurrency: the worker has reserved concurrency, so a flood
// of events cannot take the account's Lambda concurrency from the api and
// the projector.
func checkWorkerConcurrency(d *Deployed, add addFunc) {
	w, ok := d.Functions["worker"]
	if !ok {
		return
	}
	if n := num(w.Values, "reserved_concurrent_executions"); n <= 0 {
		add("function worker: reserved_concurrent_executions = %v; want a positive reservation (a flood would take the account's concurrency)", n)
	}
}

// TokenKeyUseActions are the KMS actions that use a key's material (or
// hand its use on): only TokenKeyUsers' roles may hold them on the token key.
var TokenKeyUseActions = []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:CreateGrant"}

// checkTokenKeyPolicy: every KMS key created here has a key policy (not the
// default, which lets any principal with an IAM grant use it) in which only
// TokenKeyUsers' roles may use the key, under exactly the conditions of
// their IAM policies (TokenKeyConditions), and some principal may manage it
// (PutKeyPolicy, ScheduleKeyDeletion) without using it.
func checkTokenKeyPolicy(d *Deployed, add addFunc) {
	users := map[string]bool{}
	for _, role := range TokenKeyUsers {
		if f, ok := d.Functions[role]; ok {
			users[f.Str("role")] = true
		}
	}
	for _, k := range d.Of("aws_kms_key") {
		var p Policy
		if err := json.Unmarshal([]byte(k.Str("policy")), &p); err != nil || len(p.Statement) == 0 {
			add("%s: no key policy: the default lets any principal of the account with an IAM grant use the key", k.Address)
			continue
		}
		used, managed := map[string]bool{}, false
		for _, st := range p.Statement {
			if st.Effect != "Allow" {
				continue
			}
			principals := principalARNs(st.Principal)
			if uses(st.Action) {
				// The key policy grants no more than the roles' IAM
				// policies: the same conditions.
				checkConditions(k.Address+" key", st, add)
				for _, pr := range principals {
					if !users[pr] {
						add("%s: statement %q lets %s use the token key; only the roles of %v may", k.Address, st.Sid, pr, TokenKeyUsers)
					}
					used[pr] = true
				}
			}
			if actionMatches(st.Action, "kms:PutKeyPolicy") && actionMatches(st.Action, "kms:ScheduleKeyDeletion") && !uses(st.Action) {
				managed = true
			}
		}
		for arn := range users {
			if !used[arn] {
				add("%s: the key policy does not let %s seal and open tokens", k.Address, arn)
			}
		}
		if !managed {
			add("%s: no statement lets administrators manage the key (PutKeyPolicy, ScheduleKeyDeletion) without using it", k.Address)
		}
	}
}

// uses says whether actions include one of TokenKeyUseActions (wildcards
// included).
func uses(actions []string) bool {
	return slices.ContainsFunc(TokenKeyUseActions, func(a string) bool { return actionMatches(actions, a) })
}

// actionMatches says whether one of actions (IAM patterns) matches action.
func actionMatches(actions []string, action string) bool {
	return slices.ContainsFunc(actions, func(p string) bool { return iamPattern(strings.ToLower(p)).MatchString(strings.ToLower(action)) })
}

// principalARNs lists a statement's principals: "*" for everyone, else the
// AWS principals' ARNs.
func principalARNs(raw json.RawMessage) []string {
	var star string
	if json.Unmarshal(raw, &star) == nil {
		return []string{star}
	}
	var m map[string]StringOrList
	if json.Unmarshal(raw, &m) != nil {
		return []string{string(raw)}
	}
	var out []string
	for typ, ids := range m {
		if typ != "AWS" {
			out = append(out, typ+":"+strings.Join(ids, ","))
			continue
		}
		out = append(out, ids...)
	}
	return out
}
