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

// BareWebhookRoutes are the webhook's routes on the public API, without
// the secret segment: anyone can reach them, so they get a low budget of
// their own.
var BareWebhookRoutes = []string{"GET " + intake.WebhookPath, "POST " + intake.WebhookPath}

// WebhookRoutes are the routes Strava calls, on the webhook's own API:
// under /webhooks/strava/{secret}, the segment checked by the api Lambda
// (CC_WEBHOOK_PATH_SECRET), never in a route key.
var WebhookRoutes = []string{"GET " + intake.CallbackPath("{secret}"), "POST " + intake.CallbackPath("{secret}")}

// pathSecrets are the api Lambda's webhook path secrets (nil without one).
func pathSecrets(d *Deployed) []string {
	api, ok := d.Functions["api"]
	if !ok || EnvOf(api)["CC_WEBHOOK_PATH_SECRET"] == "" {
		return nil
	}
	return strings.Split(EnvOf(api)["CC_WEBHOOK_PATH_SECRET"], ",")
}

// WebhookRoutesOf are WebhookRoutes when the api Lambda has a path secret,
// else nil.
func WebhookRoutesOf(d *Deployed) []string {
	if pathSecrets(d) == nil {
		return nil
	}
	return WebhookRoutes
}

// webhookAPI is the id of the HTTP API that serves WebhookRoutes and
// nothing else ("" when there is none).
func webhookAPI(d *Deployed) string {
	byAPI := map[string][]string{}
	for _, r := range d.Of("aws_apigatewayv2_route") {
		byAPI[r.Str("api_id")] = append(byAPI[r.Str("api_id")], r.Str("route_key"))
	}
	for id, routes := range byAPI {
		slices.Sort(routes)
		if slices.Equal(routes, WebhookRoutes) {
			return id
		}
	}
	return ""
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

// checkAPIThrottling: Strava's deliveries have an HTTP API of their own
// (WebhookRoutes and nothing else), whose stage's budget is not below the
// webhook peak, so no flood of the public API throttles them; no other API
// serves them. On the public API every /auth/* route and the bare webhook
// routes have a budget below the webhook's and the stage default's; every
// burst holds at least a second.
func checkAPIThrottling(d *Deployed, add addFunc) {
	if pathSecrets(d) == nil {
		add("the api Lambda has no CC_WEBHOOK_PATH_SECRET: Strava's deliveries share a path, and its throttle, with anyone's")
	}
	hook := webhookAPI(d)
	if hook == "" {
		add("no HTTP API serves Strava's deliveries (%v) and nothing else: they share a budget with the public routes", WebhookRoutes)
	}
	for _, r := range d.Of("aws_apigatewayv2_route") {
		if r.Str("api_id") != hook && slices.Contains(WebhookRoutes, r.Str("route_key")) {
			add("%s: %s on the public API: a flood of it reaches Strava's deliveries' budget", r.Address, r.Str("route_key"))
		}
	}
	webhookRate := -1.0
	stages := d.Of("aws_apigatewayv2_stage")
	for _, st := range stages {
		def := st.Block("default_route_settings")
		rate, burst := num(def, "throttling_rate_limit"), num(def, "throttling_burst_limit")
		if st.Str("api_id") == hook && hook != "" {
			webhookRate = rate
			if rate < MinWebhookPeakRPS || burst < rate {
				add("%s: the webhook API's throttling %v/s burst %v; want at least %d/s (a million athletes' webhook peak) and a burst of at least the rate",
					st.Address, rate, burst, MinWebhookPeakRPS)
			}
		}
	}
	for _, st := range stages {
		if st.Str("api_id") != hook {
			checkPublicStage(st, webhookRate, add)
		}
	}
	if len(stages) == 0 {
		add("no aws_apigatewayv2_stage")
	}
}

// checkPublicStage: the public API's stage has a positive default budget,
// and its /auth/* and bare webhook routes one of their own below it and
// below the webhook API's.
func checkPublicStage(st Resource, webhookRate float64, add addFunc) {
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

// checkSecretNeverLogged: the webhook's path secrets are in no route key,
// stage (access log format, route settings), alarm, metric filter or
// dashboard, and no access log logs the path ($context.path holds the
// segment): what reaches a log or a metric never names the secret.
func checkSecretNeverLogged(d *Deployed, add addFunc) {
	for _, typ := range []string{"aws_apigatewayv2_route", "aws_apigatewayv2_stage", "aws_cloudwatch_metric_alarm",
		"aws_cloudwatch_log_metric_filter", "aws_cloudwatch_dashboard"} {
		for _, r := range d.Of(typ) {
			b, _ := json.Marshal(r.Values)
			for _, secret := range pathSecrets(d) {
				if strings.Contains(string(b), secret) {
					add("%s holds the webhook's path secret: it reaches logs, metrics or alarms", r.Address)
				}
			}
			if typ == "aws_apigatewayv2_stage" && strings.Contains(string(b), "$context.path") {
				add("%s: the access log logs $context.path, which holds the webhook's path secret", r.Address)
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
