output "names" {
  description = "Table names by role (main, sessions, audit, idempotency)."
  value       = { for k, t in aws_dynamodb_table.this : k => t.name }
}

output "arns" {
  description = "Table ARNs by role (main, sessions, audit, idempotency)."
  value       = { for k, t in aws_dynamodb_table.this : k => t.arn }
}

output "stream_arn" {
  description = "Latest stream ARN of the main table (NEW_AND_OLD_IMAGES); the projector reads it."
  value       = aws_dynamodb_table.this["main"].stream_arn
}
