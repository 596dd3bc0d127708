# Strava's deliveries: an HTTP API of their own, apart from the public one
# (main.tf: the BFF, OAuth, the bare /webhooks/strava). Its endpoint is
# registered with Strava (output webhook_callback_url) and is published
# nowhere else, and its stage's throttle is the webhook's budget, sized for
# the webhook peak: no flood of the public API reaches it. Its routes are
# /webhooks/strava/{secret}: the callback's secret segment is checked by the
# api Lambda (CC_WEBHOOK_PATH_SECRET, the current segment and, while a new
# callback is registered, the previous one) and is never in a route key, so
# never in an access log, a metric or an alarm; a wrong segment is a 404.
#
# Rotating the segment: set strava.previous_callback_path_segment to the
# current one and callback_path_segment to a new one, apply (both are
# served), delete the push subscription and create it at the new
# webhook_callback_url (Strava allows one per application), set
# strava.subscription_id to the new id, apply, then `make readmit
# ARGS="-subscription <new id>"` for the events the webhook dropped in
# between (the webhook_events_dropped alarm fires meanwhile), and finally
# unset previous_callback_path_segment.
locals {
  webhook_path    = "/webhooks/strava/{secret}"
  webhook_routes  = ["GET ${local.webhook_path}", "POST ${local.webhook_path}"]
  webhook_secrets = compact([var.strava.callback_path_segment, var.strava.previous_callback_path_segment])
}

resource "aws_apigatewayv2_api" "webhook" {
  name          = "${local.name}-webhook"
  protocol_type = "HTTP"
  description   = "CommitCollect: Strava's webhook deliveries, apart from the public API."
  tags          = var.tags
}

resource "aws_apigatewayv2_integration" "webhook" {
  api_id                 = aws_apigatewayv2_api.webhook.id
  integration_type       = "AWS_PROXY"
  integration_uri        = module.api.invoke_arn
  payload_format_version = "2.0"
  timeout_milliseconds   = 29000
}

resource "aws_apigatewayv2_route" "webhook" {
  for_each = toset(local.webhook_routes)

  api_id    = aws_apigatewayv2_api.webhook.id
  route_key = each.value
  target    = "integrations/${aws_apigatewayv2_integration.webhook.id}"
}

resource "aws_cloudwatch_log_group" "webhook_access" {
  name              = "/aws/apigateway/${local.name}-webhook"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_apigatewayv2_stage" "webhook" {
  api_id      = aws_apigatewayv2_api.webhook.id
  name        = "$default"
  auto_deploy = true

  default_route_settings {
    throttling_rate_limit  = var.api.webhook_rate_limit
    throttling_burst_limit = var.api.webhook_burst_limit
  }

  # The route key is the template (/webhooks/strava/{secret}); the path,
  # which holds the segment, is never logged.
  access_log_settings {
    destination_arn = aws_cloudwatch_log_group.webhook_access.arn
    format = jsonencode({
      requestId      = "$context.requestId"
      routeKey       = "$context.routeKey"
      status         = "$context.status"
      latencyMs      = "$context.responseLatency"
      integrationErr = "$context.integrationErrorMessage"
      sourceIp       = "$context.identity.sourceIp"
    })
  }

  tags = var.tags
}

resource "aws_lambda_permission" "webhook_api" {
  statement_id  = "AllowWebhookApiInvoke"
  action        = "lambda:InvokeFunction"
  function_name = module.api.function_name
  principal     = "apigateway.amazonaws.com"
  source_arn    = "${aws_apigatewayv2_api.webhook.execution_arn}/*/*"
}

# Strava's deliveries failing (5xx: Strava gives up after three attempts),
# refused or throttled (4xx: 429 when the budget is too low; 404s are wrong
# segments, a guesser at the endpoint), or slow (Strava waits 2 s).
resource "aws_cloudwatch_metric_alarm" "webhook" {
  for_each = {
    "5xx"   = { statistic = "Sum", threshold = 0, description = "The webhook API answered 5xx: Strava gives up on an event after three attempts. Once fixed, make syncs ARGS=\"-reconcile-since <start, RFC3339>\" re-lists what Strava gave up on." }
    "4xx"   = { statistic = "Sum", threshold = var.alarms.webhook_4xx, description = "The webhook API answered 4xx: 429 is a throttled delivery (check api.webhook_rate_limit; Strava retries at most 3 times, then make syncs ARGS=\"-reconcile-since <start>\"), 404 a path segment that is not ours (someone guessing at the endpoint). The access log has each answer's status." }
    latency = { statistic = "Maximum", threshold = var.alarms.api_latency_ms, description = "The webhook API's slowest answer exceeded the threshold (Strava waits 2 s)." }
  }

  alarm_name          = "${local.name}-webhook-${lower(each.key)}"
  alarm_description   = each.value.description
  namespace           = "AWS/ApiGateway"
  metric_name         = each.key == "latency" ? "Latency" : each.key
  dimensions          = { ApiId = aws_apigatewayv2_api.webhook.id }
  statistic           = each.value.statistic
  period              = var.alarms.period_s
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = each.value.threshold
  treat_missing_data  = "notBreaching"
  alarm_actions       = [var.alarms.topic_arn]
  ok_actions          = [var.alarms.topic_arn]
  tags                = var.tags
}

# Events dropped for a subscription the webhook does not accept (the api's
# EMF metric, handlers/ingest/intake): a new subscription before
# strava.subscription_id names it, or someone guessing the id. They are
# answered, recorded and kept for seven days, never run until re-admitted.
resource "aws_cloudwatch_metric_alarm" "webhook_events_dropped" {
  alarm_name          = "${local.name}-webhook-events-dropped"
  alarm_description   = "The webhook dropped events of a push subscription it does not accept. After a re-registration: set strava.subscription_id to the new id, apply, then make readmit ARGS=\"-subscription <id>\" runs the events dropped meanwhile. Otherwise someone is guessing the id: nothing runs, nothing to do."
  namespace           = "CommitCollect/Webhook"
  metric_name         = "WebhookEventsDropped"
  dimensions          = { Service = "api" }
  statistic           = "Sum"
  period              = var.alarms.period_s
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = [var.alarms.topic_arn]
  ok_actions          = [var.alarms.topic_arn]
  tags                = var.tags
}
