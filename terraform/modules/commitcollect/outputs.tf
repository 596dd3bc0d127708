output "api_url" {
  description = "Base URL of the HTTP API (or public_url when set)."
  value       = local.public_url
}

output "webhook_callback_url" {
  description = "Callback URL to register as the Strava push subscription: the webhook's own API (webhook.tf) under the callback's secret segment."
  value       = "${aws_apigatewayv2_api.webhook.api_endpoint}/webhooks/strava/${var.strava.callback_path_segment}"
  sensitive   = true
}

output "table_names" {
  description = "DynamoDB table names by role (main, sessions, audit, idempotency)."
  value       = module.tables.names
}

output "stream_arn" {
  description = "Stream ARN of the main table (read by the projector)."
  value       = module.tables.stream_arn
}

output "function_names" {
  description = "Lambda function names by role."
  value = {
    api       = module.api.function_name
    worker    = module.worker.function_name
    projector = module.projector.function_name
    sweeper   = module.sweeper.function_name
  }
}

output "dlq_urls" {
  description = "URLs of the worker and projector dead-letter queues (for redrive)."
  value = {
    worker    = aws_sqs_queue.worker_dlq.url
    projector = aws_sqs_queue.projector_dlq.url
  }
}

output "strava_client_id" {
  description = "Strava client id (not a secret), for the push-subscription command."
  value       = var.strava.client_id
}

output "strava_base_url" {
  description = "Strava base URL the functions call."
  value       = var.strava.base_url
}

output "strava_client_secret_param_arn" {
  description = "SSM parameter holding the Strava client secret (a reference, never the value)."
  value       = var.strava.client_secret_param_arn
}

output "strava_verify_token_param_arn" {
  description = "SSM parameter holding the webhook verify token (a reference, never the value)."
  value       = var.strava.verify_token_param_arn
}

output "token_kms_key_arn" {
  description = "KMS key sealing Strava tokens (created here unless token_kms_key_arn was given)."
  value       = local.token_kms_key_arn
}

output "capacity_dashboard_name" {
  description = "CloudWatch dashboard showing DynamoDB requests and capacity units per event beside projector lag, iterator age and errors."
  value       = aws_cloudwatch_dashboard.capacity.dashboard_name
}
