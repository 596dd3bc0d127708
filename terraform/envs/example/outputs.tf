output "api_url" {
  description = "Base URL of the HTTP API."
  value       = module.commitcollect.api_url
}

output "webhook_callback_url" {
  description = "Callback URL of the Strava push subscription."
  value       = module.commitcollect.webhook_callback_url
  sensitive   = true
}

output "table_names" {
  description = "DynamoDB table names by role."
  value       = module.commitcollect.table_names
}

output "stream_arn" {
  description = "Stream ARN of the main table."
  value       = module.commitcollect.stream_arn
}

output "function_names" {
  description = "Lambda function names by role."
  value       = module.commitcollect.function_names
}

output "dlq_urls" {
  description = "Dead-letter queue URLs by role."
  value       = module.commitcollect.dlq_urls
}

output "strava_client_id" {
  description = "Strava client id."
  value       = module.commitcollect.strava_client_id
}

output "strava_base_url" {
  description = "Strava base URL."
  value       = module.commitcollect.strava_base_url
}

output "strava_client_secret_param_arn" {
  description = "SSM parameter ARN of the Strava client secret."
  value       = module.commitcollect.strava_client_secret_param_arn
}

output "strava_verify_token_param_arn" {
  description = "SSM parameter ARN of the webhook verify token."
  value       = module.commitcollect.strava_verify_token_param_arn
}
