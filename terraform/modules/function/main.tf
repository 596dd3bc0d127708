# One Go Lambda (provided.al2023, arm64, handler "bootstrap") with its log
# group, its own role and least-privilege inline policy, and errors/throttles
# alarms. The caller writes the policy; this module only adds log writes.

resource "aws_cloudwatch_log_group" "this" {
  name              = "/aws/lambda/${var.name}"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

data "aws_iam_policy_document" "assume" {
  statement {
    sid     = "LambdaAssumeRole"
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "logs" {
  statement {
    sid       = "WriteOwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.this.arn}:*"]
  }
}

resource "aws_iam_role" "this" {
  name               = var.name
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = var.tags
}

resource "aws_iam_role_policy" "logs" {
  name   = "logs"
  role   = aws_iam_role.this.id
  policy = data.aws_iam_policy_document.logs.json
}

resource "aws_iam_role_policy" "this" {
  name   = "least-privilege"
  role   = aws_iam_role.this.id
  policy = var.policy_json
}

resource "aws_lambda_function" "this" {
  function_name = var.name
  description   = var.description
  role          = aws_iam_role.this.arn

  runtime       = "provided.al2023"
  architectures = ["arm64"]
  handler       = "bootstrap"

  filename         = var.zip_path
  source_code_hash = filebase64sha256(var.zip_path)

  memory_size                    = var.settings.memory_mb
  timeout                        = var.settings.timeout_s
  reserved_concurrent_executions = var.settings.reserved_concurrency

  environment {
    variables = merge(var.environment, { CC_LOG_LEVEL = var.log_level })
  }

  # JSON logs: Lambda filters application logs below application_log_level
  # (INFO when unset), so it follows the code's CC_LOG_LEVEL or debug logs
  # never arrive.
  logging_config {
    log_format            = "JSON"
    log_group             = aws_cloudwatch_log_group.this.name
    application_log_level = upper(var.log_level)
    system_log_level      = "WARN"
  }

  tags = var.tags

  # The role must be able to write logs (and, for an event source mapping,
  # read the stream) before the function is invoked for the first time.
  depends_on = [aws_iam_role_policy.logs, aws_iam_role_policy.this]
}

resource "aws_cloudwatch_metric_alarm" "errors" {
  alarm_name          = "${var.name}-errors"
  alarm_description   = "${var.name} returned errors (function errors, timeouts or crashes)."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.this.function_name }
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

resource "aws_cloudwatch_metric_alarm" "throttles" {
  alarm_name          = "${var.name}-throttles"
  alarm_description   = "${var.name} was throttled (concurrency limit reached)."
  namespace           = "AWS/Lambda"
  metric_name         = "Throttles"
  dimensions          = { FunctionName = aws_lambda_function.this.function_name }
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
